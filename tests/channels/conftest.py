"""Fixtures for the channel tier: the local API over in-process moto, with Slack and
Telegram played by local fakes and their secrets in (moto's) Secrets Manager."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from moto import mock_aws
from werkzeug.test import Client

from local.server import LocalApi
from tests.api.conftest import BufferedClient
from tests.channels import fakes
from tests.conftest import _clients


@dataclass
class Setup:
    client: Client
    key: bytes
    slack: fakes.Platform
    telegram: fakes.Platform
    stores: Any


@pytest.fixture
def channels(monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    from aws_lambda_powertools.utilities import parameters

    parameters.clear_caches()
    with fakes.serve(fakes.FakeSlack) as slack, fakes.serve(fakes.FakeTelegram) as telegram:
        for name, value in {
            "INTERLOCK_TABLE": "channel-table",
            "INTERLOCK_BUCKET": "channel-bucket",
            "INTERLOCK_MODEL": "scripted",
            "INTERLOCK_FETCH": "demo",
            "INTERLOCK_SLACK_SECRET": "interlock/slack",
            "INTERLOCK_TELEGRAM_SECRET": "interlock/telegram",
            "INTERLOCK_SLACK_API_URL": slack.url,
            "INTERLOCK_TELEGRAM_API_URL": telegram.url,
            "INTERLOCK_PAGE_URL": "https://cards.example.com/",
            "POWERTOOLS_SERVICE_NAME": "interlock",
            "POWERTOOLS_METRICS_NAMESPACE": "Interlock",
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_TRACE_DISABLED": "true",
        }.items():
            monkeypatch.setenv(name, value)
        with mock_aws():
            from interlock.adapters.factory import build_stores
            from interlock.adapters.schema import create_storage

            clients = _clients(endpoint=None)
            create_storage(clients["dynamodb"], clients["s3"], "channel-table", "channel-bucket")
            import boto3

            manager = boto3.client("secretsmanager", region_name="us-east-1")
            manager.create_secret(
                Name="interlock/slack",
                SecretString=json.dumps(
                    {"botToken": fakes.SLACK_TOKEN, "signingSecret": fakes.SLACK_SIGNING_SECRET}
                ),
            )
            manager.create_secret(
                Name="interlock/telegram",
                SecretString=json.dumps(
                    {
                        "botToken": fakes.TELEGRAM_TOKEN,
                        "webhookSecret": fakes.TELEGRAM_WEBHOOK_SECRET,
                    }
                ),
            )
            key = secrets.token_bytes(32)
            stores = build_stores(
                clients["dynamodb"], clients["s3"], "channel-table", "channel-bucket"
            )
            yield Setup(BufferedClient(LocalApi(key)), key, slack, telegram, stores)
        parameters.clear_caches()
