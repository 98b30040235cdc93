"""The chat's transcript as the agent and the client see it: history in, answers out."""

from __future__ import annotations

import hashlib
from typing import Any, Final

from strands.agent.agent_result import AgentResult

from interlock.harness.agent import BuiltAgent
from interlock.harness.progress import result_text
from interlock.outcomes import Usage
from interlock.ports import Stores

HISTORY_TURNS: Final = 50


def history(stores: Stores, chat_id: str) -> list[Any]:
    """Earlier turns as alternating text messages (same-role neighbours merged)."""
    messages: list[Any] = []
    turns = stores.chats.latest_turns(chat_id, HISTORY_TURNS)
    for turn in turns:
        if messages and messages[-1]["role"] == turn["role"]:
            messages[-1]["content"].append({"text": turn["text"]})
        else:
            messages.append({"role": turn["role"], "content": [{"text": turn["text"]}]})
    while messages and messages[0]["role"] != "user":
        messages.pop(0)
    return messages


def answer_message_id(chat_id: str, turn_seq: int, interrupt_id: str | None) -> str:
    """The id of a run's final message: derived from where it ends, so a replay sends the
    stored answer under the id the first stream gave it."""
    digest = hashlib.sha256(f"{chat_id}\0{turn_seq}\0{interrupt_id or ''}".encode())
    return f"msg_{digest.hexdigest()[:32]}"


def text_message_id(chat_id: str, turn_seq: int, interrupt_id: str | None, index: int) -> str:
    """The id of the model's `index`-th message of a run (a run starts a turn, or
    resumes from `interrupt_id`): the id its text streamed under, and the id a replay
    of that text uses."""
    return f"{answer_message_id(chat_id, turn_seq, interrupt_id)}_{index}"


def model_messages(built: BuiltAgent, started: int) -> int:
    """How many messages the model wrote in this run (from message `started` on)."""
    return sum(1 for m in built.agent.messages[started:] if m["role"] == "assistant")


def answer_turn(text: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant turn saved for a run's answer, with a summary of its tool activity
    so a reloaded thread can show it."""
    tools = [{"name": c["name"], "status": c["status"]} for c in calls]
    return {"role": "assistant", "text": text, "tools": tools}


def summary(built: BuiltAgent, result: AgentResult, started: int) -> tuple[list[Any], Usage]:
    """This run's tool calls (from message `started` on) and what the run cost."""
    messages = built.agent.messages
    names = {
        block["toolUse"]["toolUseId"]: block["toolUse"]
        for message in messages
        for block in message["content"]
        if "toolUse" in block
    }
    results = {
        block["toolResult"]["toolUseId"]: block["toolResult"]
        for message in messages
        for block in message["content"]
        if "toolResult" in block
    }
    # Calls the run was paused in: the client saw them start in the earlier stream.
    earlier = {
        block["toolUse"]["toolUseId"]
        for message in messages[:started]
        for block in message["content"]
        if "toolUse" in block
    }
    calls = []
    for message in messages[started:]:
        for block in message["content"]:
            # A call appears once: with its result, or as pending (paused) when it has none.
            use = block.get("toolUse")
            done = block.get("toolResult")
            if use and use["toolUseId"] not in results:
                calls.append({**_call(use), "status": "pending", "result": None})
            elif done and done["toolUseId"] in names:
                text = result_text(done)
                calls.append(
                    {
                        **_call(names[done["toolUseId"]]),
                        "status": done.get("status"),
                        "result": text,
                        "resumed": done["toolUseId"] in earlier,
                    }
                )
    tokens = result.metrics.accumulated_usage
    usage = Usage(
        model_calls=min(built.limit.calls, built.limit.max_calls) - built.replayed_model_calls,
        input_tokens=int(tokens.get("inputTokens", 0)),
        output_tokens=int(tokens.get("outputTokens", 0)),
        tool_executions=built.meter.tool_executions,
    )
    return calls, usage


def _call(use: Any) -> dict[str, Any]:
    return {"id": use["toolUseId"], "name": use["name"], "input": use["input"]}
