"""A Bedrock that cannot be reached (nothing listens where it is said to be) or signed
for (no credentials) ends the turn as `model_failed`, naming the cause, and the failure
is logged with its traceback; the chat is free again."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunErrorEvent
from botocore.exceptions import EndpointConnectionError, NoCredentialsError
from strands.types.exceptions import EventLoopException

from interlock.errors import StoreError
from interlock.harness.agent import model_failure
from local.emulator import Emulator
from tests.conftest import fresh_storage
from tests.e2e.http_client import local_server, parse_sse
from tests.e2e.test_http import DOWNLOAD

pytestmark = pytest.mark.server


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("cause", "named"),
    [
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:9/x"), "Could not connect"),
        (NoCredentialsError(), "Unable to locate credentials (NoCredentialsError)"),
    ],
)
def test_an_unreachable_or_unsigned_model_is_a_model_failure_and_logged(
    cause: Exception, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    # As Strands raises it: the SDK's error, wrapped by the event loop
    try:
        try:
            raise cause
        except Exception as inner:
            raise EventLoopException(inner, {}) from inner
    except EventLoopException as failure:
        with caplog.at_level(logging.ERROR, logger="interlock"):
            failed = model_failure(failure)

    assert failed is not None and failed.code == "model_failed"
    assert named in str(failed)
    (logged,) = [r for r in caplog.records if r.name == "interlock.harness.agent"]
    assert logged.exc_info is not None and named in logged.getMessage()


def test_a_store_that_cannot_be_reached_is_not_the_models_failure() -> None:
    try:
        try:
            raise EndpointConnectionError(endpoint_url="http://dynamodb")
        except Exception as inner:
            raise StoreError("write failed: EndpointConnectionError") from inner
    except StoreError as failure:
        assert model_failure(failure) is None


def test_a_closed_bedrock_port_ends_the_turn_as_model_failed(
    emulator: Emulator, tmp_path: Path
) -> None:
    aws: dict[str, Any] = fresh_storage(emulator.endpoint, "interlock-unreachable")
    env = {
        "INTERLOCK_MODEL": "bedrock:anthropic.local-claude-v1",
        "INTERLOCK_BEDROCK_URL": f"http://127.0.0.1:{closed_port()}",
        "AWS_MAX_ATTEMPTS": "1",  # one refused connection is enough to know
    }
    log = tmp_path / "server.log"
    with local_server(aws, log, extra_env=env) as server:
        alice = server.client("alice-unreachable", ["reporter"])
        reply = alice.post_run("unreachable-1", DOWNLOAD)
        again = alice.post_run("unreachable-1", DOWNLOAD)

    assert reply.status == 200, reply.describe()
    events = parse_sse(reply.body.decode())
    last = events[-1]
    assert isinstance(last, RunErrorEvent), [e.type for e in events]
    assert last.code == "model_failed", last
    assert "Could not connect to the endpoint URL" in last.message, last.message
    # The chat is free again: the next turn fails the same way, not as a busy chat
    assert parse_sse(again.body.decode())[-1].code == "model_failed"  # type: ignore[attr-defined]
    # And the server logged it, as JSON through Powertools, with the traceback
    logged = [
        json.loads(line)
        for line in log.read_text().splitlines()
        if line.startswith("{") and "the model could not answer" in line
    ]
    assert logged, log.read_text()[-2000:]
    assert logged[0]["level"] == "ERROR"
    assert "EndpointConnectionError" in logged[0]["exception"]
