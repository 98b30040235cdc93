"""The journal holds back a response that calls no tool (the run's answer, which the
finish stores) and records it only once the run goes on past it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from interlock.harness.journal import Journal, JournaledModel
from interlock.harness.model import Scenario, ScriptedModel


def _response(*blocks: dict[str, Any]) -> list[Any]:
    events: list[Any] = [{"messageStart": {"role": "assistant"}}]
    for block in blocks:
        if "tool" in block:
            start = {"toolUse": {"toolUseId": block["tool"], "name": "fetch_url"}}
            events.append({"contentBlockStart": {"start": start}})
            events.append({"contentBlockDelta": {"delta": {"toolUse": {"input": "{}"}}}})
        else:
            events.append({"contentBlockDelta": {"delta": {"text": block["text"]}}})
        events.append({"contentBlockStop": {}})
    events.append(
        {"messageStop": {"stopReason": "tool_use" if "tool" in blocks[-1] else "end_turn"}}
    )
    return events


def _journal() -> tuple[Journal, list[tuple[int, dict[str, Any], bool]]]:
    written: list[tuple[int, dict[str, Any], bool]] = []
    journal = Journal([], lambda seq, text, acting: written.append((seq, json.loads(text), acting)))
    return journal, written


def test_a_response_that_calls_a_tool_is_recorded_at_once_and_marks_the_answer_acted_on() -> None:
    journal, written = _journal()
    journal.record_model(_response({"text": "fetching"}, {"tool": "t1"}))
    assert [(seq, step["k"], acting) for seq, step, acting in written] == [(0, "model", True)]


def test_the_answer_is_held_back_and_recorded_only_when_the_run_goes_on() -> None:
    journal, written = _journal()
    journal.record_model(_response({"tool": "t1"}))
    journal.record_tool({"toolUseId": "t1", "status": "success", "content": [{"text": "ok"}]})
    journal.record_model(_response({"text": "Done."}))
    assert [step["k"] for _, step, _ in written] == ["model", "tool"]  # the finish stores it

    journal.flush()  # the model is asked again: the held-back response is a step after all
    journal.flush()
    assert [(seq, step["k"]) for seq, step, _ in written] == [
        (0, "model"),
        (1, "tool"),
        (2, "model"),
    ]
    assert written[2][1]["events"][1]["contentBlockDelta"]["delta"]["text"] == "Done."


def test_a_step_after_a_held_back_response_keeps_the_order() -> None:
    journal, written = _journal()
    journal.record_model(_response({"text": "Thinking it over."}))
    journal.record_model(_response({"tool": "t2"}))
    assert [(seq, step["k"], acting) for seq, step, acting in written] == [
        (0, "model", False),
        (1, "model", True),
    ]


def test_asking_the_model_again_records_the_response_it_held_back() -> None:
    journal, written = _journal()
    script = Scenario("two", [lambda _: [{"text": "first"}], lambda _: [{"text": "second"}]])
    model = JournaledModel(ScriptedModel([script]), journal)

    async def ask(messages: list[Any]) -> None:
        async for _ in model.stream(messages):
            pass

    prompt = [{"role": "user", "content": [{"text": "go"}]}]
    asyncio.run(ask(prompt))
    assert written == []
    reply = {"role": "assistant", "content": [{"text": "first"}]}
    asyncio.run(ask([*prompt, reply, {"role": "user", "content": [{"text": "more"}]}]))
    assert [seq for seq, _, _ in written] == [0]
