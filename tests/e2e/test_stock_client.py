"""Front ends drive Interlock unmodified, with only its URL and headers.

The stock AG-UI client (`@ag-ui/client`'s `HttpAgent`) and CopilotKit (its runtime
serving the endpoint, its client core talking to that runtime), pinned in package.json,
each in a Node process of its own. The test sends it commands, reads what the client
saw (every stream checked by `ag-ui-validate` and strict `ag_ui.core` parsing), then
reads the store to judge what really happened.
"""

from __future__ import annotations

import json
import os
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
from tests.e2e.http_client import Client, LocalServer, known_fields_only, local_server

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
# The front ends, each used as its users use it (pinned in package.json).
DRIVERS = {
    "stock": Path(__file__).with_name("stock") / "drive.mjs",
    "copilotkit": Path(__file__).with_name("stock") / "copilotkit.mjs",
}
# Nothing leaves the machine: CopilotKit's telemetry and its packages' analytics are off.
QUIET = {"COPILOTKIT_TELEMETRY_DISABLED": "true", "SCARF_ANALYTICS": "false", "DO_NOT_TRACK": "1"}
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


def conforming(result: dict[str, Any]) -> None:
    """Every event the client read parses strictly as `ag_ui.core` has it, and the
    stream passes `ag-ui-validate`."""
    from ag_ui.core import Event
    from ag_ui_validate.pytest_plugin import assert_valid_agui
    from pydantic import TypeAdapter

    strict = TypeAdapter(Event)
    for event in result["raw"]:
        known_fields_only(strict.validate_python(event))
    assert_valid_agui(result["raw"], features=["shared-state"])


def refusal(seen: dict[str, Any]) -> dict[str, Any]:
    """What a run that finished on a refused answer tells a program: `RUN_FINISHED`'s
    result `{outcome: "refused", code, message}`. The run ended with no error, so the
    client let go of the interrupt it answered (a RUN_ERROR would have left it held)."""
    assert seen["error"] is None and seen["runError"] is None, seen
    finished = seen["raw"][-1]
    assert finished["type"] == "RUN_FINISHED", seen["events"]
    result: dict[str, Any] = finished["result"]
    assert result["outcome"] == "refused", result
    # The person reads the refusal in the chat, and what became of the request
    told = seen["lastText"] or ""
    assert told.endswith(("Nothing was done on this answer.", "answer it here.")), told
    return result


def goes_on(client: StockClient) -> None:
    """After a refusal, the same client's next message is a run like any other."""
    again = client.send("run hello")
    assert again["error"] is None and again["runError"] is None, again
    assert again["events"][-1] == "RUN_FINISHED", again


class StockClient:
    """One `HttpAgent` on one thread, in its own Node process."""

    def __init__(
        self,
        server: LocalServer,
        user: str,
        *,
        driver: str = "stock",
        thread: str | None = None,
        token: str | None = None,
    ) -> None:
        node = shutil.which("node")
        assert node, "Node.js runs the stock client"
        self.thread = thread or f"stock-{uuid.uuid4().hex[:12]}"
        self.token = token or str(server.client(user, ["reporter"]).token)
        self.driver = driver
        self._process = subprocess.Popen(
            [node, str(DRIVERS[driver]), f"{server.url}/runs", self.token, self.thread],
            cwd=ROOT,
            env={**os.environ, **QUIET},
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
        if "raw" in result:
            assert result["argumentsAreJson"], "the client's stored tool-call arguments broke"
            conforming(result)
        return result

    def another(self, server: LocalServer) -> StockClient:
        """A second client of the same person on the same thread (another tab)."""
        return StockClient(
            server, "unused", driver=self.driver, thread=self.thread, token=self.token
        )

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()


@pytest.fixture(params=sorted(DRIVERS))
def client(server: LocalServer, request: pytest.FixtureRequest) -> Iterator[StockClient]:
    opened = StockClient(server, f"stock-{uuid.uuid4().hex[:8]}", driver=request.param)
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
    # It begins with the client's own messages, so the paused call's result that
    # follows names a call the stream itself knows
    assert done["events"][:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "TOOL_CALL_RESULT"]
    assert "reference table begins" in (done["lastText"] or "")
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and (request.state, request.claim_count) == (RequestState.DONE, 1)


def test_an_approval_with_an_edit_follows_the_cards_schema_and_runs_as_edited(
    client: StockClient, stock_stores: Stores
) -> None:
    # The report card says, in its response schema, which argument may be changed
    paused = client.send("run Please send the weekly report")
    (card,) = paused["pending"]
    assert card["card"] == "action", card
    editable = card["schema"]["properties"]["edits"]["properties"]
    assert list(editable) == ["recipient"] and editable["recipient"]["type"] == "string"

    # The client sends the approval with the corrected recipient, as the schema has it
    answer = {"decision": "approve", "edits": {"recipient": "ops@example.org"}}
    done = client.send("answer " + json.dumps({card["id"]: answer}))

    # The report went once, where the person said
    assert done["error"] is None and done["runError"] is None and done["pending"] == [], done
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and request.decision == "approved"
    sent = stock_stores.outbox.get(f"{client.thread}#{request.card['tool_use_id']}")
    assert sent is not None and sent["recipient"] == "ops@example.org"
    assert "changed the call before approving" in (done["lastText"] or "")


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


def test_a_deny_is_carried_out_and_nothing_is_downloaded(
    client: StockClient, stock_stores: Stores
) -> None:
    paused = client.send("run Please download the reference table")
    (card,) = paused["pending"]
    done = client.send("answer " + json.dumps({card["id"]: {"decision": "reject"}}))
    assert done["error"] is None and done["runError"] is None and done["pending"] == [], done
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and request.decision == "rejected"
    assert request.claim_count == 1


def test_a_replayed_answer_leaves_the_clients_messages_as_they_were(
    client: StockClient, stock_stores: Stores
) -> None:
    paused = client.send("run Please download the reference table")
    (card,) = paused["pending"]
    done = client.send("answer " + json.dumps({card["id"]: {"decision": "approve"}}))
    assert done["runError"] is None, done
    after_first = done["messages"]

    # The same answer again, once or five times: the stored outcome, merged by id
    for _ in range(5):
        again = client.send("replay")
        assert again["error"] is None and again["runError"] is None, again
        assert again["events"] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
        assert again["messages"] == after_first
    ids = [m["id"] for m in after_first]
    assert len(ids) == len(set(ids)), "two messages share an id"
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and request.claim_count == 1


def test_a_different_second_answer_is_refused_naming_the_first(
    client: StockClient, server: LocalServer
) -> None:
    paused = client.send("run Please download the reference table")
    (card,) = paused["pending"]
    client.send("answer " + json.dumps({card["id"]: {"decision": "approve"}}))

    # The same client, told to answer that interrupt again, denies it this time
    entry = {"interruptId": card["id"], "status": "resolved", "payload": {"decision": "reject"}}
    late = client.send("entries " + json.dumps([entry]))
    refused = refusal(late)
    assert refused["code"] == "decision_binding" and "Approved" in refused["message"], late
    # The person reads that the first answer stands, and nothing is held
    assert "that decision stands" in (late["lastText"] or "") and late["pending"] == [], late
    goes_on(client)


def test_new_input_while_an_interrupt_is_pending_is_a_run_error(
    client: StockClient, server: LocalServer
) -> None:
    paused = client.send("run Please download the reference table")
    assert paused["pending"], paused
    # A second client on the same thread, unaware of the card, sends a new message
    other = client.another(server)
    try:
        blocked = other.send("run Please send the weekly report")
    finally:
        other.close()
    assert blocked["runError"]["code"] == "pending_interrupt", blocked
    assert blocked["events"] == ["RUN_STARTED", "RUN_ERROR"], blocked


def test_a_reconnect_restores_the_pending_interrupt_and_answers_it(
    client: StockClient, server: LocalServer, stock_stores: Stores
) -> None:
    paused = client.send("run Please download the reference table")
    (card,) = paused["pending"]

    # The page was reloaded: a new client on the thread, with nothing in memory
    fresh = client.another(server)
    try:
        restored = fresh.send("reconnect")
        assert restored["error"] is None and restored["runError"] is None, restored
        assert [p["id"] for p in restored["pending"]] == [card["id"]]
        assert restored["pending"][0]["toolCallId"] in {
            c["id"] for m in restored["messages"] for c in m.get("toolCalls", [])
        }
        # The old tab's secret was retired by the reconnect: its answer is refused, and
        # the card offered to it again (with a fresh secret, as a reconnect hands out)
        stale = client.send("answer " + json.dumps({card["id"]: {"decision": "reject"}}))
        assert refusal(stale)["code"] == "refused", stale
        assert [p["id"] for p in stale["pending"]] == [card["id"]], stale
        assert "opened elsewhere" in (stale["lastText"] or "")
        # Which retired the reconnected client's in turn: its answer is offered back
        # to it the same way, and its next answer runs, unmodified
        bounced = fresh.send("answer " + json.dumps({card["id"]: {"decision": "approve"}}))
        assert refusal(bounced)["code"] == "refused", bounced
        done = fresh.send("answer " + json.dumps({card["id"]: {"decision": "approve"}}))
        assert done["runError"] is None and done["pending"] == [], done
        assert "reference table begins" in (done["lastText"] or "")
    finally:
        fresh.close()
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and (request.decision, request.claim_count) == ("approved", 1)


def test_a_card_opened_on_the_card_page_is_still_answered_by_the_front_end(
    server: LocalServer, stock_stores: Stores
) -> None:
    user = f"stock-{uuid.uuid4().hex[:8]}"
    page = server.client(user, ["reporter"])
    for driver in sorted(DRIVERS):
        client = StockClient(server, user, driver=driver, token=str(page.token))
        try:
            paused = client.send("run Please download the reference table")
            (card,) = paused["pending"]
            # The same person opens the card on the card page, twice (two tabs): each
            # read issues the page a fresh secret, and the front end's stays good.
            for _ in range(2):
                assert page.get(f"/chats/{client.thread}/request")["secret"]
            done = client.send("answer " + json.dumps({card["id"]: {"decision": "approve"}}))
            assert done["runError"] is None and done["pending"] == [], (driver, done)
            assert "reference table begins" in (done["lastText"] or "")
        finally:
            client.close()
        stored = stock_stores.requests.get(client.thread, SystemClock().now_ms())
        assert stored is not None and (stored.decision, stored.claim_count) == ("approved", 1)


def test_an_answer_that_breaks_the_schema_is_refused_and_the_card_offered_again(
    client: StockClient, stock_aws: dict[str, Any], stock_stores: Stores
) -> None:
    paused = client.send("run Please download the reference table")
    (card,) = paused["pending"]
    before = _request_item(stock_aws, client.thread)
    bad = client.send("answer " + json.dumps({card["id"]: {"decision": "maybe"}}))
    # Refused, and the same card offered again with the secret the client holds: the
    # stored request is exactly as it was
    assert refusal(bad)["code"] == "invalid_payload", bad
    assert [p["id"] for p in bad["pending"]] == [card["id"]], bad
    assert _request_item(stock_aws, client.thread) == before
    # And the client's next answer, a valid one, runs
    done = client.send("answer " + json.dumps({card["id"]: {"decision": "approve"}}))
    assert done["runError"] is None and done["pending"] == [], done
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and (request.decision, request.claim_count) == ("approved", 1)


def _request_item(aws: dict[str, Any], chat: str) -> dict[str, Any]:
    item: dict[str, Any] = aws["dynamodb"].get_item(
        TableName=aws["table"],
        Key={"pk": {"S": f"CHAT#{chat}"}, "sk": {"S": "REQUEST"}},
        ConsistentRead=True,
    )["Item"]
    return item


@pytest.fixture(scope="module")
def twin_server(
    stock_aws: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    """The endpoint serving a user's agent whose batch pauses on two confirmations."""
    log = tmp_path_factory.mktemp("twin-server") / "server.log"
    with local_server(
        stock_aws, log, extra_env={"INTERLOCK_AGENT": "tests.api.twin_agent:build"}
    ) as running:
        yield running


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_two_interrupts_are_answered_together_in_one_resume(
    twin_server: LocalServer, stock_stores: Stores, driver: str
) -> None:
    client = StockClient(twin_server, f"twin-{uuid.uuid4().hex[:8]}", driver=driver)
    try:
        paused = client.send("run refund both orders")
        assert [p["card"] for p in paused["pending"]] == ["confirm", "confirm"], paused
        first, second = (p["id"] for p in paused["pending"])
        answers = {first: {"decision": "approve"}, second: {"decision": "reject"}}
        done = client.send("answer " + json.dumps(answers))
    finally:
        client.close()
    assert done["error"] is None and done["runError"] is None and done["pending"] == [], done
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and request.claim_count == 1
    keys = [f"{client.thread}#{a.card['tool_use_id']}" for a in request.asked]
    assert [stock_stores.outbox.get(k) for k in keys] == [{"refund": "A-1", "amount": 40}, None]


def test_an_answer_to_no_such_interrupt_is_refused_and_the_card_offered_again(
    client: StockClient, stock_stores: Stores
) -> None:
    paused = client.send("run Please download the reference table")
    (card,) = paused["pending"]
    # The open card answered, and one more entry for an interrupt that is not there
    entries = [
        {"interruptId": card["id"], "status": "resolved", "payload": {"decision": "approve"}},
        {"interruptId": "v1:tool_call:nothing:0", "status": "resolved", "payload": {}},
    ]
    unknown = client.send("entries " + json.dumps(entries))
    assert refusal(unknown)["code"] == "unknown", unknown
    assert [p["id"] for p in unknown["pending"]] == [card["id"]], unknown
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and request.claim_count == 0


def test_an_answer_after_the_expiry_is_refused_runs_nothing_and_the_thread_goes_on(
    client: StockClient, stock_aws: dict[str, Any], stock_stores: Stores
) -> None:
    paused = client.send("run Please download the reference table")
    (card,) = paused["pending"]
    # The request's expiry passes on the server (the client's own clock has not seen it)
    stock_aws["dynamodb"].update_item(
        TableName=stock_aws["table"],
        Key={"pk": {"S": f"CHAT#{client.thread}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(SystemClock().now_ms() // 1000 - 60)}},
    )
    late = client.send("answer " + json.dumps({card["id"]: {"decision": "approve"}}))
    assert refusal(late)["code"] == "timed_out", late
    assert late["pending"] == [] and "too late" in (late["lastText"] or ""), late
    assert "Nothing was done on this answer." in (late["lastText"] or "")
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and request.claim_count == 0
    goes_on(client)


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_a_resume_that_leaves_an_interrupt_unanswered_is_refused_and_changes_nothing(
    twin_server: LocalServer, stock_stores: Stores, driver: str
) -> None:
    client = StockClient(twin_server, f"twin-{uuid.uuid4().hex[:8]}", driver=driver)
    try:
        paused = client.send("run refund both orders")
        first = paused["pending"][0]["id"]
        # The client holding both cards refuses to send an answer to one: it says so itself
        entry = {"interruptId": first, "status": "resolved", "payload": {"decision": "approve"}}
        partial = client.send("entries " + json.dumps([entry]))
        assert "not addressed by resume" in (partial["error"] or ""), partial
    finally:
        client.close()
    # And an event-stream client that sends it anyway is refused in the stream, both
    # cards offered again
    secret = paused["raw"][-2]["snapshot"]["interlock"]["secret"]
    body = {
        "threadId": client.thread,
        "runId": "partial",
        "messages": [],
        "state": {"interlock": {"secret": secret}},
        "resume": [entry],
    }
    events = stream_events(twin_server, client.token, body)
    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[-1]["result"]["code"] == "incomplete_resume"
    offered = [i["id"] for i in events[-1]["outcome"]["interrupts"]]
    assert offered == [p["id"] for p in paused["pending"]]
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and (request.state, request.claim_count) == (RequestState.PENDING, 0)


def stream_events(server: LocalServer, token: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a RunAgentInput as an event-stream client would; the events it reads."""
    import urllib.request

    request = urllib.request.Request(
        f"{server.url}/runs",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        },
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    return [
        json.loads(line.removeprefix("data: "))
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


def test_an_answer_to_a_cancelled_request_is_refused_and_the_thread_goes_on(
    client: StockClient, server: LocalServer, stock_stores: Stores
) -> None:
    paused = client.send("run Please download the reference table")
    (card,) = paused["pending"]
    # The person cancelled it elsewhere (the card page, the API)
    owner = Client(server.url, client.token)  # the same person
    assert owner.call("DELETE", f"/chats/{client.thread}/request").status == 200
    late = client.send("answer " + json.dumps({card["id"]: {"decision": "approve"}}))
    assert refusal(late)["code"] == "cancelled", late
    assert late["pending"] == [], late
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and request.claim_count == 0
    goes_on(client)


def test_an_answer_while_another_worker_holds_the_claim_is_refused(
    client: StockClient, stock_aws: dict[str, Any], stock_stores: Stores
) -> None:
    paused = client.send("run Please download the reference table")
    (card,) = paused["pending"]
    # Another worker holds the request's claim, its lease alive
    until = SystemClock().now_ms() + 60_000
    stock_aws["dynamodb"].update_item(
        TableName=stock_aws["table"],
        Key={"pk": {"S": f"CHAT#{client.thread}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET #s = :claimed, lease_token = :t, lease_expires_at_ms = :u, "
        "worker = :w",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={
            ":claimed": {"S": "claimed"},
            ":t": {"S": "another-workers-token"},
            ":u": {"N": str(until)},
            ":w": {"S": "another-worker"},
        },
    )
    busy = client.send("answer " + json.dumps({card["id"]: {"decision": "approve"}}))
    assert refusal(busy)["code"] == "in_progress", busy
    assert busy["pending"] == [] and "being carried out" in (busy["lastText"] or ""), busy
    request = stock_stores.requests.get(client.thread, SystemClock().now_ms())
    assert request is not None and request.lease_token == "another-workers-token"


def test_a_new_message_while_a_turn_runs_is_a_run_error(
    client: StockClient, stock_aws: dict[str, Any], stock_stores: Stores
) -> None:
    done = client.send("run hello")
    assert done["runError"] is None, done
    # Another tab's turn of this chat is running right now (its admission is held)
    stock_aws["dynamodb"].update_item(
        TableName=stock_aws["table"],
        Key={"pk": {"S": f"CHAT#{client.thread}"}, "sk": {"S": "META"}},
        UpdateExpression="SET run_token = :t, run_until_ms = :u",
        ExpressionAttributeValues={
            ":t": {"S": "another-tabs-turn"},
            ":u": {"N": str(SystemClock().now_ms() + 60_000)},
        },
    )
    busy = client.send("run Please download the reference table")
    assert busy["runError"]["code"] == "turn_running", busy
    assert stock_stores.requests.get(client.thread, SystemClock().now_ms()) is None
