"""Cards are numbered in the order the model called their tools, whichever parallel tool
raised its interrupt first: every surface says "1 of 2", and a number must name the same
card on each of them, on every run."""

from __future__ import annotations

import asyncio

from strands import ToolContext, tool

from interlock.adapters.factory import Stores
from interlock.agent import AgentInputs, AgentSpec, Block, Scenario
from interlock.timing import ManualClock
from interlock.turns import Caller, run_turn
from tests.agent.support import own_agent_runtime

RAISED: list[str] = []


@tool(context=True)
async def slow_question(tool_context: ToolContext) -> str:
    """Ask a question, after a lookup that takes a while."""
    await asyncio.sleep(0.2)
    RAISED.append("slow")
    return str(tool_context.interrupt("slow", reason="Which street?"))


@tool(context=True)
async def quick_question(tool_context: ToolContext) -> str:
    """Ask a question at once."""
    RAISED.append("quick")
    return str(tool_context.interrupt("quick", reason="How many volunteers?"))


def _both(results: list[str]) -> list[Block]:
    return [{"tool": "slow_question", "input": {}}, {"tool": "quick_question", "input": {}}]


def build(inputs: AgentInputs) -> AgentSpec:
    script = [Scenario("both", [_both, lambda r: [{"text": "Thanks."}]], keywords=("ask",))]
    return AgentSpec(tools=[slow_question, quick_question], model=inputs.model(scripted=script))


def test_cards_follow_the_models_call_order_not_the_order_they_were_raised(
    stores: Stores, clock: ManualClock
) -> None:
    rt = own_agent_runtime(stores, clock, build)
    RAISED.clear()

    offered = run_turn(rt, Caller("alice"), "ordered", "ask both").offer

    # The quick tool raised first; the model called the slow one first
    assert RAISED == ["quick", "slow"]
    assert offered is not None
    assert [a.card["interrupt_name"] for a in offered.request.asked] == ["slow", "quick"]
    stored = stores.requests.get("ordered", clock.now_ms())
    assert stored is not None
    assert [a.interrupt_id for a in stored.asked] == [a.interrupt_id for a in offered.request.asked]
