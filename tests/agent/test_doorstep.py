"""The Doorstep example: Cedar at build and at call time, and its two audiences."""

from __future__ import annotations

from typing import Any

import pytest

from examples import doorstep
from examples.doorstep.policy import POLICIES, SESSION_FIELDS, schema, session_facts
from examples.doorstep.roster import (
    RESIDENTS,
    TODAY,
    VOLUNTEERS,
    captain_brief,
    volunteer_message,
)
from interlock.adapters.factory import Stores
from interlock.agent import AgentInputs, load_factory
from interlock.config import InterlockConfig
from interlock.resume import resume_turn
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, run_turn

DISPATCHER = Caller("alice", frozenset({"dispatcher"}))


def probe(roles: frozenset[str] = frozenset({"dispatcher"})) -> AgentInputs:
    return AgentInputs(
        user_id="alice",
        roles=roles,
        chat_id="c1",
        can_ask_a_human=True,
        max_model_calls=12,
        settings=InterlockConfig(model="scripted"),
        _history=list,
        _model=lambda scripted: pytest.fail("not used"),  # type: ignore[arg-type, return-value]
    )


@pytest.fixture
def rt(stores: Stores, clock: ManualClock) -> Runtime:
    return Runtime(
        stores,
        lambda: pytest.fail("Doorstep plays its own script"),
        clock=clock,
        agent=load_factory("examples.doorstep:build"),
        config=InterlockConfig(model="scripted"),
    )


def test_a_policy_reading_an_undeclared_field_fails_when_the_agent_is_built() -> None:
    typo = POLICIES.replace("volunteer_m <=", "volunteer_km <=")
    with pytest.raises(ValueError, match="volunteer_km"):
        doorstep.build(probe(), policies=typo)


def test_the_schema_declares_exactly_the_fields_the_enricher_supplies() -> None:
    supplied = session_facts(frozenset(), "drill")({"tool_name": "x", "tool_input": {}})
    assert set(supplied) | {"hour_utc", "call_count"} == set(SESSION_FIELDS)
    assert all(f"{name}: " in schema() for name in SESSION_FIELDS)


def test_cedar_denies_a_volunteer_too_far_away_before_anyone_is_asked(
    rt: Runtime, stores: Stores, clock: ManualClock
) -> None:
    # Given the script asks to send Raj (3.5 km away)
    paused = run_turn(rt, DISPATCHER, "far-chat", "drill: the far volunteer")

    # Then only the captain's page is a card: Cedar denied the assignment outright
    assert paused.offer is not None
    asked = paused.offer.request.asked
    assert [a.card["interrupt_name"] for a in asked] == [doorstep.ESCALATION]

    done = resume_turn(
        rt,
        DISPATCHER,
        "far-chat",
        interrupt_id=asked[0].interrupt_id,
        secret=paused.offer.secret,
        status="resolved",
        payload={"follow_up": "call the resident again"},
    )
    assert done.outcome == "completed"
    assert "DENIED: Access denied by Cedar policy" in (done.text or "")
    assert stores.outbox.get(f"far-chat#{asked[0].card['tool_use_id']}#case") is not None
    assert not [
        c
        for c in done.tool_calls
        if c["name"] == "assign_volunteer" and "Assigned" in str(c["result"])
    ]


def test_a_caller_without_the_dispatcher_role_is_denied_every_call(rt: Runtime) -> None:
    viewer = Caller("vic", frozenset({"viewer"}))
    result = run_turn(rt, viewer, "viewer-chat", "heat warning")
    assert result.outcome == "completed" and result.offer is None
    assert (result.text or "").count("DENIED") == 2


@pytest.mark.parametrize("resident", sorted(RESIDENTS), ids=str)
@pytest.mark.parametrize("volunteer", sorted(VOLUNTEERS), ids=str)
def test_a_volunteer_task_carries_only_standing_consented_facts(
    resident: str, volunteer: str
) -> None:
    person, helper = RESIDENTS[resident], VOLUNTEERS[volunteer]
    task = volunteer_message(person, helper)
    # Today's call, age and household go to the captain only
    for private in (TODAY[resident], person.age_band, "alone", person.name):
        assert private not in task
    # Standing notes go to the volunteer only with consent
    for note in person.standing_notes:
        assert (note in task) == person.consents_to_share
    assert person.unit in task


@pytest.mark.parametrize("resident", sorted(RESIDENTS), ids=str)
def test_the_captain_brief_carries_todays_call(resident: str) -> None:
    brief: Any = captain_brief(RESIDENTS[resident])
    assert TODAY[resident] in brief and RESIDENTS[resident].age_band in brief


def test_an_unattended_run_opens_no_card_nobody_could_answer(rt: Runtime, stores: Stores) -> None:
    unattended = Caller("alice", frozenset({"dispatcher"}), can_ask_a_human=False)
    result = run_turn(rt, unattended, "night-chat", "heat warning")
    assert result.outcome == "completed" and result.offer is None
    assert "nobody can answer in this run" in (result.text or "")
    assert stores.requests.get("night-chat", 0) is None
