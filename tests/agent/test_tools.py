"""The approval tool and the egress-checked fetch, in a real Strands agent."""

from __future__ import annotations

from typing import Any

from strands.agent.agent_result import AgentResult

from interlock.cards import parse_decision
from interlock.context import RequestContext, request_scope
from interlock.harness.agent import BuiltAgent
from interlock.harness.model import ScriptedModel
from interlock.harness.snapshot import load_snapshot, take_snapshot
from interlock.records import Subject
from tests.agent.support import Transport, analyst_agent, as_recorded, scenario

URL = "https://data.example.org/table.csv?token=s3cr3t#top"
SITE = Subject("site", "data.example.org")


def ask(**args: Any) -> list[dict[str, Any]]:
    return [{"tool": "request_approval", "input": {"reason": "Need the table.", **args}}]


def fetch(url: str = URL) -> list[dict[str, Any]]:
    return [{"tool": "fetch_url", "input": {"url": url}}]


def done(results: list[str]) -> list[dict[str, Any]]:
    return [{"text": "RESULTS: " + " | ".join(results)}]


def agent_for(*steps: Any) -> BuiltAgent:
    return analyst_agent(ScriptedModel([scenario(*steps)]), roles=frozenset())


def context(**changes: Any) -> RequestContext:
    return RequestContext(user_id="alice", chat_id="c1", fetch=Transport(), **changes)


def run(built: BuiltAgent, ctx: RequestContext, prompt: Any = "go") -> AgentResult:
    with request_scope(ctx):
        return built.agent(prompt)


def resume(
    steps: tuple[Any, ...],
    paused: BuiltAgent,
    result: AgentResult,
    response: Any,
    ctx: RequestContext,
) -> tuple[BuiltAgent, AgentResult]:
    """Resume in a freshly built agent from a snapshot, as another process would."""
    snapshot = take_snapshot(paused.agent)
    fresh = agent_for(*steps)
    load_snapshot(fresh.agent, snapshot)
    ctx.resume_cards = (result.interrupts[0].reason,)
    card = result.interrupts[0].reason
    reply = {"interruptId": result.interrupts[0].id, "response": as_recorded(card, response)}
    answer = [{"interruptResponse": reply}]
    return fresh, run(fresh, ctx, answer)


def test_an_empty_call_with_nothing_refused_is_an_input_error() -> None:
    result = run(agent_for(ask(), done), context())

    assert result.stop_reason == "end_turn"
    assert "Nothing to approve: name the URLs or packages" in str(result)
    assert "Already approved" not in str(result)


def test_an_empty_call_after_a_refused_download_asks_for_the_refused_site() -> None:
    ctx = context()
    result = run(agent_for(fetch(), ask(), done), ctx)

    assert ctx.refused == {SITE}
    assert result.stop_reason == "interrupt"
    card = result.interrupts[0].reason
    assert card["sites"] == ["data.example.org"] and card["urls"] == []


def test_urls_are_stripped_and_approved_subjects_dropped() -> None:
    ctx = context(approved=frozenset({Subject("package", "pandas")}))
    result = run(agent_for(ask(urls=[URL], packages=["Pandas", "numpy"]), done), ctx)

    card = result.interrupts[0].reason
    assert card["urls"] == ["https://data.example.org/table.csv"]
    assert card["packages"] == ["numpy"]
    assert "s3cr3t" not in str(card)


def test_everything_approved_answers_already_approved() -> None:
    ctx = context(approved=frozenset({SITE}))
    result = run(agent_for(ask(urls=[URL]), done), ctx)

    assert result.stop_reason == "end_turn"
    assert "Already approved: run it." in str(result)


def test_invalid_urls_are_an_input_error_not_a_card() -> None:
    result = run(agent_for(ask(urls=["http://169.254.169.254/latest"]), done), context())

    assert result.stop_reason == "end_turn"
    assert "Invalid request: IP addresses cannot be requested" in str(result)


def test_unattended_runs_get_a_deterministic_deny_naming_what_was_blocked() -> None:
    texts = {
        str(run(agent_for(ask(urls=[URL]), done), context(can_ask_a_human=False))) for _ in range(2)
    }

    (text,) = texts
    assert "nobody can answer" in text and "Blocked: sites data.example.org" in text
    assert "Continue without that data and say so." in text


def test_the_resume_branch_answers_from_the_stored_card_only() -> None:
    # Given a paused request for a site that is approved by the time the body re-runs
    steps = (fetch(), ask(urls=[URL]), done)
    ctx = context()
    paused = agent_for(*steps)
    result = run(paused, ctx)
    ctx.approved = frozenset({SITE})
    ctx.refused.clear()

    # When the same call resumes with an approval
    _, resumed = resume(steps, paused, result, {"decision": "approve"}, ctx)

    # Then it reports the person's decision, not "already approved" from a re-merge
    assert "Approved by the user: sites data.example.org" in str(resumed)
    assert "Already approved" not in str(resumed)


def test_a_new_approval_request_in_the_resumed_turn_takes_the_normal_path() -> None:
    second = "https://mirror.example.net/table.csv"
    steps = (ask(urls=[URL]), ask(urls=[second]), done)
    ctx = context()
    paused = agent_for(*steps)
    first = run(paused, ctx)

    _, again = resume(steps, paused, first, {"decision": "approve"}, ctx)

    assert again.stop_reason == "interrupt"
    card = again.interrupts[0].reason
    assert card["sites"] == ["mirror.example.net"]
    assert again.interrupts[0].id != first.interrupts[0].id


def test_a_deny_is_reported_with_its_reason() -> None:
    steps = (ask(urls=[URL]), done)
    ctx = context()
    paused = agent_for(*steps)
    result = run(paused, ctx)

    _, resumed = resume(
        steps,
        paused,
        result,
        {"decision": "reject", "reason": "not that site", "suggestion": "use the bundled copy"},
        ctx,
    )

    text = str(resumed)
    assert "The user declined sites data.example.org" in text
    assert "Reason: not that site" in text and "Suggestion: use the bundled copy" in text


def test_parsing_fails_closed() -> None:
    card = {"type": "download", "sites": ["a.example.org"], "packages": []}
    for response in (
        None,
        "approve",
        True,
        {},
        {"decision": "yes"},
        {"approved": True},
        {"status": "cancelled", "decision": "approve"},
        {"decision": "APPROVE"},
    ):
        assert not parse_decision(response, card).approved, response
    assert parse_decision({"decision": "approve"}, card).approved


def test_fetch_refuses_unapproved_sites_and_records_them() -> None:
    ctx = context()
    result = run(agent_for(fetch(), done), ctx)

    assert "Blocked: data.example.org is not approved" in str(result)
    assert ctx.refused == {SITE}
    assert ctx.fetch.urls == []  # type: ignore[union-attr]


def test_fetch_of_an_approved_site_goes_through_the_transport_without_the_query() -> None:
    ctx = context(approved=frozenset({SITE}))
    result = run(agent_for(fetch(), done), ctx)

    assert ctx.fetch.urls == ["https://data.example.org/table.csv"]  # type: ignore[union-attr]
    assert "1,42" in str(result)


def test_the_download_card_summarises_the_call_without_its_query_tokens() -> None:
    result = run(agent_for(ask(urls=[URL], packages=["Pandas"]), done), context())
    summary = result.interrupts[0].reason["summary"]
    assert summary == {
        "reason": "Need the table.",
        "urls": ["https://data.example.org/table.csv"],
        "packages": ["pandas"],
    }
