"""The team's agent: one tool of its own, which a person approves before it runs."""

from __future__ import annotations

from typing import Any

from strands import ToolContext, tool
from strands.vended_interventions.hitl import HumanInTheLoop

from interlock.agent import AgentInputs, AgentSpec, send_once


@tool(context=True)
def refund_order(order_id: str, amount: int, tool_context: ToolContext) -> str:
    """Refund an order.

    Args:
        order_id: The order to refund.
        amount: How much, in whole currency units.
    """
    # Once, however often the run is resumed or taken over (the outbox's stable key).
    if send_once(tool_context, {"refund": order_id, "amount": amount}):
        return f"Refunded {amount} on order {order_id}."
    return f"Order {order_id} was already refunded."


def build(inputs: AgentInputs) -> AgentSpec:
    """The agent for one user: every refund is confirmed by a person first."""
    confirm: Any = HumanInTheLoop()
    return AgentSpec(
        tools=[refund_order],
        system_prompt="Refund orders when asked.",
        interventions=[confirm],
    )
