"""The stock AG-UI client drives Interlock with only its URL and headers.

`@ag-ui/client`'s `HttpAgent` (pinned in package.json) posts every run of a thread,
answers included, to one URL. A Node process runs it; the test sends it commands and
reads what the client saw, then reads the store to judge what really happened.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlock.adapters.factory import Stores, build_stores
from interlock.records import RequestState
from interlock.timing import StorePolicy, SystemClock
from local.emulator import Emulator
from tests.conftest import fresh_storage
from tests.e2e.http_client import LocalServer, local_server

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("stock") / "drive.mjs"
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def stock_aws(emulator: Emulator) -> dict[str, Any]:
    return fresh_storage(emulator.endpoint, "interlock-stock")


@pytest.fixture(scope="module")
def stock_stores(stock_aws: dict[str, Any]) -> Stores:
    return build_stores(
        stock_aws["dynamodb"],
        stock_aws["s3"],
        stock_aws["table"],
        stock_aws["bucket"],
        StorePolicy(),
    )


@pytest.fixture(scope="module")
def server(
    stock_aws: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    log = tmp_path_factory.mktemp("stock-server") / "server.log"
    with local_server(stock_aws, log) as running:
        yield running


class StockClient:
    """One `HttpAgent` on one thread, in its own Node process."""

    def __init__(self, server: LocalServer, user: str) -> None:
        node = shutil.which("node")
        assert node, "Node.js runs the stock client"
        self.thread = f"stock-{uuid.uuid4().hex[:12]}"
        token = server.client(user, ["reporter"]).token
        self._process = subprocess.Popen(
            [node, str(DRIVER), f"{server.url}/runs", str(token), self.thread],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, line: str) -> dict[str, Any]:
        assert self._process.stdin and self._process.stdout
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()
        reply = self._process.stdout.readline()
        assert reply, "the stock client exited"
        result: dict[str, Any] = json.loads(reply)
        assert result["argumentsAreJson"], "the client's stored tool-call arguments broke"
        return result

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()


@pytest.fixture
def client(server: LocalServer) -> Iterator[StockClient]:
    opened = StockClient(server, f"stock-{uuid.uuid4().hex[:8]}")
    yield opened
    opened.close()


def test_an_approval_is_run_interrupted_resumed_and_finished_on_one_url(
    client: StockClient, stock_stores: Stores
) -> None:
    # The run pauses: the client holds one pending interrupt, a download card
    paused = client.send("run Please download the reference table")
    assert paused["error"] is None, paused
    assert [p["card"] for p in paused["pending"]] == ["download"]

    # Answering it is a run to the same URL that carries `resume`
    first = paused["pending"][0]["id"]
    done = client.send("answer " + json.dumps({first: {"decision": "approve"}}))
    assert done["error"] is None, done
    assert done["pending"] == []
    assert done["events"][:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"], done["events"]
    assert "reference table begins" in (done["lastText"] or "")
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and (request.state, request.claim_count) == (RequestState.DONE, 1)


def test_a_question_is_answered_from_its_schema(client: StockClient) -> None:
    paused = client.send("run Please write a summary")
    (question,) = paused["pending"]
    assert question["card"] == "question"
    choice = question["schema"]["properties"]["answer"]["enum"][0]

    done = client.send("answer " + json.dumps({question["id"]: {"answer": choice}}))

    assert done["error"] is None and done["pending"] == [], done
    assert choice in (done["lastText"] or "")


def test_an_expired_interrupt_is_abandoned_and_the_thread_goes_on(
    client: StockClient, stock_aws: dict[str, Any], stock_stores: Stores
) -> None:
    paused = client.send("run Please download the reference table")
    assert paused["pending"], paused
    # Nobody answered in time: the request's logical expiry passes
    stock_aws["dynamodb"].update_item(
        TableName=stock_aws["table"],
        Key={"pk": {"S": f"CHAT#{client.thread}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(SystemClock().now_ms() // 1000 - 60)}},
    )

    # The client cancels it, AG-UI's way past it: a short finished run
    abandoned = client.send("cancel")
    assert abandoned["error"] is None and abandoned["pending"] == [], abandoned
    events = abandoned["events"]
    assert (events[0], events[-1]) == ("RUN_STARTED", "RUN_FINISHED")
    assert not [e for e in events if e.startswith("TOOL_CALL")], events  # nothing ran
    assert "nobody answered" in (abandoned["lastText"] or "")
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and request.claim_count == 0

    # And the thread continues with a new run
    again = client.send("run Please download the reference table")
    assert again["error"] is None and again["pending"], again
