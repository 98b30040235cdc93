"""Fixtures for the channel tier: the local API in-process over the moto server on
127.0.0.1 (taps are applied on worker threads, so real contention needs the server's
serialized requests), with Slack and Telegram played by local fakes and their secrets in
(moto's) Secrets Manager."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from werkzeug.test import Client

from interlock.adapters.factory import build_stores
from local.emulator import Emulator
from local.server import LocalApi
from tests.api.conftest import BufferedClient
from tests.channels import fakes
from tests.conftest import fresh_storage


@dataclass
class Setup:
    client: Client
    key: bytes
    slack: fakes.Platform
    telegram: fakes.Platform
    stores: Any
    aws: dict[str, Any]


@pytest.fixture
def channels(monkeypatch: pytest.MonkeyPatch, emulator: Emulator) -> Iterator[Setup]:
    from aws_lambda_powertools.utilities import parameters

    parameters.clear_caches()
    aws = fresh_storage(emulator.endpoint, "channels")
    suffix = aws["table"].rsplit("-", 1)[1]
    with fakes.serve(fakes.FakeSlack) as slack, fakes.serve(fakes.FakeTelegram) as telegram:
        for name, value in {
            "AWS_ENDPOINT_URL": emulator.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "INTERLOCK_TABLE": aws["table"],
            "INTERLOCK_BUCKET": aws["bucket"],
            "INTERLOCK_MODEL": "scripted",
            "INTERLOCK_FETCH": "demo",
            "INTERLOCK_SLACK_SECRET": f"interlock/slack-{suffix}",
            "INTERLOCK_TELEGRAM_SECRET": f"interlock/telegram-{suffix}",
            "INTERLOCK_SLACK_API_URL": slack.url,
            "INTERLOCK_TELEGRAM_API_URL": telegram.url,
            "INTERLOCK_PAGE_URL": "https://cards.example.com/",
            "POWERTOOLS_SERVICE_NAME": "interlock",
            "POWERTOOLS_METRICS_NAMESPACE": "Interlock",
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_TRACE_DISABLED": "true",
        }.items():
            monkeypatch.setenv(name, value)

        # Putting the secrets is the operator's job, not the code under test: its own
        # request (which carries them) is kept out of the log watch.
        logging.disable(logging.DEBUG)
        manager = boto3.client(
            "secretsmanager", region_name="us-east-1", endpoint_url=emulator.endpoint
        )
        manager.create_secret(
            Name=f"interlock/slack-{suffix}",
            SecretString=json.dumps(
                {"botToken": fakes.SLACK_TOKEN, "signingSecret": fakes.SLACK_SIGNING_SECRET}
            ),
        )
        manager.create_secret(
            Name=f"interlock/telegram-{suffix}",
            SecretString=json.dumps(
                {
                    "botToken": fakes.TELEGRAM_TOKEN,
                    "webhookSecret": fakes.TELEGRAM_WEBHOOK_SECRET,
                }
            ),
        )
        logging.disable(logging.NOTSET)
        # Everything botocore and the HTTP stack say at DEBUG reaches the log watch,
        # which fails the session if a token or signing secret is in it.
        key = secrets.token_bytes(32)
        stores = build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"])
        with debug_logging("botocore", "urllib3", "interlock"):
            yield Setup(BufferedClient(LocalApi(key)), key, slack, telegram, stores, aws)
        parameters.clear_caches()


@contextmanager
def debug_logging(*names: str) -> Iterator[None]:
    """`names` log at DEBUG inside, and at their own levels again after.

    Through `setLevel` both ways: it clears the loggers' cached answers to "is DEBUG on",
    which a plain attribute change leaves standing (DEBUG would stay on for whatever
    runs next in the process, or never come on for a logger asked before).
    """
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
