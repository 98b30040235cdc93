"""Roles are checked before a card is offered: a tool the caller may not use is refused
to the model with a clear message, no card is shown and no slot is taken; and a tool
the caller never had does not later expire a card as "your roles changed"."""

from __future__ import annotations

from examples.analyst.script import TABLE_URL
from interlock.ports import Stores
from interlock.resume import resume_turn
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, TurnLimits, run_turn
from tests.agent.support import Models, Transport, scenario

BOB = Caller("bob")  # no `reporter` role: send_report is not his


def test_a_gated_tool_the_caller_may_not_use_is_refused_without_a_card(
    runtime: Runtime, stores: Stores, clock: ManualClock
) -> None:
    result = run_turn(runtime, BOB, "c-roles", "please send the weekly report")

    assert result.outcome == "completed" and result.offer is None
    assert "send_report is not available to this user" in (result.text or "")
    assert stores.requests.get("c-roles", clock.now_ms()) is None
    assert (
        stores.limits.reserve_slot(
            "bob", "probe", cap=1, hold_ms=1, now_ms=clock.now_ms(), pool="ASK"
        )
        == 0
    )


def test_a_tool_never_allowed_does_not_expire_a_card_as_a_role_change(
    stores: Stores, clock: ManualClock
) -> None:
    # Given a batch where the model asks for approval and also calls a tool bob lacks
    script = scenario(
        [
            {"tool": "request_approval", "input": {"reason": "needed", "urls": [TABLE_URL]}},
            {"tool": "send_report", "input": {"recipient": "a@example.org", "summary": "x"}},
        ],
        [{"text": "Done."}],
    )
    rt = Runtime(
        stores, Models([script]), clock=clock, fetch=Transport(), limits=TurnLimits(heartbeat_s=60)
    )
    paused = run_turn(rt, BOB, "c-batch", "go")
    assert paused.offer is not None
    assert "send_report" in paused.offer.request.card["batch_tools"]

    # When bob, whose roles did not change, approves
    done = resume_turn(
        rt,
        BOB,
        "c-batch",
        interrupt_id=paused.offer.request.interrupt_id,
        secret=paused.offer.secret,
        status="resolved",
        payload={"decision": "approve"},
    )

    # Then the run goes on: nothing he had was lost
    assert (done.outcome, done.decision) == ("completed", "approved")
