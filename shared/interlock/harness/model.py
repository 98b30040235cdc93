"""The stand-in models for demos and tests, where no LLM is reachable.

`ScriptedModel` plays an agent's script. It is a real Strands `Model`: the agent loop,
tools, hooks and interrupts all run for real; only the model's choices come from a
script. Which step to play is derived from the conversation itself (assistant messages
since the turn's user prompt), so a fresh process that loads a snapshot continues the
script exactly where the paused one was.
Deployed agents use Bedrock; see `interlock.harness.agent.build_model`.

`ToolsModel` is the other stand-in, for an agent that ships no script
(`INTERLOCK_MODEL=tools`). It is not a language model either: it reads the person's
message for the name of one of the agent's tools (`call refund_order`, or just the name
anywhere in the message) and calls that tool with the arguments the message names
(`order_id=A-1`, or a JSON object); an argument the tool requires and the message does
not name is filled from the tool's input schema (its default, the first of its choices,
or a placeholder of its type). Once the call has a result, it answers with a short text
quoting it; a message naming no tool is answered with the tools it can call. It too
decides from the conversation alone, so a paused run resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

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
        for event in stream_events(blocks, input_tokens, output_tokens, paced=bool(self._chunk_s)):
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
        prompt = turn_prompt(messages).lower()
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


def turn_prompt(messages: Messages) -> str:
    """The text of the turn's prompt: the last user message that holds text."""
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


def stream_events(
    blocks: list[Block], input_tokens: int, output_tokens: int, *, paced: bool = False
) -> list[StreamEvent]:
    """The stream events of one assistant message made of `blocks` (a tool block carries
    its `id`), with the stop reason and token usage a model reports."""
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


# -- the tools stand-in ------------------------------------------------------------------

# "call refund_order", "Call refund-order": the explicit way to name a tool.
_CALL: Final = re.compile(r"\bcall\s+([A-Za-z_][\w-]*)", re.I)
# `name=value`: a quoted string, a JSON list, or one word.
_PAIR: Final = re.compile(
    r"""(?<![\w-])([A-Za-z_][\w-]*)\s*=\s*("(?:[^"\\]|\\.)*"|'[^']*'|\[[^\]]*\]|\S+)"""
)
_NOT_NAME: Final = r"[A-Za-z0-9_-]"
# Strings of these formats get a placeholder of their own shape.
_FORMATS: Final = {
    "date": "2026-01-01",
    "date-time": "2026-01-01T00:00:00Z",
    "email": "someone@example.org",
    "uri": "https://example.org/",
    "url": "https://example.org/",
}


class ToolsModel(Model):
    """A stand-in model that calls the tool the person's message names, with the
    arguments it names (the rest filled from the tool's input schema), then quotes the
    result (see the module's docstring).

    Attributes:
        calls: Model calls served by this instance.
        usage: Input and output tokens reported, estimated as characters / 4.
    """

    def __init__(self, pace_ms: tuple[int, int] = (0, 0)) -> None:
        """Args:
        pace_ms: A silence before each answer and a pause between streamed words, in
            milliseconds, to stand in for a slow model.
        """
        self._think_s, self._chunk_s = pace_ms[0] / 1000, pace_ms[1] / 1000
        self.calls = 0
        self.usage = {"inputTokens": 0, "outputTokens": 0}

    def update_config(self, **model_config: Any) -> None:
        """Nothing to configure."""

    def get_config(self) -> dict[str, Any]:
        return {"model_id": "tools"}

    async def structured_output(
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        raise NotImplementedError("the tools stand-in does not produce structured output")
        yield {}  # pragma: no cover - makes this an async generator

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        self.calls += 1
        blocks = [_with_id(b) for b in reply(messages, tool_specs or [])]
        input_tokens = len(json.dumps(messages, default=str)) // 4
        output_tokens = len(json.dumps(blocks, default=str)) // 4
        self.usage["inputTokens"] += input_tokens
        self.usage["outputTokens"] += output_tokens
        if self._think_s:
            await asyncio.sleep(self._think_s)
        for event in stream_events(blocks, input_tokens, output_tokens, paced=bool(self._chunk_s)):
            if self._chunk_s and "contentBlockDelta" in event:
                await asyncio.sleep(self._chunk_s)
            yield event


def reply(messages: Messages, tool_specs: Sequence[ToolSpec]) -> list[Block]:
    """What the stand-in says next: a text quoting the results when the last message
    holds tool results, else a call of the tool the turn's prompt names, else the list
    of tools it can call."""
    if messages and messages[-1]["role"] == "user":
        results = [b["toolResult"] for b in messages[-1]["content"] if "toolResult" in b]
        if results:
            return [{"text": _quoted(results, _tool_names(messages))}]
    prompt = turn_prompt(messages)
    spec = named_tool(prompt, tool_specs)
    if spec is None:
        return [{"text": _menu(tool_specs)}]
    arguments = arguments_for(prompt, spec)
    return [
        {"text": f"Calling {spec['name']} with {json.dumps(arguments)}."},
        {"tool": spec["name"], "input": arguments},
    ]


def named_tool(message: str, tool_specs: Sequence[ToolSpec]) -> ToolSpec | None:
    """The tool `message` names: the one after "call", else the one whose name (or the
    name with spaces for its underscores) appears first; None when it names none."""
    by_name = {spec["name"].lower(): spec for spec in tool_specs}
    for called in _CALL.finditer(message):
        if (spec := by_name.get(called[1].lower())) is not None:
            return spec
    found: list[tuple[int, int, str]] = []
    for name in by_name:
        for spelled in {name, re.sub(r"[_-]+", " ", name)}:
            pattern = rf"(?<!{_NOT_NAME}){re.escape(spelled)}(?!{_NOT_NAME})"
            if seen := re.search(pattern, message, re.I):
                # The earliest mention wins; at one place, the longest name.
                found.append((seen.start(), -len(spelled), name))
    return by_name[min(found)[2]] if found else None


def arguments_for(message: str, spec: ToolSpec) -> dict[str, Any]:
    """The call's input: what `message` names (a JSON object, then `name=value` pairs),
    only for arguments the tool declares, then every required one still missing, filled
    from the input schema."""
    root = input_schema(spec)
    properties: Mapping[str, Any] = root.get("properties") or {}
    given = {k: v for k, v in _json_object(message).items() if not properties or k in properties}
    for name, raw in _PAIR.findall(message):
        if name in properties and name not in given:
            given[name] = _typed(raw, _resolved(properties[name], root))
    for name in root.get("required") or []:
        if name not in given:
            given[name] = placeholder(properties.get(name, {}), root)
    return given


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    """A tool's input JSON Schema (Strands keeps it under `json`)."""
    schema: Any = spec.get("inputSchema") or {}
    inner = schema.get("json", schema) if isinstance(schema, Mapping) else {}
    return dict(inner) if isinstance(inner, Mapping) else {}


def placeholder(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """A value `schema` admits: its default, its constant, its first choice or example,
    else a placeholder of its type (inside its bounds where it states them)."""
    schema = _resolved(schema, root)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    for listed in ("enum", "examples"):
        if schema.get(listed):
            return schema[listed][0]
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key) or [] if _resolved(o, root).get("type") != "null"]
        if options:
            return placeholder(options[0], root)
    kind = _type_of(schema)
    if kind == "object":
        required = schema.get("required") or []
        properties = schema.get("properties") or {}
        return {name: placeholder(properties.get(name, {}), root) for name in required}
    if kind == "array":
        item = schema.get("items") or {}
        return [placeholder(item, root) for _ in range(int(schema.get("minItems", 0)))]
    if kind in ("integer", "number"):
        value = max(1, schema.get("minimum", 1))
        value = min(value, schema.get("maximum", value))
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    text = _FORMATS.get(str(schema.get("format")), "example")
    return text[: schema["maxLength"]] if "maxLength" in schema else text


def _typed(raw: str, schema: Mapping[str, Any]) -> Any:
    """A value as the message wrote it, read as the argument's type declares."""
    if raw[:1] in "\"'" and raw[-1:] == raw[:1] and len(raw) > 1:
        return _unquoted(raw)
    raw = raw.rstrip(",;.") or raw  # the end of the sentence is not part of the value
    kind = _type_of(schema)
    if kind in (None, "string"):
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if kind == "array" and not isinstance(value, list):
        return [part.strip() for part in raw.split(",") if part.strip()]
    return value


def _unquoted(raw: str) -> str:
    if raw[0] == '"':
        try:
            return str(json.loads(raw))
        except ValueError:
            pass
    return raw[1:-1]


def _type_of(schema: Mapping[str, Any]) -> str | None:
    """The JSON type a schema declares, other than null (an optional argument's
    `anyOf: [{"type": "null"}, {...}]` included); None when it declares none."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None:
        options = [*(schema.get("anyOf") or []), *(schema.get("oneOf") or [])]
        kind = next((t for o in options if (t := _type_of(o)) not in (None, "null")), None)
    return kind if isinstance(kind, str) else None


def _resolved(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """`schema`, or what its local `$ref` (`#/$defs/Name`) points at."""
    reference = schema.get("$ref")
    if not isinstance(reference, str) or not reference.startswith("#/"):
        return schema
    found: Any = root
    for part in reference[2:].split("/"):
        found = found.get(part) if isinstance(found, Mapping) else None
    return found if isinstance(found, Mapping) else schema


def _json_object(message: str) -> dict[str, Any]:
    """The first JSON object written in `message`, or an empty one."""
    decoder = json.JSONDecoder()
    for start in (i for i, c in enumerate(message) if c == "{"):
        try:
            value, _ = decoder.raw_decode(message, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def _tool_names(messages: Messages) -> dict[str, str]:
    """Each tool use id of the conversation, and the tool it called."""
    return {
        block["toolUse"]["toolUseId"]: block["toolUse"]["name"]
        for message in messages
        for block in message["content"]
        if "toolUse" in block
    }


def _quoted(results: Sequence[Mapping[str, Any]], names: Mapping[str, str]) -> str:
    said = []
    for result in results:
        name = names.get(str(result.get("toolUseId")), "the tool")
        verb = "failed" if result.get("status") == "error" else "returned"
        said.append(f"{name} {verb}: {_result_text(result)}")
    return " ".join(said)


def _result_text(result: Mapping[str, Any]) -> str:
    parts = []
    for content in result.get("content") or []:
        if "text" in content:
            parts.append(str(content["text"]))
        elif "json" in content:
            parts.append(json.dumps(content["json"], default=str))
    return " ".join(parts).strip() or "(no output)"


def _menu(tool_specs: Sequence[ToolSpec]) -> str:
    if not tool_specs:
        return "I am the tools stand-in, not a language model, and this agent has no tools."
    first = tool_specs[0]
    required = input_schema(first).get("required") or []
    example = " ".join([f"call {first['name']}", *(f"{name}=..." for name in required[:2])])
    listed = "; ".join(
        f"{spec['name']} ({_first_line(spec.get('description', ''))})"
        if spec.get("description")
        else spec["name"]
        for spec in tool_specs
    )
    return (
        "I am the tools stand-in, not a language model: name one of my tools in your "
        f'message and I call it, e.g. "{example}". My tools: {listed}.'
    )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].rstrip(".") if text.strip() else ""


def _with_id(block: Block) -> Block:
    if "tool" not in block:
        return block
    return {**block, "id": f"tooluse_{uuid.uuid4().hex[:16]}"}
