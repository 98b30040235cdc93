"""Every interaction kind, answer, policy and timeout over real HTTP.

A `local.server` process, configured with a per-agent document, serves the module from
its own table and bucket on the moto server; an AG-UI client drives it, and every SSE
line is parsed back into the protocol's models. Timeouts are made by moving a request's
`expires_at` into the past on the table and running the sweeper in this process, on a
runtime built with the same configuration, over the same table and bucket.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import pytest
from ag_ui.core import Interrupt, ResumeEntry

from examples.analyst.script import DEMO_SCENARIOS
from interlock.adapters.factory import build_stores
from interlock.config import assemble
from interlock.harness.model import ScriptedModel
from interlock.sweeper import SweepReport, sweep
from interlock.timing import StorePolicy, SystemClock
from interlock.turns import Runtime
from local.emulator import Emulator
from tests.conftest import fresh_storage
from tests.e2e.http_client import (
    Client,
    LocalServer,
    Stream,
    answer,
    local_server,
    secret_of,
)

pytestmark = pytest.mark.server

SUMMARY: Final = "please write a summary"
REGIONS: Final = "please pick regions"
EXPORT: Final = "please run the export"
DOWNLOAD: Final = "please download the reference table"
REPORT: Final = "please send the weekly report"
SUPERVISOR: Final = "supervisor"
# The module's server runs under this document: one timeout policy per kind, and a low
# risk floor for the report so only the call's own declaration can make it ask.
AGENT: Final = {
    "timeouts": {
        "approval": {"action": "deny"},
        "question": {"action": "default"},
        "info": {"action": "reroute", "reroute_role": SUPERVISOR, "reroute_extra_s": 600},
    },
    "tool_policies": {"send_report": {"risk": "low"}},
}
STRICT: Final = {"tool_policies": {"send_report": {"risk": "high"}}}
SETTINGS: Final = {"bucket_name": "reports-eu", "retention_days": 30, "notify": True}


# -- the server, its store and a sweeper over it ---------------------------------------------


@pytest.fixture(scope="module")
def kinds_aws(emulator: Emulator) -> dict[str, Any]:
    """One table and bucket for the module; every test works in its own chat."""
    return fresh_storage(emulator.endpoint, "interlock-kinds")


@pytest.fixture(scope="module")
def server(
    kinds_aws: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    with configured_server(kinds_aws, AGENT, tmp_path_factory.mktemp("kinds-server")) as running:
        yield running


@pytest.fixture(scope="module")
def strict_server(
    kinds_aws: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    with configured_server(kinds_aws, STRICT, tmp_path_factory.mktemp("strict-server")) as running:
        yield running


@pytest.fixture(scope="module")
def sweeper(kinds_aws: dict[str, Any]) -> Runtime:
    """A sweeper's runtime on the server's table and bucket, under the same document."""
    stores = build_stores(
        kinds_aws["dynamodb"],
        kinds_aws["s3"],
        kinds_aws["table"],
        kinds_aws["bucket"],
        StorePolicy(),
    )
    config = assemble({"INTERLOCK_MODEL": "scripted"}, AGENT)
    assert config.version == version_of(AGENT)
    return Runtime(stores, lambda: ScriptedModel(DEMO_SCENARIOS), config=config)


@pytest.fixture
def alice(server: LocalServer) -> Client:
    return server.client(someone("alice"), ["reporter"])


@pytest.fixture
def chat() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"


@contextmanager
def configured_server(
    aws: dict[str, Any], agent: Mapping[str, Any], workdir: Path
) -> Iterator[LocalServer]:
    """`local.server` over `aws`, reading `agent` as its per-agent configuration file."""
    document = workdir / "agent.json"
    document.write_text(json.dumps(agent))
    with local_server(
        aws, workdir / "server.log", {"INTERLOCK_AGENT_CONFIG_FILE": str(document)}
    ) as running:
        yield running


# -- helpers -----------------------------------------------------------------------------------


def someone(name: str) -> str:
    # Users are per test: limits on open requests and asks are per user.
    return f"{name}-{uuid.uuid4().hex[:8]}"


def now_ms() -> int:
    return SystemClock().now_ms()


def pause(client: Client, chat: str, prompt: str) -> Interrupt:
    return client.run(chat, prompt).interrupt


def card_of(interrupt: Interrupt) -> dict[str, Any]:
    card = (interrupt.metadata or {})["card"]
    assert isinstance(card, dict), interrupt.metadata
    return card


def refused(client: Client, chat: str, interrupt: Interrupt, payload: Any) -> tuple[int, str]:
    """The error an answer gets (it must be one), using the interrupt's offered secret."""
    reply = client.post_resume(chat, answer(interrupt, payload, secret_of(interrupt)))
    assert reply.status >= 400, reply.describe()
    return reply.error()


def answerable(client: Client, chat: str) -> str:
    """The fresh secret of the chat's request, after checking it is still pending."""
    view = client.get(f"/chats/{chat}/request")
    assert view["state"] == "pending", view
    assert "decision" not in view, view
    return str(view["secret"])


def make_overdue(aws: dict[str, Any], chat: str) -> None:
    """Move the chat's request past its logical expiry, as if nobody had answered."""
    aws["dynamodb"].update_item(
        TableName=aws["table"],
        Key={"pk": {"S": f"CHAT#{chat}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(now_ms() // 1000 - 60)}},
    )


def swept(rt: Runtime, chat: str) -> SweepReport:
    report = sweep(rt, now_ms())
    assert chat in report.chats, report
    return report


def last_assistant_text(client: Client, chat: str) -> str:
    turns = client.get(f"/chats/{chat}/turns")["turns"]
    said = [t["text"] for t in turns if t["role"] == "assistant"]
    assert said, turns
    return str(said[-1])


def config_versions(client: Client, chat: str) -> set[str]:
    """The configuration versions the chat's audit events were recorded under."""
    events = client.get(f"/chats/{chat}/events")["events"]
    return {e["detail"]["config_version"] for e in events}


def version_of(agent: Mapping[str, Any]) -> str:
    # The servers run the scripted model; nothing else in their environment is configuration.
    return assemble({"INTERLOCK_MODEL": "scripted"}, agent).version


def completed(stream: Stream, decision: str) -> Stream:
    assert stream.result["outcome"] == "completed", stream.result
    assert stream.result["decision"] == decision, stream.result
    return stream


# -- questions and information requests -------------------------------------------------------


def test_single_choice_refuses_an_unlisted_option_then_answers_once(
    alice: Client, chat: str
) -> None:
    # Given a paused question whose schema lists its options
    interrupt = pause(alice, chat, SUMMARY)
    options = ["Bullet points", "A short paragraph", "A table"]
    assert interrupt.reason == "question:question"
    assert (interrupt.response_schema or {})["properties"]["answer"]["enum"] == options

    # When alice picks an option that is not listed
    got = refused(alice, chat, interrupt, {"answer": "A poem"})

    # Then it is refused and the question stays pending and answerable
    assert got == (422, "invalid_payload")
    secret = answerable(alice, chat)

    # When she picks a listed option
    entry = answer(interrupt, {"answer": "A table"}, secret)
    done = completed(alice.resume(chat, entry), "answered")

    # Then the agent received it
    assert "I'll go with: A table." in done.text
    # And a repeat replays the stored outcome
    again = alice.resume(chat, entry)
    assert again.result["outcome"] == "replayed"
    assert again.text == done.text


def test_multiple_choice_refuses_too_many_selections(alice: Client, chat: str) -> None:
    # Given a paused question allowing one or two regions
    interrupt = pause(alice, chat, REGIONS)
    schema = (interrupt.response_schema or {})["properties"]["answer"]
    assert (schema["minItems"], schema["maxItems"]) == (1, 2)

    bad = {
        "three selections": ["North", "South", "East"],
        "none": [],
        "an unlisted region": ["North", "Centre"],
        "a repeated region": ["North", "North"],
        "not a list": "North",
    }

    # When alice sends each bad selection
    got = {what: refused(alice, chat, interrupt, {"answer": v}) for what, v in bad.items()}

    # Then each is refused; two listed regions are accepted and reach the agent
    assert got == dict.fromkeys(bad, (422, "invalid_payload"))
    entry = answer(interrupt, {"answer": ["North", "West"]}, answerable(alice, chat))
    done = completed(alice.resume(chat, entry), "answered")
    assert "go with: North, West." in done.text


def test_information_request_checks_every_field(alice: Client, chat: str) -> None:
    # Given a paused information request listing three fields
    interrupt = pause(alice, chat, EXPORT)
    fields = card_of(interrupt)["fields"]
    assert [(f["name"], f["type"], f["required"]) for f in fields] == [
        ("bucket_name", "string", True),
        ("retention_days", "integer", True),
        ("notify", "boolean", False),
    ]
    bad = {
        "missing a required field": {"bucket_name": "reports-eu"},
        "an integer out of range": {**SETTINGS, "retention_days": 366},
        "an integer of the wrong type": {**SETTINGS, "retention_days": "thirty"},
        "a boolean of the wrong type": {**SETTINGS, "notify": "yes"},
        "a string too long": {**SETTINGS, "bucket_name": "b" * 64},
        "an unknown field": {**SETTINGS, "region": "eu"},
    }

    # When alice sends each bad answer
    got = {what: refused(alice, chat, interrupt, payload) for what, payload in bad.items()}

    # Then each is refused and the request stays answerable
    assert got == dict.fromkeys(bad, (422, "invalid_payload"))
    entry = answer(interrupt, SETTINGS, answerable(alice, chat))

    # And a valid answer reaches the agent with its typed values
    done = completed(alice.resume(chat, entry), "answered")
    assert "bucket name: reports-eu" in done.text
    assert "retention days: 30" in done.text
    assert "notify: True" in done.text


# -- approvals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "payload", "decision", "said"),
    [
        ("resolved", {"decision": "approve"}, "approved", "The reference table begins"),
        (
            "resolved",
            {"decision": "reject", "reason": "not on a Friday"},
            "rejected",
            "Reason: not on a Friday",
        ),
        (
            "resolved",
            {"decision": "reject", "reason": "too big", "suggestion": "use the cached copy"},
            "rejected_with_feedback",
            "Suggestion: use the cached copy",
        ),
        ("cancelled", None, "cancelled", "The user cancelled the request"),
    ],
    ids=["approve", "reject", "reject-with-feedback", "cancelled"],
)
def test_every_approval_answer_reaches_the_agent(
    alice: Client, chat: str, status: Any, payload: Any, decision: str, said: str
) -> None:
    # Given a paused download
    interrupt = pause(alice, chat, DOWNLOAD)
    assert interrupt.reason == "approval:download"

    # When alice answers it
    stream = alice.resume(chat, answer(interrupt, payload, secret_of(interrupt), status))

    # Then the run finishes and the agent's answer carries her decision
    completed(stream, decision)
    assert said in stream.text


def test_a_cancelled_answer_tells_the_agent_the_question_was_cancelled(
    alice: Client, chat: str
) -> None:
    # Given a paused question
    interrupt = pause(alice, chat, SUMMARY)

    # When alice answers with a cancelled entry
    stream = alice.resume(chat, answer(interrupt, None, secret_of(interrupt), "cancelled"))

    # Then the run finishes and the agent was told, rather than given a guess
    completed(stream, "cancelled")
    assert "The user cancelled the question" in stream.text
    assert "Bullet points" not in stream.text


def test_deleting_the_request_cancels_a_question(alice: Client, chat: str) -> None:
    # Given a paused question
    interrupt = pause(alice, chat, SUMMARY)

    # When alice deletes the chat's request
    cancelled = alice.call("DELETE", f"/chats/{chat}/request")

    # Then it is cancelled, and a later answer is told so
    assert cancelled.status == 200, cancelled.describe()
    assert cancelled.json()["state"] == "cancelled"
    assert refused(alice, chat, interrupt, {"answer": "A table"}) == (410, "cancelled")


# -- timeouts --------------------------------------------------------------------------------


def test_an_overdue_request_not_yet_swept_reads_timed_out(
    alice: Client, chat: str, kinds_aws: dict[str, Any]
) -> None:
    # Given a paused question whose time ran out before the sweeper came by
    interrupt = pause(alice, chat, SUMMARY)
    make_overdue(kinds_aws, chat)

    # When alice answers it
    got = refused(alice, chat, interrupt, {"answer": "A table"})

    # Then she is told nobody answered in time
    assert got == (410, "timed_out")
    view = alice.get(f"/chats/{chat}/request")
    assert view["state"] == "expired"
    assert "secret" not in view


def test_an_unanswered_approval_is_denied(
    alice: Client, chat: str, kinds_aws: dict[str, Any], sweeper: Runtime
) -> None:
    # Given a paused download nobody answered in time
    interrupt = pause(alice, chat, DOWNLOAD)
    make_overdue(kinds_aws, chat)

    # When the sweeper comes by
    report = swept(sweeper, chat)

    # Then the request is settled as timed out and the agent went on without it
    assert report.timed_out >= 1
    view = alice.get(f"/chats/{chat}/request")
    assert view["decision"] == "timed_out"
    assert "secret" not in view
    said = last_assistant_text(alice, chat)
    assert "Nobody answered the request for sites data.example.org in time" in said
    # And a late answer is refused, saying the request ended unanswered: nothing runs
    entry = answer(interrupt, {"decision": "approve"}, secret_of(interrupt))
    late = alice.post_resume(chat, entry, "run-late")
    assert late.error() == (410, "timed_out")
    assert alice.get(f"/chats/{chat}/approvals")["approvals"] == []
    # While cancelling it (AG-UI's way past an interrupt that timed out) is told its end
    cancel = ResumeEntry(
        interrupt_id=interrupt.id, status="cancelled", metadata={"secret": secret_of(interrupt)}
    )
    gone = alice.resume(chat, cancel)
    assert (gone.result["outcome"], gone.result["decision"]) == ("replayed", "timed_out")
    # And the trail records the policy, and one configuration for server and sweeper
    events = alice.get(f"/chats/{chat}/events")["events"]
    timed_out = next(e for e in events if e["type"] == "timed_out")
    assert (timed_out["actor"], timed_out["detail"]["policy"]) == ("sweeper", "deny")
    assert config_versions(alice, chat) == {version_of(AGENT)}


def test_an_unanswered_question_takes_its_default(
    alice: Client, chat: str, kinds_aws: dict[str, Any], sweeper: Runtime
) -> None:
    # Given a paused question with a default, nobody answering in time
    interrupt = pause(alice, chat, SUMMARY)
    assert card_of(interrupt)["default"] == "Bullet points"
    make_overdue(kinds_aws, chat)

    # When the sweeper comes by
    report = swept(sweeper, chat)

    # Then the default reached the agent
    assert report.defaulted >= 1
    said = last_assistant_text(alice, chat)
    assert 'the default applies: "Bullet points"' in said
    assert alice.get(f"/chats/{chat}/request")["decision"] == "defaulted"
    events = alice.get(f"/chats/{chat}/events")["events"]
    timed_out = next(e for e in events if e["type"] == "timed_out")
    assert (timed_out["detail"]["policy"], timed_out["detail"]["decision"]) == (
        "default",
        "defaulted",
    )


def test_an_unanswered_information_request_is_rerouted_to_a_supervisor(
    server: LocalServer, alice: Client, chat: str, kinds_aws: dict[str, Any], sweeper: Runtime
) -> None:
    # Given a paused information request nobody answered in time, out of a supervisor's reach
    interrupt = pause(alice, chat, EXPORT)
    operator = server.client(someone("sam"), [SUPERVISOR])
    assert operator.call("GET", f"/chats/{chat}/request").error() == (403, "forbidden")
    make_overdue(kinds_aws, chat)

    # When the sweeper comes by
    report = swept(sweeper, chat)

    # Then the request went to the supervisors' queue with more time
    assert report.rerouted >= 1
    view = operator.get(f"/chats/{chat}/request")
    assert (view["interruptId"], view["state"]) == (interrupt.id, "pending")
    expires = datetime.datetime.fromisoformat(view["expiresAt"])
    assert expires.timestamp() > now_ms() / 1000 + 500
    # And nobody else may take it
    bystander = server.client(someone("bob"), ["reporter"])
    assert bystander.call("GET", f"/chats/{chat}/request").error() == (403, "forbidden")
    # And the supervisor answers it, and the run completes with the values
    done = operator.resume(chat, answer(interrupt, SETTINGS, view["secret"]))
    completed(done, "answered")
    assert "retention days: 30" in done.text
    # And the trail shows the reroute, then the supervisor's decision
    events = alice.get(f"/chats/{chat}/events")["events"]
    kinds = [e["type"] for e in events]
    assert kinds.index("rerouted") < kinds.index("decision"), kinds
    rerouted = events[kinds.index("rerouted")]
    decision = events[kinds.index("decision")]
    assert rerouted["detail"]["role"] == SUPERVISOR
    assert decision["actor"] == operator.user
    assert decision["detail"]["interrupt_id"] == interrupt.id
    assert rerouted["actor"] == "sweeper"
    assert config_versions(alice, chat) == {version_of(AGENT)}


def test_a_rerouted_request_that_runs_out_again_is_denied(
    alice: Client, chat: str, kinds_aws: dict[str, Any], sweeper: Runtime
) -> None:
    # Given an information request already rerouted once
    pause(alice, chat, EXPORT)
    make_overdue(kinds_aws, chat)
    assert swept(sweeper, chat).rerouted >= 1

    # When its extra time runs out too, and the sweeper comes by again
    make_overdue(kinds_aws, chat)
    report = swept(sweeper, chat)

    # Then it is not rerouted a second time: the agent is told nobody answered
    assert report.timed_out >= 1
    assert alice.get(f"/chats/{chat}/request")["decision"] == "timed_out"
    said = last_assistant_text(alice, chat)
    assert "Nobody answered the information request" in said
    types = [e["type"] for e in alice.get(f"/chats/{chat}/events")["events"]]
    assert types.count("rerouted") == 1, types


# -- risk --------------------------------------------------------------------------------------


def test_a_high_declaration_asks_over_a_low_floor(alice: Client, chat: str) -> None:
    # Given a low floor for the report, and a call that declares itself high risk
    # When alice asks for the report
    interrupt = pause(alice, chat, REPORT)

    # Then the gate asks, at the declared risk, under the low-floor configuration
    assert interrupt.reason == "approval:action"
    assert card_of(interrupt)["risk"] == "high"
    assert config_versions(alice, chat) == {version_of(AGENT)}
    done = alice.resume(chat, answer(interrupt, {"decision": "approve"}, secret_of(interrupt)))
    assert "Report sent to team@example.org" in completed(done, "approved").text


# The demo's report call always declares "high": a lower declaration under a high floor
# cannot be driven over HTTP without a new scenario, so only the floor itself is shown.
def test_a_high_floor_asks(strict_server: LocalServer, chat: str) -> None:
    # Given a server whose floor for the report is high
    reporter = strict_server.client(someone("rita"), ["reporter"])

    # When a reporter asks for the report
    interrupt = pause(reporter, chat, REPORT)

    # Then the gate asks, under the high-floor configuration
    assert interrupt.reason == "approval:action"
    assert card_of(interrupt)["risk"] == "high"
    assert config_versions(reporter, chat) == {version_of(STRICT)}
