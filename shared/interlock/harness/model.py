"""A scripted stand-in model for demos and tests, where no LLM is reachable.

It is a real Strands `Model`: the agent loop, tools, hooks and interrupts all run for
real; only the model's choices come from a script. Which step to play is derived from
the conversation itself (assistant messages since the turn's user prompt), so a fresh
process that loads a snapshot continues the script exactly where the paused one was.
Deployed agents use Bedrock; see `interlock.harness.agent.build_model`.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.content import Messages
from strands.types.event_loop import StopReason
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

T = TypeVar("T", bound=BaseModel)

Block = dict[str, Any]
"""`{"text": str}` or `{"tool": name, "input": {...}}`."""
Step = Callable[[list[str]], list[Block]]
"""Given the texts of the last tool results, the blocks of the next assistant message."""


@dataclass(frozen=True)
class Scenario:
    """A named script: one step per model call in a turn."""

    name: str
    steps: Sequence[Step]
    keywords: tuple[str, ...] = ()


class ScriptedModel(Model):
    """Plays the scenario whose keyword appears in the turn's prompt (else the first).

    Attributes:
        calls: Model calls served by this instance.
        usage: Input and output tokens reported, estimated as characters / 4.
        played: `(scenario, step)` of every call, in order (for benchmarks).
        tool_steps: The step that emitted each tool use id.
    """

    def __init__(self, scenarios: Sequence[Scenario], pace_ms: tuple[int, int] = (0, 0)) -> None:
        """Args:
        scenarios: The scripts, the first being the default.
        pace_ms: A silence before each answer and a pause between streamed words, in
            milliseconds, to stand in for a slow model (streaming demos and tests).
        """
        self._scenarios = list(scenarios)
        self._think_s, self._chunk_s = pace_ms[0] / 1000, pace_ms[1] / 1000
        self.calls = 0
        self.usage = {"inputTokens": 0, "outputTokens": 0}
        self.played: list[tuple[str, int]] = []
        self.tool_steps: dict[str, tuple[str, int]] = {}

    def update_config(self, **model_config: Any) -> None:
        """Nothing to configure."""

    def get_config(self) -> dict[str, Any]:
        return {"model_id": "scripted", "scenarios": [s.name for s in self._scenarios]}

    async def structured_output(
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        raise NotImplementedError("the scripted model does not produce structured output")
        yield {}  # pragma: no cover - makes this an async generator

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        self.calls += 1
        scenario, step = self.step_for(messages)
        self.played.append((scenario.name, step))
        blocks = [
            self._with_id(b, (scenario.name, step)) for b in self._blocks(scenario, step, messages)
        ]
        input_tokens = len(json.dumps(messages, default=str)) // 4
        output_tokens = len(json.dumps(blocks)) // 4
        self.usage["inputTokens"] += input_tokens
        self.usage["outputTokens"] += output_tokens
        if self._think_s:
            await asyncio.sleep(self._think_s)
        for event in _events(blocks, input_tokens, output_tokens, paced=bool(self._chunk_s)):
            if self._chunk_s and "contentBlockDelta" in event:
                await asyncio.sleep(self._chunk_s)
            yield event

    def _with_id(self, block: Block, step: tuple[str, int]) -> Block:
        if "tool" not in block:
            return block
        tool_use_id = f"tooluse_{uuid.uuid4().hex[:16]}"
        self.tool_steps[tool_use_id] = step
        return {**block, "id": tool_use_id}

    def step_for(self, messages: Messages) -> tuple[Scenario, int]:
        """The scenario a call with `messages` plays, and which of its steps."""
        return self.scenario_for(messages), _assistant_messages_this_turn(messages)

    def scenario_for(self, messages: Messages) -> Scenario:
        prompt = _turn_prompt(messages).lower()
        for scenario in self._scenarios:
            if any(word in prompt for word in scenario.keywords):
                return scenario
        return self._scenarios[0]

    def _blocks(self, scenario: Scenario, step: int, messages: Messages) -> list[Block]:
        if step >= len(scenario.steps):
            return [{"text": "That is all I had planned for this request."}]
        return scenario.steps[step](_last_tool_results(messages))


def _turn_start(messages: Messages) -> int:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message["role"] == "user" and any("text" in block for block in message["content"]):
            return index
    return 0


def _turn_prompt(messages: Messages) -> str:
    if not messages:
        return ""
    start = messages[_turn_start(messages)]
    return " ".join(str(block.get("text", "")) for block in start["content"])


def _assistant_messages_this_turn(messages: Messages) -> int:
    return sum(1 for m in messages[_turn_start(messages) :] if m["role"] == "assistant")


def _last_tool_results(messages: Messages) -> list[str]:
    if not messages or messages[-1]["role"] != "user":
        return []
    texts = []
    for block in messages[-1]["content"]:
        result = block.get("toolResult")
        if result:
            texts.append(" ".join(str(c.get("text", "")) for c in result.get("content", [])))
    return texts


def _events(
    blocks: list[Block], input_tokens: int, output_tokens: int, *, paced: bool = False
) -> list[StreamEvent]:
    events: list[StreamEvent] = [{"messageStart": {"role": "assistant"}}]
    for block in blocks:
        if "text" in block:
            # Paced, the text streams a word at a time, as a model's would.
            pieces = re.findall(r"\S+\s*|\s+", block["text"]) if paced else [block["text"]]
            deltas: list[StreamEvent] = [
                {"contentBlockDelta": {"delta": {"text": piece}}} for piece in pieces
            ]
            events += [{"contentBlockStart": {"start": {}}}, *deltas, {"contentBlockStop": {}}]
        else:
            events += [
                {
                    "contentBlockStart": {
                        "start": {"toolUse": {"toolUseId": block["id"], "name": block["tool"]}}
                    }
                },
                {
                    "contentBlockDelta": {
                        "delta": {"toolUse": {"input": json.dumps(block["input"])}}
                    }
                },
                {"contentBlockStop": {}},
            ]
    stop: StopReason = "tool_use" if any("tool" in block for block in blocks) else "end_turn"
    events.append({"messageStop": {"stopReason": stop}})
    events.append(
        {
            "metadata": {
                "usage": {
                    "inputTokens": input_tokens,
                    "outputTokens": output_tokens,
                    "totalTokens": input_tokens + output_tokens,
                },
                "metrics": {"latencyMs": 0},
            }
        }
    )
    return events
