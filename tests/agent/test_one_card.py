"""`one_card_at_a_time`: parallel calls that each need a person are asked one by one."""

from __future__ import annotations

import dataclasses

import pytest

from interlock.adapters.factory import Stores
from interlock.agent import AgentInputs, AgentSpec
from interlock.errors import IncompleteResume
from interlock.resume import resume_replies, resume_turn
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, run_turn
from tests.agent.support import own_agent_runtime
from tests.api import twin_agent

ALICE = Caller("alice")
APPROVE = {"decision": "approve"}


def one_at_a_time(inputs: AgentInputs) -> AgentSpec:
    return dataclasses.replace(twin_agent.build(inputs), one_card_at_a_time=True)


def test_two_confirmations_are_asked_one_after_the_other(
    stores: Stores, clock: ManualClock
) -> None:
    rt = own_agent_runtime(stores, clock, one_at_a_time)
    chat = "one-by-one"

    # The first refund is asked alone; the second has not been reached yet
    first = run_turn(rt, ALICE, chat, "refund both")
    assert first.offer is not None
    assert [a.card["summary"]["order"] for a in first.offer.request.asked] == ["A-1"]

    # Answering it runs A-1 and asks about B-2, in the same request, chained
    second = resume_turn(
        rt,
        ALICE,
        chat,
        interrupt_id=first.offer.request.interrupt_id,
        secret=first.offer.secret,
        status="resolved",
        payload=APPROVE,
    )
    assert second.offer is not None
    assert [a.card["summary"]["order"] for a in second.offer.request.asked] == ["B-2"]
    assert stores.outbox.get(f"{chat}#{first.offer.request.card['tool_use_id']}") is not None

    # Answering that one finishes the run with both refunds, each once
    done = resume_turn(
        rt,
        ALICE,
        chat,
        interrupt_id=second.offer.request.interrupt_id,
        secret=second.offer.secret,
        status="resolved",
        payload=APPROVE,
    )
    assert done.outcome == "completed"
    assert "Refunded A-1." in (done.text or "") and "Refunded B-2." in (done.text or "")


def test_a_resume_with_no_entries_is_refused_before_anything_is_read(stores: Stores) -> None:
    rt = Runtime(stores, lambda: None, agent=one_at_a_time)  # type: ignore[arg-type, return-value]
    with pytest.raises(IncompleteResume):
        resume_replies(rt, ALICE, "nothing-asked", secret="s", replies=[])
