"""Who may do what, in Cedar: the schema declares every field the policies read.

`CedarAuthorization` evaluates each tool call with a context of the call's input and a
session record. The session fields come from `session_facts`, and the schema's
`Session` type is generated from the same declaration (`SESSION_FIELDS`), so a policy
that reads a field nobody supplies fails validation when the agent is built, never as
a blanket deny in the middle of a drill.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from examples.doorstep.roster import RESIDENTS, VOLUNTEERS

# Every session field a policy may read, with its Cedar type. `hour_utc` and
# `call_count` are added by CedarAuthorization itself.
SESSION_FIELDS: Final = {
    "hour_utc": "Long",
    "call_count": "Long",
    "mode": "String",
    "role": "String",
    "number_allowlisted": "Bool",
    "volunteer_m": "Long",
    "consent": "Bool",
}
TOOL_INPUTS: Final = {
    "lookup_resident": {"resident_id": "String"},
    "escalate_to_captain": {"resident_id": "String"},
    "assign_volunteer": {"resident_id": "String", "volunteer_id": "String"},
}
POLICIES: Final = """
permit(principal, action == Action::"lookup_resident", resource)
when { context.session.role == "dispatcher" };

permit(principal, action == Action::"escalate_to_captain", resource)
when { context.session.role == "dispatcher" && context.session.number_allowlisted };

permit(principal, action == Action::"assign_volunteer", resource)
when { context.session.role == "dispatcher" && context.session.volunteer_m <= 2000 };
"""
# Farther than this, a volunteer is not sent: the policy above says 2000 m.
DISPATCHER: Final = "dispatcher"


def schema() -> str:
    """The Cedar schema: one action per tool, its input, and the session record."""
    session = ", ".join(f"{name}: {kind}" for name, kind in SESSION_FIELDS.items())
    actions = "\n".join(
        f'action "{tool}" appliesTo {{ principal: [User], resource: [Resource], '
        f"context: {{ input: {{ {_record(fields)} }}, session: Session }} }};"
        for tool, fields in TOOL_INPUTS.items()
    )
    return f"entity User;\nentity Resource;\ntype Session = {{ {session} }};\n{actions}\n"


def _record(fields: Mapping[str, str]) -> str:
    return ", ".join(f"{name}: {kind}" for name, kind in fields.items())


def session_facts(roles: frozenset[str], mode: str) -> Any:
    """The context enricher: the facts the policies need, for every call."""

    def enrich(call: Mapping[str, Any]) -> dict[str, Any]:
        tool_input = call.get("tool_input") or {}
        resident = RESIDENTS.get(str(tool_input.get("resident_id")))
        volunteer = VOLUNTEERS.get(str(tool_input.get("volunteer_id")))
        return {
            "mode": mode,
            "role": DISPATCHER if DISPATCHER in roles else "viewer",
            "number_allowlisted": bool(resident and resident.number_allowlisted),
            "volunteer_m": volunteer.distance_m if volunteer else 0,
            "consent": bool(resident and resident.consents_to_share),
        }

    return enrich
