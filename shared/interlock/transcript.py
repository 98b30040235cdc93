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
# What a saved turn keeps of each tool call: the arguments the page names a call by,
# and as much of its result as the page shows.
NAMED_BY: Final = ("url", "recipient", "prompt", "reason")
SAVED_SUBJECT_CHARS: Final = 120
SAVED_RESULT_CHARS: Final = 200


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
    return {"role": "assistant", "text": text, "tools": [saved_call(c) for c in calls]}


def saved_call(call: dict[str, Any]) -> dict[str, Any]:
    """One call as a reloaded thread tells it: its tool, status, what it was called on
    and how it went (its result's first line: the rest is guidance for the model), so a
    call that was not run or was merged reads as such, not as a bare error."""
    saved: dict[str, Any] = {"name": call["name"], "status": call["status"]}
    given = call.get("input")
    named = {
        key: str(given[key])[:SAVED_SUBJECT_CHARS]
        for key in NAMED_BY
        if isinstance(given, dict) and given.get(key)
    }
    if named:
        saved["input"] = named
    if isinstance(call.get("result"), str):
        saved["result"] = call["result"].split("\n")[0][:SAVED_RESULT_CHARS]
    return saved


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
    # A paused batch's other calls may be settled already (run, or not run by a hook):
    # their results are held apart from the messages until the resume.
    held = {r["toolUseId"]: r for r in held_results(built.agent)}
    # Calls in the order the model made them: a batch's results come as they finish.
    made = {call_id: i for i, call_id in enumerate(names)}
    calls = []
    for message in messages[started:]:
        for block in sorted(message["content"], key=lambda b: _made_at(b, made)):
            # A call appears once: with its result, or as pending (paused) when it has none.
            use = block.get("toolUse")
            done = block.get("toolResult")
            if use and use["toolUseId"] in held and use["toolUseId"] not in results:
                kept = held[use["toolUseId"]]
                status, text = kept.get("status"), result_text(kept)
                calls.append({**_call(use), "status": status, "result": text})
            elif use and use["toolUseId"] not in results:
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


def held_results(agent: Any) -> list[dict[str, Any]]:
    """The results the other calls of a paused batch already have (they ran, or a hook
    did not run them) while a call of theirs waits on a person.

    Strands holds them on the agent's interrupt state, not in its messages, until the
    resume appends them with the paused call's own. Read there (Strands has no public
    accessor); an agent that is not paused holds none.
    """
    state = getattr(agent, "_interrupt_state", None)
    pending = getattr(state, "pending_tool_execution", None)
    if not getattr(state, "activated", False) or pending is None:
        return []
    return list(getattr(pending, "completed_tool_results", None) or [])


def _made_at(block: Any, made: dict[str, int]) -> int:
    """Where a result's call comes among the calls made (other blocks come first, in order)."""
    done = block.get("toolResult")
    return made.get(done["toolUseId"], -1) if done else -1


def _call(use: Any) -> dict[str, Any]:
    return {"id": use["toolUseId"], "name": use["name"], "input": use["input"]}
