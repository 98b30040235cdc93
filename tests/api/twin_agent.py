"""A user's agent for the handler tier: two refunds in one batch, each confirmed.

Built only through the public surface. The vended `HumanInTheLoop` guards every tool
but the lookup, so the script's two parallel refunds pause the run on two `Confirm`
interrupts at once.
"""

from __future__ import annotations

from typing import Any

from strands import ToolContext, tool
from strands.vended_interventions.hitl import HumanInTheLoop

from interlock.agent import AgentInputs, AgentSpec, Block, Scenario, send_once


@tool(context=True)
def refund(order: str, amount: int, tool_context: ToolContext) -> str:
    """Refund an order."""
    if send_once(tool_context, {"refund": order, "amount": amount}):
        return f"Refunded {order}."
    return f"{order} was already refunded."


@tool(context=True)
def add_note(order: str, tool_context: ToolContext) -> str:
    """Add a note to an order, in the user's words."""
    text = tool_context.interrupt("note-text", reason=f"What should the note on {order} say?")
    return f"Noted on {order}: {text}"


# A question written in markdown, with what a page must never run or follow in it.
STYLED_QUESTION = (
    "**Heads up:** the note on `A-1` is seen by the customer.\n\n"
    "- keep it short\n- see [the guide](https://docs.example.org/notes)\n\n"
    '<img src=x onerror="document.title=1"> and [this](javascript:alert(1))'
)


@tool(context=True)
def word_note(order: str, tool_context: ToolContext) -> str:
    """Write a customer-facing note, asking the user for its words."""
    text = tool_context.interrupt("styled-text", reason=STYLED_QUESTION)
    return f"Worded for {order}: {text}"


@tool
def order_total(order: str) -> str:
    """The total of an order."""
    return f"{order}: 40"


def _two_refunds(results: list[str]) -> list[Block]:
    return [
        {"tool": "refund", "input": {"order": "A-1", "amount": 40}},
        {"tool": "refund", "input": {"order": "B-2", "amount": 15}},
    ]


def _word(results: list[str]) -> list[Block]:
    return [{"tool": "word_note", "input": {"order": "A-1"}}]


def _report(results: list[str]) -> list[Block]:
    return [{"text": "Refunds: " + " | ".join(results)}]


def _note(results: list[str]) -> list[Block]:
    return [{"tool": "add_note", "input": {"order": "A-1"}}]


SCRIPT = [
    Scenario("refunds", [_two_refunds, _report], keywords=("refund",)),
    Scenario("note", [_note, _report], keywords=("note",)),
    Scenario("wording", [_word, _report], keywords=("wording",)),
]


def build(inputs: AgentInputs) -> AgentSpec:
    hitl: Any = HumanInTheLoop(allowed_tools=["order_total", "add_note", "word_note"])
    return AgentSpec(
        tools=[refund, add_note, word_note, order_total],
        model=inputs.model(scripted=SCRIPT),
        interventions=[hitl],
    )
