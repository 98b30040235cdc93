"""The local server over real HTTP, driven the way an AG-UI client drives it.

One `local.server` process serves the module from its own table and bucket on the moto
server; every test works in a fresh chat. Bodies are built with the `ag-ui-protocol`
models, every SSE `data:` line is parsed back into them, and the store is read directly
to judge what happened.
"""

from __future__ import annotations

import datetime
import http.client
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest
from ag_ui.core import (
    EventType,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)

from interlock.adapters.factory import Stores, build_stores
from interlock.records import RequestRecord, RequestState
from interlock.timing import StorePolicy, SystemClock
from local import devtokens
from local.emulator import Emulator
from tests.conftest import fresh_storage
from tests.e2e.http_client import (
    REQUEST_TIMEOUT_S,
    Client,
    LocalServer,
    Reply,
    Stream,
    answer,
    local_server,
    resume_body,
    run_body,
    secret_of,
)
from tests.e2e.support import outbox_records
from tests.turns import append_turn

pytestmark = pytest.mark.server

DOWNLOAD: Final = "please download the reference table"
REPORT: Final = "please send the weekly report"
SITE: Final = "data.example.org"
APPROVE: Final = {"decision": "approve"}


@pytest.fixture(scope="module")
def http_aws(emulator: Emulator) -> dict[str, Any]:
    """One table and bucket for the module's server; every test works in its own chat."""
    return fresh_storage(emulator.endpoint, "interlock-http")


@pytest.fixture(scope="module")
def http_stores(http_aws: dict[str, Any]) -> Stores:
    """The server's store, read directly to judge what a request did."""
    return build_stores(
        http_aws["dynamodb"], http_aws["s3"], http_aws["table"], http_aws["bucket"], StorePolicy()
    )


@pytest.fixture(scope="module")
def server(
    http_aws: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    # One process for the module: its start-up (importing the agent stack) dominates.
    log = tmp_path_factory.mktemp("local-server") / "server.log"
    with local_server(http_aws, log) as running:
        yield running


@pytest.fixture
def alice(server: LocalServer) -> Client:
    return server.client(someone("alice"), ["reporter"])


@pytest.fixture
def chat() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"


def someone(name: str) -> str:
    # Users are per test: limits on open requests and asks are per user, and the server
    # is shared by the module.
    return f"{name}-{uuid.uuid4().hex[:8]}"


def now_ms() -> int:
    return SystemClock().now_ms()


def pointer(stores: Stores, chat: str) -> RequestRecord:
    request = stores.requests.get(chat, now_ms())
    assert request is not None, f"chat {chat} has no request"
    return request


def calls(stream: Stream) -> list[tuple[str, str]]:
    starts = [e for e in stream.events if isinstance(e, ToolCallStartEvent)]
    return [(e.tool_call_id, e.tool_call_name) for e in starts]


def pause(client: Client, chat: str, prompt: str = DOWNLOAD) -> Interrupt:
    return client.run(chat, prompt).interrupt


def test_a_turn_pauses_with_a_card(alice: Client, chat: str, http_stores: Stores) -> None:
    # Given a chat with no history
    # When alice asks for a download the agent has no approval for
    stream = alice.run(chat, DOWNLOAD)

    # Then the run finishes with an interrupt outcome carrying the whole card
    interrupt = stream.interrupt
    assert interrupt.id.startswith("v1:")
    assert interrupt.reason == "approval:download"
    assert interrupt.message
    started = {call_id for call_id, _ in calls(stream)}
    answered = {e.tool_call_id for e in stream.events if isinstance(e, ToolCallResultEvent)}
    assert interrupt.tool_call_id in started - answered  # the paused call has no result yet
    schema = interrupt.response_schema or {}
    assert schema["required"] == ["decision"]
    assert schema["properties"]["decision"] == {"enum": ["approve", "reject"]}
    # The deadline is the metadata's, not the interrupt's `expiresAt`: a client would
    # refuse to send anything once that passed, and hold the interrupt for good
    assert interrupt.expires_at is None
    metadata = interrupt.metadata or {}
    expires = datetime.datetime.fromisoformat(metadata["expiresAt"])
    assert expires > datetime.datetime.now(datetime.UTC)
    assert metadata["card"]["sites"] == [SITE]
    assert metadata["card"]["tool_use_id"] == interrupt.tool_call_id
    secret_of(interrupt)
    # And the store holds the pending request behind it
    stored = pointer(http_stores, chat)
    assert (stored.interrupt_id, stored.state) == (interrupt.id, RequestState.PENDING)
    assert stored.expires_at == int(expires.timestamp())


def test_reading_the_request_rotates_the_pages_secret_and_keeps_the_streams(
    alice: Client, chat: str, http_stores: Stores
) -> None:
    # Given a paused turn and the secret its card came with
    interrupt = pause(alice, chat)
    offered = secret_of(interrupt)

    # When alice reads the open request on the card page, in two tabs
    first = alice.get(f"/chats/{chat}/request")
    view = alice.get(f"/chats/{chat}/request")

    # Then it shows the same request with a fresh secret each time
    assert view["interruptId"] == interrupt.id
    assert view["state"] == "pending"
    assert view["toolCallId"] == interrupt.tool_call_id
    assert len({offered, first["secret"], view["secret"]}) == 3
    # And the page's older copy is refused without touching the request
    stale = alice.post_resume(chat, answer(interrupt, APPROVE, first["secret"]))
    assert stale.error() == (403, "refused")
    assert pointer(http_stores, chat).state is RequestState.PENDING
    assert pointer(http_stores, chat).claim_count == 0
    # And the stream's copy, which the AG-UI front end still holds, works
    done = alice.resume(chat, answer(interrupt, APPROVE, offered))
    assert done.result["outcome"] == "completed"


def message_ids(stream: Any) -> list[str]:
    return [e.message_id for e in stream.events if e.type == "TEXT_MESSAGE_START"]


def test_approving_resumes_once_and_a_repeat_replays(
    alice: Client, chat: str, http_stores: Stores
) -> None:
    # Given a paused download
    interrupt = pause(alice, chat)
    entry = answer(interrupt, APPROVE, secret_of(interrupt))

    # When alice approves it
    first = alice.resume(chat, entry)

    # Then the run continues to the final answer, which mentions the table
    assert first.result["outcome"] == "completed"
    assert first.result["decision"] == "approved"
    assert "reference table" in first.text
    assert "id,name,value" in first.text

    # When she approves it again
    again = alice.resume(chat, entry)

    # Then the stored answer is replayed, not re-run: one snapshot of the messages with
    # the stored ones merged in by id, nothing streamed a second time
    assert again.result["outcome"] == "replayed"
    assert again.result["decision"] == "approved"
    assert [e.type for e in again.events] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    (snapshot,) = again.of_type(EventType.MESSAGES_SNAPSHOT)
    answer_id = message_ids(first)[-1]
    (final,) = [m for m in snapshot.messages if m.id == answer_id]  # the id it first had
    assert final.content == first.text.split("\n\n")[-1] or final.content in first.text
    stored_calls = {c.id for m in snapshot.messages for c in getattr(m, "tool_calls", None) or []}
    assert {call for call, _ in calls(first)} <= stored_calls  # the stored calls, not new ones
    results = {m.tool_call_id for m in snapshot.messages if m.role == "tool"}
    # The paused call got its result without starting again
    paused_call = interrupt.tool_call_id
    assert paused_call not in {e.tool_call_id for e in first.events if e.type == "TOOL_CALL_START"}
    assert paused_call in {e.tool_call_id for e in first.events if e.type == "TOOL_CALL_RESULT"}
    assert paused_call in results
    stored = pointer(http_stores, chat)
    assert (stored.state, stored.claim_count) == (RequestState.DONE, 1)


def test_two_simultaneous_approvals_resume_once(
    alice: Client, chat: str, http_stores: Stores
) -> None:
    # Given a paused download and two tabs holding the same answer
    interrupt = pause(alice, chat)
    body = resume_body(chat, "run-twin", [answer(interrupt, APPROVE, secret_of(interrupt))])
    start = threading.Barrier(2, timeout=REQUEST_TIMEOUT_S)
    replies: list[Reply] = []

    def click() -> None:
        start.wait()
        replies.append(alice.call("POST", "/resume", body))

    # When both send it at the same moment
    tabs = [threading.Thread(target=click) for _ in range(2)]
    for tab in tabs:
        tab.start()
    for tab in tabs:
        tab.join(timeout=2 * REQUEST_TIMEOUT_S)
    assert len(replies) == 2, "a resume did not return in time"

    # Then exactly one resumed the run; the other replayed it or was told to retry
    streams = [r.stream(chat, "run-twin", alice.known(chat)) for r in replies if r.status == 200]
    outcomes = sorted(s.result["outcome"] for s in streams)
    conflicts = [r.error() for r in replies if r.status != 200]
    assert outcomes in (["completed", "replayed"], ["completed"]), (outcomes, conflicts)
    assert conflicts in ([], [(409, "in_progress")]), conflicts
    # And the store counts one claim
    stored = pointer(http_stores, chat)
    assert (stored.state, stored.claim_count) == (RequestState.DONE, 1)


def test_a_deny_lets_the_agent_go_on_without_it(alice: Client, chat: str) -> None:
    # Given a paused download
    interrupt = pause(alice, chat)
    no = {"decision": "reject", "reason": "not today", "suggestion": "use last week's copy"}

    # When alice rejects it with a reason and a suggestion
    stream = alice.resume(chat, answer(interrupt, no, secret_of(interrupt)))

    # Then the agent continues without the download and passes her words on
    assert stream.result["outcome"] == "completed"
    assert stream.result["decision"] == "rejected_with_feedback"
    assert "continued without it" in stream.text
    assert "use last week's copy" in stream.text
    # And nothing was approved
    assert alice.get(f"/chats/{chat}/approvals")["approvals"] == []


def test_an_expired_request_cannot_be_approved(
    alice: Client, chat: str, http_aws: dict[str, Any], http_stores: Stores
) -> None:
    # Given a paused download whose logical expiry has passed
    interrupt = pause(alice, chat)
    http_aws["dynamodb"].update_item(
        TableName=http_aws["table"],
        Key={"pk": {"S": f"CHAT#{chat}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(now_ms() // 1000 - 60)}},
    )

    # When alice approves it
    reply = alice.post_resume(chat, answer(interrupt, APPROVE, secret_of(interrupt)))

    # Then she is told nobody answered in time, and it reads as expired, with no secret
    assert reply.error() == (410, "timed_out")
    view = alice.get(f"/chats/{chat}/request")
    assert view["state"] == "expired"
    assert "secret" not in view

    # And cancelling it, AG-UI's way past it, is a short finished run that changes nothing
    before = pointer(http_stores, chat)
    abandoned = alice.resume(chat, answer(interrupt, None, secret_of(interrupt), "cancelled"))
    assert abandoned.result["outcome"] == "abandoned"
    assert pointer(http_stores, chat) == before
    # So the thread continues: a new turn runs
    assert alice.run(chat, "Please download the reference table").interrupt is not None
    assert pointer(http_stores, chat).claim_count == 0


def test_a_newer_turn_expires_the_card(alice: Client, chat: str, http_stores: Stores) -> None:
    # Given a paused download, and a user turn saved in the chat after it
    interrupt = pause(alice, chat)
    append_turn(http_stores, chat, {"role": "user", "text": "x"}, now_ms())

    # When alice approves the old card
    reply = alice.post_resume(chat, answer(interrupt, APPROVE, secret_of(interrupt)))

    # Then it is expired, not run against a conversation that moved on
    assert reply.error() == (410, "expired")
    stored = pointer(http_stores, chat)
    assert (stored.state, stored.claim_count) == (RequestState.EXPIRED, 0)


def test_a_lost_role_expires_the_card_and_sends_nothing(
    server: LocalServer,
    alice: Client,
    chat: str,
    http_aws: dict[str, Any],
    http_stores: Stores,
) -> None:
    # Given a report paused at the admission gate while alice was a reporter
    interrupt = pause(alice, chat, REPORT)
    assert interrupt.reason == "approval:action"

    # When she approves with a token that no longer carries the role
    demoted = server.client(alice.user)
    reply = demoted.post_resume(chat, answer(interrupt, APPROVE, secret_of(interrupt)))

    # Then the card expires and the report is never sent
    assert reply.error() == (410, "expired")
    assert pointer(http_stores, chat).state is RequestState.EXPIRED
    sent = [r for r in outbox_records(http_aws) if r["pk"]["S"].startswith(f"OUTBOX#{chat}#")]
    assert sent == []


def test_revoking_an_approval_makes_the_next_turn_ask_again(alice: Client, chat: str) -> None:
    # Given an approved download, which covers the rest of the chat
    interrupt = pause(alice, chat)
    alice.resume(chat, answer(interrupt, APPROVE, secret_of(interrupt)))
    listed = alice.get(f"/chats/{chat}/approvals")["approvals"]
    assert [(a["kind"], a["name"]) for a in listed] == [("site", SITE)]
    assert alice.run(chat, DOWNLOAD).result["outcome"] == "completed"  # no card this time

    # When alice revokes the site
    revoked = alice.call("DELETE", f"/chats/{chat}/approvals/site/{SITE}")

    # Then it is gone, and the next download asks again
    assert revoked.status == 200, revoked.describe()
    assert revoked.json() == {"revoked": {"kind": "site", "name": SITE}}
    assert alice.get(f"/chats/{chat}/approvals")["approvals"] == []
    again = alice.run(chat, DOWNLOAD).interrupt
    assert again.id != interrupt.id
    assert (again.metadata or {})["card"]["sites"] == [SITE]


def test_every_bad_request_gets_its_error_and_changes_nothing(
    server: LocalServer, alice: Client, chat: str, http_aws: dict[str, Any]
) -> None:
    # Given a paused download
    interrupt = pause(alice, chat)
    secret = secret_of(interrupt)
    before = snapshot(http_aws)
    callers = {
        "alice": alice,
        "bob": server.client(someone("bob"), ["reporter"]),
        "nobody": Client(server.url, None),
        "forger": Client(server.url, devtokens.issue(b"not the server's key", alice.user)),
        "garbler": Client(server.url, str(alice.token).rsplit(".", 1)[0] + ".sign\u00e9d"),
    }

    cases = bad_requests(chat, interrupt)

    # When every kind of bad request is sent
    got = {
        bad.what: refusal(callers[bad.who].call(bad.method, bad.path, bad.body)) for bad in cases
    }

    # Then each gets its documented status and code
    assert got == {bad.what: bad.expected for bad in cases}
    # And the table and the bucket are exactly as they were
    assert snapshot(http_aws) == before
    # And the request still answers with the secret it was offered with
    done = alice.resume(chat, answer(interrupt, APPROVE, secret))
    assert done.result["outcome"] == "completed"


def refusal(reply: Reply) -> tuple[int, str]:
    return reply.error() if reply.status >= 400 else (reply.status, reply.describe())


@dataclass(frozen=True)
class Bad:
    """A request that must be turned away with `expected` (status, code)."""

    what: str
    expected: tuple[int, str]
    method: str
    path: str
    body: str | None = None
    who: str = "alice"


def bad_requests(chat: str, interrupt: Interrupt) -> list[Bad]:
    """Bad bodies, tokens and callers for a chat paused on `interrupt`."""
    secret = secret_of(interrupt)
    run, resume, request = "/runs", "/resume", f"/chats/{chat}/request"

    def resume_with(*entries: ResumeEntry) -> str:
        return resume_body(chat, "run-bad", entries)

    def answering(payload: Any, to: str = interrupt.id, **metadata: Any) -> str:
        entry = ResumeEntry(interrupt_id=to, status="resolved", payload=payload, metadata=metadata)
        return resume_with(entry)

    bare = RunAgentInput(thread_id=chat, run_id="run-bad", messages=[])
    carrying = RunAgentInput(
        thread_id=chat,
        run_id="run-bad",
        messages=[UserMessage(id="m1", role="user", content=DOWNLOAD)],
        resume=[answer(interrupt, APPROVE, "not-the-secret")],
    )
    good_run, good_resume = run_body(chat, "run-bad", DOWNLOAD), answering(APPROVE, secret=secret)
    other = ResumeEntry(interrupt_id="v1:other", status="resolved", payload=APPROVE)
    bad_body, invalid = (400, "bad_request"), (422, "invalid_payload")
    forbidden, unauthorized = (403, "forbidden"), (401, "unauthorized")
    head = f'{{"threadId":"{chat}","runId":"r","messages":[],'
    deep = head + '"x":' + "[" * 1000 + "]" * 1000 + "}"
    huge_int = head + '"n":' + "9" * 5000 + "}"
    control = run_body(chat, "r\u0007\n", DOWNLOAD)
    return [
        Bad("run: nested 1000 deep", bad_body, "POST", run, deep),
        Bad("resume: nested 1000 deep", bad_body, "POST", resume, deep),
        Bad("run: a 5000-digit integer", bad_body, "POST", run, huge_int),
        Bad("resume: a 5000-digit integer", bad_body, "POST", resume, huge_int),
        Bad("run: NaN", bad_body, "POST", run, huge_int.replace("9" * 5000, "NaN")),
        Bad("run: a lone surrogate in the prompt", invalid, "POST", run,
            run_body(chat, "run-bad", "hello LONE there").replace("LONE", "\\ud800")),
        Bad("run: over the size cap", (413, "too_large"), "POST", run, " " * 300_000 + good_run),
        Bad("run: control characters in runId", invalid, "POST", run, control),
        Bad("events: a Unicode digit", invalid, "GET", f"/chats/{chat}/events?after=%C2%B2"),
        Bad("turns: a negative number", invalid, "GET", f"/chats/{chat}/turns?after=-1"),
        Bad("run: not JSON", bad_body, "POST", run, "{not json"),
        Bad("resume: not JSON", bad_body, "POST", resume, "approve"),
        Bad("run: JSON array", bad_body, "POST", run, "[]"),
        Bad("resume: JSON array", bad_body, "POST", resume, f'["{chat}"]'),
        Bad("run: no threadId", invalid, "POST", run, '{"runId":"r","messages":[]}'),
        Bad("resume: no threadId", invalid, "POST", resume, '{"runId":"r","messages":[]}'),
        Bad("run: not a RunAgentInput", invalid, "POST", run, '{"prompt":"hi"}'),
        Bad("resume: not a RunAgentInput", invalid, "POST", resume, '{"answer":"yes"}'),
        # A run that carries `resume` is handed to the resume function, refused as there
        Bad("run: a resume with a wrong secret", (403, "refused"), "POST", run,
            carrying.model_dump_json(by_alias=True)),
        Bad("run: unsafe threadId", invalid, "POST", run, run_body("a#b", "r", DOWNLOAD)),
        Bad("resume: no entries", (422, "incomplete_resume"), "POST", resume,
            bare.model_dump_json(by_alias=True)),
        Bad("resume: empty entries", (422, "incomplete_resume"), "POST", resume, resume_with()),
        Bad("resume: an entry for no open interrupt", (404, "unknown"), "POST", resume,
            resume_with(answer(interrupt, APPROVE, secret), other)),
        Bad("resume: one interrupt twice", (422, "incomplete_resume"), "POST", resume,
            resume_with(answer(interrupt, APPROVE, secret), answer(interrupt, APPROVE, secret))),
        Bad("resume: no metadata", invalid, "POST", resume, resume_with(
            ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload=APPROVE))),
        Bad("resume: no secret", invalid, "POST", resume, answering(APPROVE)),
        Bad("resume: decision maybe", invalid, "POST", resume,
            answering({"decision": "maybe"}, secret=secret)),
        Bad("resume: extra field", invalid, "POST", resume,
            answering({"decision": "approve", "admin": True}, secret=secret)),
        Bad("resume: packages not a list", invalid, "POST", resume,
            answering({"decision": "approve", "packages": "numpy"}, secret=secret)),
        Bad("resume: bad package name", invalid, "POST", resume,
            answering({"decision": "approve", "packages": ["numpy; rm -rf /"]}, secret=secret)),
        Bad("resume: unknown interrupt", (404, "unknown"), "POST", resume,
            answering(APPROVE, f"{interrupt.id}x", secret=secret)),
        Bad("resume: wrong secret", (403, "refused"), "POST", resume,
            answering(APPROVE, secret="not-the-secret")),
        Bad("run: new turn while pending", (409, "pending_interrupt"), "POST", run,
            run_body(chat, "r", REPORT)),
        Bad("run: no token", unauthorized, "POST", run, good_run, "nobody"),
        Bad("resume: no token", unauthorized, "POST", resume, good_resume, "nobody"),
        Bad("request: no token", unauthorized, "GET", request, None, "nobody"),
        Bad("run: forged token", unauthorized, "POST", run, good_run, "forger"),
        Bad("resume: forged token", unauthorized, "POST", resume, good_resume, "forger"),
        Bad("request: forged token", unauthorized, "GET", request, None, "forger"),
        Bad("request: a signature outside ASCII", unauthorized, "GET", request, None, "garbler"),
        Bad("run: another user's chat", forbidden, "POST", run, good_run, "bob"),
        Bad("resume: another user's chat", forbidden, "POST", resume, good_resume, "bob"),
        Bad("request: another user's chat", forbidden, "GET", request, None, "bob"),
        Bad("cancel: another user's chat", forbidden, "DELETE", request, None, "bob"),
        Bad("approvals: another user's chat", forbidden, "GET", f"/chats/{chat}/approvals",
            None, "bob"),
        Bad("revoke: another user's chat", forbidden, "DELETE",
            f"/chats/{chat}/approvals/site/{SITE}", None, "bob"),
        Bad("events: another user's chat", forbidden, "GET", f"/chats/{chat}/events", None,
            "bob"),
    ]  # fmt: skip


def snapshot(aws: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """Every item of the table and every object of the bucket, in a stable order."""
    pages = aws["dynamodb"].get_paginator("scan").paginate(TableName=aws["table"])
    items = sorted(
        (item for page in pages for item in page["Items"]),
        key=lambda item: (item["pk"]["S"], item["sk"]["S"]),
    )
    listing = aws["s3"].get_paginator("list_objects_v2").paginate(Bucket=aws["bucket"])
    objects = sorted(
        (o["Key"], o["ETag"], o["Size"]) for page in listing for o in page.get("Contents", [])
    )
    return items, objects


def test_the_audit_trail_lists_a_pause_and_its_approval(alice: Client, chat: str) -> None:
    # Given a download that paused and was approved
    interrupt = pause(alice, chat)
    alice.resume(chat, answer(interrupt, APPROVE, secret_of(interrupt)))

    # When alice reads the chat's audit trail
    events = alice.get(f"/chats/{chat}/events")["events"]

    # Then it tells the story in order, numbered by increasing seq
    assert [e["type"] for e in events] == ["paused", "decision", "turn_completed"]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(e["actor"] == alice.user for e in events)
    paused, decision, completed = events
    assert paused["detail"]["turn"] == completed["detail"]["turn"] == 1
    assert paused["detail"]["interrupt_id"] == interrupt.id
    assert decision["detail"]["interrupt_id"] == interrupt.id
    assert decision["detail"]["decision"] == "approved"


def test_cancelling_the_request(
    server: LocalServer, alice: Client, chat: str, http_stores: Stores
) -> None:
    # Given a paused download
    interrupt = pause(alice, chat)

    # When another user tries to cancel it, and then alice does
    refused = server.client(someone("bob")).call("DELETE", f"/chats/{chat}/request")
    cancelled = alice.call("DELETE", f"/chats/{chat}/request")

    # Then only alice's cancel counts, and the card can no longer be answered
    assert refused.error() == (403, "forbidden")
    assert cancelled.status == 200, cancelled.describe()
    assert cancelled.json()["state"] == "cancelled"
    assert pointer(http_stores, chat).state is RequestState.CANCELLED
    late = alice.post_resume(chat, answer(interrupt, APPROVE, secret_of(interrupt)))
    assert late.error() == (410, "cancelled")
    # A client's own cancel of it afterwards is accepted as abandoning it
    gone = alice.resume(chat, answer(interrupt, None, secret_of(interrupt), "cancelled"))
    assert gone.result["outcome"] == "abandoned"


def test_a_stream_client_that_sends_no_secret_hears_a_run_error_not_an_http_error(
    alice: Client, chat: str, http_aws: dict[str, Any]
) -> None:
    # Given a paused download, and a client that dropped the STATE_SNAPSHOT carrying the
    # secret (so its resume has none) but reads an event stream, as AG-UI clients do
    interrupt = pause(alice, chat)
    before = snapshot(http_aws)
    entry = ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload=APPROVE)
    body = resume_body(chat, "run-no-secret", [entry])
    connection = http.client.HTTPConnection(alice.host, alice.port, timeout=30)
    try:
        headers = {
            "Authorization": f"Bearer {alice.token}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        }
        connection.request("POST", "/resume", body=body, headers=headers)
        response = connection.getresponse()
        status, text = response.status, response.read().decode()
    finally:
        connection.close()

    # Then the refusal arrives the AG-UI way: a stream whose run ends in RUN_ERROR
    assert status == 200, text
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"], events
    assert events[-1]["code"] == "invalid_payload"
    assert "secret" in events[-1]["message"]
    # And nothing changed: the request still answers with the secret it was offered with
    assert snapshot(http_aws) == before
    done = alice.resume(chat, answer(interrupt, APPROVE, secret_of(interrupt)))
    assert done.result["outcome"] == "completed"
