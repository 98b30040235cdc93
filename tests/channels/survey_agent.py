"""A user's agent for the channel tier: one turn that asks four things at once.

Built only through the public surface. The script's first turn calls a guarded tool and
three of Interlock's asking tools in one batch, so the run pauses on four cards: an
approval, a multiple choice within limits, a single choice and a form of typed fields.
"""

from __future__ import annotations

from typing import Any

from strands import ToolContext, tool
from strands.vended_interventions.hitl import HumanInTheLoop

from interlock.agent import (
    AgentInputs,
    AgentSpec,
    Block,
    Scenario,
    ask_user,
    request_info,
    send_once,
)


@tool(context=True)
def book_van(day: str, tool_context: ToolContext) -> str:
    """Book the delivery van for a day."""
    if send_once(tool_context, {"van": day}):
        return f"Van booked for {day}."
    return f"The van was already booked for {day}."


def _ask_everything(results: list[str]) -> list[Block]:
    return [
        {"tool": "book_van", "input": {"day": "Friday"}},
        {
            "tool": "ask_user",
            "input": {
                "type": "multiple_choice",
                "prompt": "Which streets should the round cover?",
                "options": ["Elm", "Oak", "Ash", "Yew"],
                "min_selections": 1,
                "max_selections": 2,
            },
        },
        {
            "tool": "ask_user",
            "input": {
                "type": "single_choice",
                "prompt": "Which shift?",
                "options": ["Morning", "Evening"],
            },
        },
        {
            "tool": "request_info",
            "input": {
                "reason": "The round needs its details.",
                "fields": [
                    {
                        "name": "volunteers",
                        "label": "Volunteers",
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 12,
                    },
                    {"name": "lead", "label": "Lead's email", "type": "email"},
                    {
                        "name": "cold_boxes",
                        "label": "Bring cold boxes",
                        "type": "boolean",
                        "required": False,
                    },
                ],
            },
        },
    ]


def _report(results: list[str]) -> list[Block]:
    return [{"text": "Planned: " + " | ".join(results)}]


SCRIPT = [Scenario("round", [_ask_everything, _report], keywords=("round",))]


def build(inputs: AgentInputs) -> AgentSpec:
    hitl: Any = HumanInTheLoop(allowed_tools=[ask_user.tool_name, request_info.tool_name])
    return AgentSpec(
        tools=[book_van, ask_user, request_info],
        model=inputs.model(scripted=SCRIPT),
        interventions=[hitl],
    )
