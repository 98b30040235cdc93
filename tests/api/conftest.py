"""Fixtures for the handler tier: the local API on the in-memory stores, or over
in-process moto where a test reaches into DynamoDB itself."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from werkzeug.test import Client

from local.memory import Memory, memory_stores
from local.server import LocalApi
from tests.conftest import _clients


class BufferedClient(Client):
    """Reads every response whole, as an HTTP client would, so a run has ended when a
    call returns (a WSGI response that is never read never runs its stream)."""

    def open(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("buffered", True)
        # As a server on 127.0.0.1 sees a caller on this machine (werkzeug's test
        # environment names no peer at all).
        kwargs["environ_base"] = {"REMOTE_ADDR": "127.0.0.1", **kwargs.get("environ_base", {})}
        return super().open(*args, **kwargs)


def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
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


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Client, bytes]]:
    """The local API on the in-memory stores (`local.memory`); any other AWS call (a
    queue, a metric) still meets moto, never a real account."""
    from interlock import admin
    from interlock.api import wiring

    _environment(monkeypatch)
    memory = Memory()
    for module in (wiring, admin):  # the two that build the stores from the environment
        monkeypatch.setattr(
            module, "stores_from_env", lambda policy=None: memory_stores(policy, memory)
        )
    with mock_aws():
        key = secrets.token_bytes(32)
        yield BufferedClient(LocalApi(key)), key


@pytest.fixture
def moto_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Client, bytes]]:
    """The local API over in-process moto: for a test that changes what DynamoDB holds
    behind the API's back."""
    _environment(monkeypatch)
    with mock_aws():
        from interlock.adapters.schema import create_storage

        clients = _clients(endpoint=None)
        create_storage(clients["dynamodb"], clients["s3"], "api-table", "api-bucket")
        key = secrets.token_bytes(32)
        yield BufferedClient(LocalApi(key)), key
