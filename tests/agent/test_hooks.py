"""The batch rule, the admission gate and the model-call limit, in a real agent."""

from __future__ import annotations

from typing import Any

from interlock.context import RequestContext
from interlock.harness.hooks import MERGED, ONE_AT_A_TIME, RUN_ALONE, decide_batch
from interlock.harness.model import ScriptedModel
from interlock.harness.snapshot import load_snapshot, take_snapshot
from tests.agent.support import Transport, analyst_agent, as_recorded, scenario
from tests.agent.test_tools import done, run

URL = "https://data.example.org/table.csv"


class Outbox:
    """An in-memory outbox with the store's put-once contract."""

    def __init__(self) -> None:
        self.sent: dict[str, dict[str, Any]] = {}

    def put_once(self, key: str, payload: dict[str, Any], now_ms: int) -> bool:
        if key in self.sent:
            return False
        self.sent[key] = payload
        return True


def use(name: str, tool_use_id: str) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tool_use_id, "name": name, "input": {}}}


def report(risk: str = "high") -> dict[str, Any]:
    return {
        "tool": "send_report",
        "input": {"recipient": "team@example.org", "summary": "figures", "risk": risk},
    }


def ctx(**changes: Any) -> RequestContext:
    return RequestContext(
        user_id="alice",
        chat_id="c1",
        roles=frozenset({"reporter"}),
        outbox=Outbox(),
        fetch=Transport(),
        now_ms=lambda: 1,
        **changes,
    )


def agent(*steps: Any) -> Any:
    return analyst_agent(ScriptedModel([scenario(*steps)]), roles=frozenset({"reporter"}))


# -- the batch rule ------------------------------------------------------------------------


def test_decide_batch_keeps_the_first_approval_and_cancels_the_rest() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"text": "x"},
            use("fetch_url", "a"),
            use("request_approval", "b"),
            use("request_approval", "c"),
            use("send_report", "d"),
        ],
    }

    assert decide_batch(message) == {"a": RUN_ALONE, "c": MERGED, "d": RUN_ALONE}
    assert decide_batch({"content": [use("fetch_url", "a"), use("fetch_url", "b")]}) == {}


def test_the_approval_call_runs_alone_before_and_after_the_resume() -> None:
    batch = [
        {"tool": "request_approval", "input": {"reason": "r", "urls": [URL]}},
        {"tool": "fetch_url", "input": {"url": URL}},
        {
            "tool": "request_approval",
            "input": {"reason": "r2", "urls": ["https://mirror.example.net/t"]},
        },
    ]
    context = ctx()
    paused = agent(batch, done)
    result = run(paused, context)
    assert result.stop_reason == "interrupt"
    assert result.interrupts[0].reason["sites"] == ["data.example.org"]

    fresh = agent(batch, done)
    load_snapshot(fresh.agent, take_snapshot(paused.agent))
    context.resume_cards = (result.interrupts[0].reason,)
    answer = [
        {
            "interruptResponse": {
                "interruptId": result.interrupts[0].id,
                "response": as_recorded(result.interrupts[0].reason, {"decision": "approve"}),
            }
        }
    ]
    resumed = run(fresh, context, answer)

    text = str(resumed)
    assert RUN_ALONE in text and MERGED in text and "Approved by the user" in text
    assert context.fetch.urls == [], "the sibling fetch never ran, even after approval"  # type: ignore[union-attr]


# -- the admission gate --------------------------------------------------------------------------


def test_a_gated_tool_waits_and_runs_exactly_once_after_approval() -> None:
    context = ctx()
    paused = agent([report()], done)
    result = run(paused, context)

    assert result.stop_reason == "interrupt"
    card = result.interrupts[0].reason
    assert (card["type"], card["tool"], card["risk"]) == ("action", "send_report", "high")
    assert context.outbox.sent == {}, "nothing is sent before approval"  # type: ignore[union-attr]

    fresh = agent([report()], done)
    load_snapshot(fresh.agent, take_snapshot(paused.agent))
    context.resume_cards = (card,)
    answer = [
        {
            "interruptResponse": {
                "interruptId": result.interrupts[0].id,
                "response": as_recorded(result.interrupts[0].reason, {"decision": "approve"}),
            }
        }
    ]
    resumed = run(fresh, context, answer)

    assert "Report sent to team@example.org" in str(resumed)
    assert len(context.outbox.sent) == 1  # type: ignore[union-attr]
    assert fresh.meter.tool_executions == 1


def test_a_denied_gated_tool_never_runs() -> None:
    context = ctx()
    paused = agent([report()], done)
    result = run(paused, context)
    fresh = agent([report()], done)
    load_snapshot(fresh.agent, take_snapshot(paused.agent))
    context.resume_cards = (result.interrupts[0].reason,)
    answer = [
        {
            "interruptResponse": {
                "interruptId": result.interrupts[0].id,
                "response": {"decision": "reject", "reason": "not today"},
            }
        }
    ]
    resumed = run(fresh, context, answer)

    assert "The user declined running send_report. Reason: not today" in str(resumed)
    assert context.outbox.sent == {}  # type: ignore[union-attr]
    assert fresh.meter.tool_executions == 0


def test_low_risk_calls_pass_the_gate_and_unattended_runs_are_denied() -> None:
    context = ctx()
    result = run(agent([report("low")], done), context)
    assert result.stop_reason == "end_turn" and len(context.outbox.sent) == 1  # type: ignore[union-attr]

    unattended = ctx(can_ask_a_human=False)
    result = run(agent([report()], done), unattended)
    assert result.stop_reason == "end_turn"
    assert "nobody can answer" in str(result) and unattended.outbox.sent == {}  # type: ignore[union-attr]


def test_only_the_first_gated_call_of_a_batch_may_ask() -> None:
    context = ctx()
    paused = agent([report(), report()], done)
    result = run(paused, context)
    assert result.stop_reason == "interrupt" and len(result.interrupts) == 1

    fresh = agent([report(), report()], done)
    load_snapshot(fresh.agent, take_snapshot(paused.agent))
    context.resume_cards = (result.interrupts[0].reason,)
    answer = [
        {
            "interruptResponse": {
                "interruptId": result.interrupts[0].id,
                "response": as_recorded(result.interrupts[0].reason, {"decision": "approve"}),
            }
        }
    ]
    resumed = run(fresh, context, answer)

    assert ONE_AT_A_TIME in str(resumed)
    assert len(context.outbox.sent) == 1  # type: ignore[union-attr]


# -- bounded runs ------------------------------------------------------------------------


def test_the_model_call_limit_stops_a_runaway_invocation() -> None:
    loop = [{"tool": "fetch_url", "input": {"url": URL}}]
    built = analyst_agent(
        ScriptedModel([scenario(*[loop] * 20)]), roles=frozenset(), max_model_calls=3
    )

    result = run(built, ctx())

    assert built.limit.tripped
    assert built.agent.model.calls == 3  # type: ignore[attr-defined]
    assert "Stopped after 3 model calls" in str(result)


# -- risk policy ---------------------------------------------------------------------------


def gated(risk_floor: str, rate: float = 0.5) -> Any:
    from interlock.harness.hooks import AdmissionGate, AdmissionRule

    return AdmissionGate({"send_report": AdmissionRule("send_report", risk_floor, "x")}, rate)


def call(risk: str, tool_use_id: str = "tooluse_1") -> dict[str, Any]:
    return {"name": "send_report", "toolUseId": tool_use_id, "input": {"risk": risk}}


def test_risk_levels_decide_who_asks() -> None:
    gate = gated("low")
    assert not gate.asks(call("low"))
    assert gate.asks(call("high"))
    assert gated("high").asks(call("low")), "a call cannot declare itself below the floor"
    assert not gate.asks({"name": "fetch_url", "toolUseId": "t", "input": {}})


def test_medium_risk_is_sampled_deterministically_at_the_configured_rate() -> None:
    ids = [f"tooluse_{n}" for n in range(2000)]
    half = [gated("low", 0.5).asks(call("medium", i)) for i in ids]
    assert half == [gated("low", 0.5).asks(call("medium", i)) for i in ids], "same each time"
    assert 0.45 < sum(half) / len(ids) < 0.55
    assert not any(gated("low", 0.0).asks(call("medium", i)) for i in ids)
    assert all(gated("low", 1.0).asks(call("medium", i)) for i in ids)


def test_low_risk_calls_are_approved_automatically_and_audited() -> None:
    recorded: list[tuple[str, dict[str, Any]]] = []
    context = ctx(audit=lambda event, detail: recorded.append((event, detail)))
    result = run(agent([report("low")], done), context)

    assert result.stop_reason == "end_turn" and len(context.outbox.sent) == 1  # type: ignore[union-attr]
    assert [(e, d["tool"], d["risk"]) for e, d in recorded] == [
        ("auto_approved", "send_report", "low")
    ]


def test_sensitive_parameters_are_redacted_on_the_card_and_never_logged() -> None:
    from tests.secret_watch import WATCH

    leaky = {
        "tool": "send_report",
        "input": {
            "recipient": "team@example.org",
            "summary": "figures",
            "risk": "high",
            "api_key": "sk-live-0123456789abcdef",
        },
    }
    logging_probe = __import__("logging").getLogger("interlock.test")
    result = run(agent([leaky], done), ctx())
    card = result.interrupts[0].reason

    assert card["summary"]["api_key"] == "[redacted]"
    assert "sk-live-0123456789abcdef" in WATCH.issued
    logging_probe.info("card shown: %s", card)  # what a careless log line would print


def test_a_misspelled_risk_fails_where_the_agent_is_built() -> None:
    import pytest

    from interlock.agent import admission_gate

    with pytest.raises(ValueError, match="close_account: risk must be one of low, medium, high"):
        admission_gate({"close_account": ("hgih", "Closes the account.")})  # type: ignore[dict-item]
    gate = admission_gate({"close_account": ("high", "Closes the account.")})
    assert gate is not None
