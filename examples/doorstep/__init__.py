"""Doorstep: a neighbourhood-response agent for heat warnings.

It pages a neighbourhood captain about an at-risk resident and sends a volunteer to
knock on their door, with two kinds of pause:

- `escalate_to_captain` pauses **inside the tool** (`tool_context.interrupt`). Its body
  re-runs from the top on resume, so its work before the pause is one idempotent
  upsert (the case record, once per call in the outbox); the page is the card.
- `assign_volunteer` pauses **at admission**, through a Strands intervention that
  returns `Confirm` for high-risk residents: its body runs once after the captain
  approves, or never. Its message leaves the building, so it goes through the outbox.

`CedarAuthorization` decides who may call what, with a schema that declares every
field its policies read. The captain's card carries today's call; the volunteer's task
carries only standing facts the resident agreed to share.

Serve it with `./dev serve --agent examples.doorstep:build` (sign in as a user in the
`dispatcher` group).
"""

from __future__ import annotations

from typing import Any, Final

from strands import ToolContext, tool
from strands.hooks import BeforeToolCallEvent
from strands.interventions import Confirm, InterventionHandler, Proceed
from strands.vended_interventions.cedar import CedarAuthorization

from examples.doorstep.policy import POLICIES, schema, session_facts
from examples.doorstep.roster import (
    RESIDENTS,
    VOLUNTEERS,
    captain_brief,
    volunteer_message,
)
from examples.doorstep.script import SCRIPT
from interlock.agent import AgentInputs, AgentSpec, current_request, send_once

ESCALATION: Final = "captain-escalation"
FOLLOW_UPS: Final = ["send a volunteer", "call the resident again", "call emergency services"]
SYSTEM_PROMPT: Final = (
    "You coordinate neighbourhood checks during heat warnings. Page the captain about "
    "at-risk residents with escalate_to_captain and send the nearest volunteer with "
    "assign_volunteer. Never put what a resident said on a call into a volunteer task."
)


@tool
def lookup_resident(resident_id: str) -> str:
    """Where a resident lives and whether they are high risk."""
    resident = RESIDENTS.get(resident_id)
    if resident is None:
        return f"No resident {resident_id} on the roster."
    return f"{resident.name}, unit {resident.unit}, risk {resident.risk}."


@tool(context=True)
def escalate_to_captain(resident_id: str, tool_context: ToolContext) -> str:
    """Page the neighbourhood captain about a resident and ask how to follow up."""
    resident = RESIDENTS.get(resident_id)
    if resident is None:
        return f"No resident {resident_id} on the roster."
    # Before the pause: one idempotent upsert. The body re-runs on resume; this finds
    # the record it wrote and writes nothing.
    send_once(tool_context, {"case": resident.id, "state": "escalated"}, part="case")
    answer = tool_context.interrupt(
        ESCALATION,
        reason={
            "message": captain_brief(resident),
            "response_schema": {
                "type": "object",
                "properties": {"follow_up": {"enum": FOLLOW_UPS}},
                "required": ["follow_up"],
                "additionalProperties": False,
            },
        },
    )
    if not isinstance(answer, dict) or "follow_up" not in answer:
        return f"The captain did not answer about {resident.name}; keep trying to reach them."
    return f"The captain chose to {answer['follow_up']} for {resident.name}."


@tool(context=True)
def assign_volunteer(resident_id: str, volunteer_id: str, tool_context: ToolContext) -> str:
    """Send a volunteer to knock on a resident's door."""
    resident, volunteer = RESIDENTS.get(resident_id), VOLUNTEERS.get(volunteer_id)
    if resident is None or volunteer is None:
        return "Unknown resident or volunteer; nobody was sent."
    task = {
        "to": volunteer.id,
        "message": volunteer_message(resident, volunteer),
        "by": current_request().user_id,
    }
    if send_once(tool_context, task):
        return f"Assigned {volunteer.name} to unit {resident.unit}."
    return f"{volunteer.name} was already assigned to unit {resident.unit}; not sent twice."


class CaptainSignOff(InterventionHandler):
    """Holds `assign_volunteer` for the captain's approval when the resident is high
    risk; low-risk assignments go straight out."""

    name = "doorstep:captain-sign-off"

    def before_tool_call(self, event: BeforeToolCallEvent, **kwargs: Any) -> Confirm | Proceed:
        use = event.tool_use
        if use["name"] != "assign_volunteer":
            return Proceed()
        resident = RESIDENTS.get(str(use["input"].get("resident_id")))
        volunteer = VOLUNTEERS.get(str(use["input"].get("volunteer_id")))
        if resident is None or volunteer is None or resident.risk != "high":
            return Proceed()
        return Confirm(
            prompt=f"Send {volunteer.name} ({volunteer.distance_m} m away)? "
            + captain_brief(resident)
        )


def build(inputs: AgentInputs, *, policies: str = POLICIES) -> AgentSpec:
    """Doorstep for one caller. Cedar sees the caller's identity and roles as the API
    set them; a policy that reads an undeclared field fails here, at build."""
    cedar = CedarAuthorization(
        policies=policies,
        schema=schema(),
        principal={"type": "User", "id": inputs.user_id},
        context_enricher=session_facts(inputs.roles, mode="drill"),
    )
    return AgentSpec(
        tools=[lookup_resident, escalate_to_captain, assign_volunteer],
        system_prompt=SYSTEM_PROMPT,
        model=inputs.model(scripted=SCRIPT),
        # Cedar first: a call it denies never reaches the captain.
        interventions=[cedar, CaptainSignOff()],
    )
