"""The tools stand-in (`INTERLOCK_MODEL=tools`): it calls the tool a person's message
names, with the arguments the message names and the rest from the tool's schema, and
quotes the result; through Interlock, a call that needs approval pauses and the resumed
run, in a fresh model, answers with the tool's result."""

from __future__ import annotations

from typing import Any

import pytest
from strands import Agent, ToolContext, tool
from strands.types.tools import ToolSpec
from strands.vended_interventions.hitl import HumanInTheLoop

from interlock.adapters.factory import Stores
from interlock.agent import AgentInputs, AgentSpec
from interlock.config import ModelSpec, assemble
from interlock.harness.agent import ModelConfig, build_model
from interlock.harness.model import ToolsModel, arguments_for, named_tool, placeholder, reply
from interlock.resume import resume_turn
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, run_turn


@tool
def refund_order(order_id: str, amount: float = 10.0) -> str:
    """Refund a customer's order."""
    return f"Refunded {amount:.2f} on order {order_id}."


@tool
def stock_level(part: str) -> str:
    """How many of a part are in stock."""
    return f"{part}: 3 in stock"


def spec(name: str, properties: dict[str, Any], required: list[str]) -> ToolSpec:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"name": name, "description": f"The {name} tool.", "inputSchema": {"json": schema}}


def test_it_calls_the_tool_the_message_names_with_the_arguments_it_names() -> None:
    specs = [refund_order.tool_spec, stock_level.tool_spec]
    messages: Any = [{"role": "user", "content": [{"text": "call refund_order order_id=A-1."}]}]

    blocks = reply(messages, specs)

    assert blocks[-1] == {"tool": "refund_order", "input": {"order_id": "A-1"}}
    assert "Calling refund_order" in blocks[0]["text"]


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ("call stock_level part=x", "stock_level"),
        ("What is the stock_level of valves? then refund_order", "stock_level"),
        ("please refund order A-1", "refund_order"),  # the name with spaces
        ("Call REFUND_ORDER", "refund_order"),
        ("restock_level_x is no tool", None),  # a name inside a longer word is not it
        ("hello", None),
    ],
)
def test_the_named_tool_is_the_called_one_else_the_first_mentioned(
    message: str, named: str | None
) -> None:
    found = named_tool(message, [refund_order.tool_spec, stock_level.tool_spec])
    assert (found["name"] if found else None) == named


def test_arguments_come_typed_from_the_message_then_from_the_schema() -> None:
    properties = {
        "order_id": {"type": "string"},
        "count": {"type": "integer", "minimum": 5},
        "rate": {"type": "number"},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "region": {"enum": ["eu-west", "us-east"]},
        "note": {"type": "string", "default": "none"},
        "when": {"type": "string", "format": "date"},
        "address": {"$ref": "#/$defs/Address"},
        "maybe": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
    }
    tool_spec = spec("ship", properties, list(properties))
    tool_spec["inputSchema"]["json"]["$defs"] = {  # type: ignore[index]
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }
    }

    message = 'ship order_id="A 1" rate=2.5 urgent=true tags=a,b stray=1 maybe=4'
    given = arguments_for(message, tool_spec)

    assert given == {
        "order_id": "A 1",
        "rate": 2.5,
        "urgent": True,
        "tags": ["a", "b"],
        "count": 5,
        "region": "eu-west",
        "note": "none",
        "when": "2026-01-01",
        "address": {"city": "example"},
        "maybe": 4,  # an optional integer, read as one
    }
    assert arguments_for("ship", tool_spec)["maybe"] == 1
    # A JSON object in the message names arguments too; it wins over a pair
    json_given = arguments_for('ship {"order_id": "B-2", "count": 7} order_id=C-3', tool_spec)
    assert (json_given["order_id"], json_given["count"]) == ("B-2", 7)


def test_a_placeholder_stays_inside_the_bounds_the_schema_states() -> None:
    assert placeholder({"type": "integer", "maximum": 0}, {}) == 0
    assert placeholder({"type": "string", "maxLength": 3}, {}) == "exa"
    assert placeholder({"type": "array", "minItems": 2, "items": {"type": "number"}}, {}) == [1, 1]


def test_with_no_tool_named_it_says_which_tools_it_has() -> None:
    messages: Any = [{"role": "user", "content": [{"text": "hello"}]}]
    (said,) = reply(messages, [refund_order.tool_spec, stock_level.tool_spec])
    assert "refund_order (Refund a customer's order)" in said["text"]
    assert "stock_level" in said["text"]
    assert '"call refund_order order_id=..."' in said["text"]
    assert "stand-in" in said["text"]


def test_in_a_strands_agent_it_quotes_the_result_after_the_call() -> None:
    agent = Agent(model=ToolsModel(), tools=[refund_order], callback_handler=None)

    result = agent("call refund_order order_id=A-1 amount=2.5")

    assert str(result).strip() == "refund_order returned: Refunded 2.50 on order A-1."


def test_the_setting_tools_is_accepted_and_builds_the_stand_in() -> None:
    assert ModelSpec.parse("tools").spec == "tools"
    assert ModelSpec.parse("tools:20/5").pace_ms == (20, 5)
    assert assemble({"INTERLOCK_MODEL": "tools"}).model == "tools"
    model = build_model(ModelConfig(ModelSpec.parse("tools")))
    assert isinstance(model, ToolsModel)
    # An agent without a script, under the scripted model, is told of the tools stand-in
    with pytest.raises(ValueError, match="INTERLOCK_MODEL=tools"):
        build_model(ModelConfig(ModelSpec.parse("scripted")))


def own_agent(inputs: AgentInputs) -> AgentSpec:
    """A newcomer's agent: its own tool, every call approved by a person, no model."""
    return AgentSpec(
        tools=[refund_order],
        system_prompt="You handle refunds.",
        interventions=[HumanInTheLoop()],
    )


def test_through_interlock_the_call_pauses_and_the_resumed_run_quotes_it(
    stores: Stores, clock: ManualClock
) -> None:
    # A fresh model for every run and resume, as each process builds its own
    rt = Runtime(
        stores,
        ToolsModel,
        clock=clock,
        agent=own_agent,
        config=assemble({"INTERLOCK_MODEL": "tools"}),
    )
    caller, chat = Caller("newcomer"), "tools-chat"

    paused = run_turn(rt, caller, chat, "call refund_order order_id=A-1")

    assert paused.offer is not None
    card = paused.offer.request.card
    assert (card["type"], card["tool"], card["summary"]) == (
        "confirm",
        "refund_order",
        {"order_id": "A-1"},
    )
    done = resume_turn(
        rt,
        caller,
        chat,
        interrupt_id=paused.offer.request.interrupt_id,
        secret=paused.offer.secret,
        status="resolved",
        payload={"decision": "approve"},
    )
    assert done.outcome == "completed"
    assert "refund_order returned: Refunded 10.00 on order A-1." in (done.text or "")


@tool(context=True)
def close_account(account: str, tool_context: ToolContext) -> str:
    """Close a customer account."""
    reason = tool_context.interrupt("close-reason", reason=f"Why close {account}?")
    return f"Closed {account}: {reason}"


def asking_agent(inputs: AgentInputs) -> AgentSpec:
    return AgentSpec(tools=[close_account])


def test_a_tool_that_asks_inside_its_body_pauses_and_its_answer_is_quoted(
    stores: Stores, clock: ManualClock
) -> None:
    rt = Runtime(
        stores,
        ToolsModel,
        clock=clock,
        agent=asking_agent,
        config=assemble({"INTERLOCK_MODEL": "tools"}),
    )
    caller, chat = Caller("newcomer"), "asking-chat"

    paused = run_turn(rt, caller, chat, "please close account account=acct-9.")

    assert paused.offer is not None
    assert paused.offer.request.card["reason"] == "Why close acct-9?"
    done = resume_turn(
        rt,
        caller,
        chat,
        interrupt_id=paused.offer.request.interrupt_id,
        secret=paused.offer.secret,
        status="resolved",
        payload="customer request",
    )
    assert done.outcome == "completed"
    assert "close_account returned: Closed acct-9: customer request" in (done.text or "")
