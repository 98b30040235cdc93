"""Fixtures for the handler tier: the local API over in-process moto."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from werkzeug.test import Client

from local.server import LocalApi
from tests.conftest import _clients


class BufferedClient(Client):
    """Reads every response whole, as an HTTP client would, so a run has ended when a
    call returns (a WSGI response that is never read never runs its stream)."""

    def open(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("buffered", True)
        return super().open(*args, **kwargs)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Client, bytes]]:
    for name, value in {
        "INTERLOCK_TABLE": "api-table",
        "INTERLOCK_BUCKET": "api-bucket",
        "INTERLOCK_MODEL": "scripted",
        "INTERLOCK_FETCH": "demo",
        "POWERTOOLS_SERVICE_NAME": "interlock",
        "POWERTOOLS_METRICS_NAMESPACE": "Interlock",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        from interlock.adapters.schema import create_storage

        clients = _clients(endpoint=None)
        create_storage(clients["dynamodb"], clients["s3"], "api-table", "api-bucket")
        key = secrets.token_bytes(32)
        yield BufferedClient(LocalApi(key)), key
