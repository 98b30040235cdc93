"""The journal of a resumed run: every model response and tool result, recorded as it
happens, so a worker that takes the run over continues from the last recorded step.
A response that calls no tool is the run's answer: it is recorded only if the run goes
on past it (`flush`), since the write that finishes the run stores that answer anyway,
and a step recorded just before that write would save a takeover nothing the finish
does not (a fault between the response and either write costs the same model call).

Like a durable-execution engine's event history, adapted to Strands: the model is
wrapped so a recorded response is replayed instead of asking the model again (same
text, same toolUseIds), and a hook swaps a recorded tool call's body for its recorded
result. New steps are appended through `record`, which the service binds to a write
fenced by the claim: a worker that lost its claim cannot record, and so stops before
acting on an unrecorded step. Strands offers no such history of its own (its session
managers save messages, not a step cursor that a second process can resume), which is
why this is written here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Collection, Iterable, Sequence
from typing import Any, Final

from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent, HookProvider, HookRegistry
from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import AgentTool, ToolResult, ToolSpec, ToolUse

from interlock.cards import call_digest
from interlock.context import current_request
from interlock.errors import CallChanged, LeaseLost, StoreError, TooLarge
from interlock.harness.wrapped import WrappedModel

MODEL: Final = "model"
TOOL: Final = "tool"
# Each step is stored on its own (an item, or an object once it outgrows one), so a
# journal has no total cap and a step may be as large as any tool returns (the egress
# cap is 1 MB). This bound only stops a runaway step; a run that meets it is settled.
MAX_STEP_BYTES: Final = 16 * 1024 * 1024


class Journal:
    """Recorded steps to replay, and the way to record new ones.

    Args:
        entries: The steps recorded so far (JSON text, oldest first).
        record: Records step `seq` durably (`seq`, the text, and whether it marks the
            run as acting); raises (e.g. `LeaseLost`) to stop the run.
        recomputed: Tool calls whose result is not recorded: Interlock's own asking
            tools answering their card, whose result follows from the card and the
            answer the claim recorded alone, so a takeover computes the same one.
        acted: Whether the claim's answer was already acted on (a tool started).
        mark_acted: Marks the answer as acted on, durably and fenced, before a tool body
            that no recorded step announced starts (a paused call resuming its body).

    `guard` is checked before every tool body: it raises when this worker may no longer
    act (its lease lapsed), so a worker that lost its claim starts no tool.
    """

    def __init__(
        self,
        entries: Sequence[str],
        record: Callable[[int, str, bool], None],
        recomputed: Collection[str] = (),
        *,
        acted: bool = False,
        mark_acted: Callable[[], None] = lambda: None,
    ) -> None:
        parsed = [json.loads(entry) for entry in entries]
        self._models: list[list[StreamEvent]] = [e["events"] for e in parsed if e["k"] == MODEL]
        self._tools: dict[str, ToolResult] = {
            e["result"]["toolUseId"]: e["result"] for e in parsed if e["k"] == TOOL
        }
        self._record = record
        self._recomputed = frozenset(recomputed)
        self._next_model = 0
        self._seq = len(parsed)
        # A response that called no tool, held back until the run goes on past it.
        self._pending: dict[str, Any] | None = None
        # One step is written at a time (parallel tool calls finish in threads), so steps
        # are numbered without gaps and a failed write leaves its number free.
        self._writing = threading.Lock()
        self.recorded = 0
        self.recorded_bytes = 0
        self.replayed_model_calls = 0
        self.failure: Exception | None = None
        self.acted = acted
        self._mark_acted = mark_acted
        self._marking = threading.Lock()
        self.guard: Callable[[], None] = lambda: None

    def next_model_response(self) -> list[StreamEvent] | None:
        """The recorded response for the next model call, if there is one."""
        if self._next_model >= len(self._models):
            return None
        events = self._models[self._next_model]
        self._next_model += 1
        self.replayed_model_calls += 1
        return events

    def record_model(self, events: list[StreamEvent]) -> None:
        """Record a fresh model response before the agent acts on it; one that calls a
        tool marks the answer as acted on in the same write (a tool is about to run).
        One that calls no tool ends the run unless something asks the model again: it
        is held back until then (`flush`), and the run's finish stores it otherwise."""
        compacted = compact(events)
        calls_tool = any(
            "toolUse" in e.get("contentBlockStart", {}).get("start", {}) for e in compacted
        )
        entry = {"k": MODEL, "events": compacted}
        if calls_tool:
            acting = not self.acted
            self._append(entry, acting=acting)
            self.acted = self.acted or acting
        else:
            self.flush()
            self._pending = entry
        self._models.append(compacted)
        self._next_model = len(self._models)

    def flush(self) -> None:
        """Record the held-back response: the run goes on past it (the model is asked
        again, or another step follows), so a takeover must replay it."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._append(pending)

    def before_body(self) -> None:
        """Called before a tool body runs (not a replayed or recomputed one): the worker
        must still hold its claim, and the answer is marked as acted on first. Parallel
        calls of one batch take turns, so the mark is written once."""
        with self._marking:
            try:
                self.guard()
                if not self.acted:
                    self._mark_acted()
                    self.acted = True
            except Exception as failed:
                self.failure = failed  # sticky: the run stops at this call
                raise

    def recomputes(self, tool_use_id: str) -> bool:
        """Whether this call's result is computed from its card, never recorded."""
        return tool_use_id in self._recomputed

    def tool_result(self, tool_use_id: str) -> ToolResult | None:
        """The recorded result of a tool call, if it ran before."""
        return self._tools.get(tool_use_id)

    def record_tool(self, result: ToolResult) -> None:
        """Record a tool call's result once its body has run."""
        if result["toolUseId"] in self._recomputed:
            return
        # "id" repeats the result's own; kept so a worker of the previous release can
        # still read a journal this one wrote.
        self._append({"k": TOOL, "id": result["toolUseId"], "result": result})
        self._tools[result["toolUseId"]] = result

    def _append(self, entry: dict[str, Any], acting: bool = False) -> None:
        self.flush()  # steps keep their order: a held-back response comes first
        text = json.dumps(entry, separators=(",", ":"), default=str)
        size = len(text.encode())
        with self._writing:
            try:
                if size > MAX_STEP_BYTES:
                    raise TooLarge(f"a journal step of {size} bytes is over {MAX_STEP_BYTES}")
                self._record(self._seq, text, acting)
            except Exception as failed:
                self.failure = failed  # sticky: nothing may be acted on after a lost record
                raise
            self._seq += 1
            self.recorded += 1
            self.recorded_bytes += size


def compact(events: Iterable[StreamEvent]) -> list[StreamEvent]:
    """The same response in fewer events: consecutive deltas of one block are merged,
    and the call's latency is left out (a replay takes none)."""
    out: list[Any] = []
    for event in events:
        raw: Any = event
        if "metrics" in raw.get("metadata", {}):
            raw = {**raw, "metadata": {k: v for k, v in raw["metadata"].items() if k != "metrics"}}
        delta = raw.get("contentBlockDelta", {}).get("delta")
        last = out[-1].get("contentBlockDelta", {}).get("delta") if out else None
        if delta and last and _merge(last, delta):
            continue
        out.append(json.loads(json.dumps(raw, default=str)))
    return out


def _merge(into: dict[str, Any], delta: dict[str, Any]) -> bool:
    if "text" in into and "text" in delta:
        into["text"] += delta["text"]
        return True
    if "toolUse" in into and "toolUse" in delta:
        into["toolUse"]["input"] += delta["toolUse"]["input"]
        return True
    return False


class JournaledModel(WrappedModel):
    """Wraps a model: recorded responses are replayed, new ones are recorded.

    The record is written when the inner stream ends, which Strands waits for before it
    acts on the response, so no tool runs on a response that was not recorded.
    """

    def __init__(self, inner: Model, journal: Journal) -> None:
        super().__init__(inner)
        self._journal = journal

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        self._journal.flush()  # asked again: the response held back is not the answer
        recorded = self._journal.next_model_response()
        if recorded is not None:
            for event in recorded:
                yield _unmetered(event)
            return
        events: list[StreamEvent] = []
        async for event in self.inner.stream(messages, tool_specs, system_prompt, **kwargs):
            events.append(event)
            yield event
        self._journal.record_model(events)


def _unmetered(event: StreamEvent) -> StreamEvent:
    """A replayed event reports no token usage: the model was not asked again."""
    if "metadata" not in event:
        return event
    zero = {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
    return {**event, "metadata": {**event["metadata"], "usage": zero}}  # type: ignore[typeddict-item]


class ReplayedTool(AgentTool):
    """Stands in for a tool whose call was recorded: returns the recorded result."""

    def __init__(self, name: str, result: ToolResult) -> None:
        super().__init__()
        self._name = name
        self._result = result

    @property
    def tool_name(self) -> str:
        return self._name

    @property
    def tool_spec(self) -> ToolSpec:
        return {"name": self._name, "description": "replayed", "inputSchema": {"json": {}}}

    @property
    def tool_type(self) -> str:
        return "replayed"

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        yield {**self._result, "toolUseId": tool_use["toolUseId"]}


class JournalHook(HookProvider):
    """Replays recorded tool results and records new ones.

    Register it after every hook that may cancel or interrupt a call, so admission
    decisions are made (the same way) before a recorded result stands in for the body.
    """

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self._before_tool)
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        if event.cancel_tool:
            return
        use_id = event.tool_use["toolUseId"]
        recorded = self._journal.tool_result(use_id)
        if recorded is not None:
            event.selected_tool = ReplayedTool(event.tool_use["name"], recorded)
            return
        if self._journal.recomputes(use_id):
            return  # an asking tool's answer branch: no outside effect
        try:
            _held_to_approval(event.tool_use)
        except CallChanged as changed:
            self._journal.failure = changed  # sticky: raised once the call ends
            event.cancel_tool = f"Not run: {changed}."
            return
        try:
            self._journal.before_body()
        except Exception:
            # Not started: the failure is raised once the call ends (see `_after_tool`).
            event.cancel_tool = "this run stopped: it can no longer act on the answer"

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        if isinstance(event.selected_tool, ReplayedTool):
            return
        # A tool that could not record its effect (store down, claim lost), a step the
        # journal could not record, or a body that could not start (the claim is gone),
        # must stop the run, not become an error result the model reads and moves past
        # (Strands turns a hook's error into one): the run is then released, and a
        # takeover re-runs the call under the same idempotency key.
        if self._journal.failure is not None:
            raise self._journal.failure
        if isinstance(event.exception, (StoreError, LeaseLost, CallChanged)):
            raise event.exception
        self._journal.record_tool(event.result)


def _held_to_approval(tool_use: ToolUse) -> None:
    """Before the fenced write that starts a body: a call a person approved runs only as
    approved (with their edits). Every other hook has run by now, so whatever changed the
    call after the approval (an agent's own hook, a replayed response that differs) is
    caught here. Raises `CallChanged`: nothing runs."""
    expected = current_request().bound.get(tool_use["toolUseId"])
    if expected is not None and expected != call_digest(tool_use["name"], tool_use["input"]):
        raise CallChanged(f"the {tool_use['name']} call about to run is not the one approved")


class StopOnStoreFailure(HookProvider):
    """A new turn's counterpart of `JournalHook`'s rule: a tool that could not reach the
    store (an approval read, an outbox record) stops the run instead of becoming an
    error result the model reads and moves past; the turn then fails cleanly and can be
    sent again, and nothing was decided on a guess."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        if isinstance(event.exception, (StoreError, LeaseLost)):
            raise event.exception
