"""A run as AG-UI 1.0 events, with the protocol's own models: live as it happens
(`RunStream`), or at once from a stored outcome (`run_events`)."""

from __future__ import annotations

import json
import uuid
from typing import Any, Final

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.encoder import EventEncoder

from interlock.answers import kind_of, response_schema
from interlock.api.models import STATE_KEY
from interlock.api.views import iso
from interlock.outcomes import Offer, TurnResult
from interlock.progress import (
    ProgressEvent,
    Started,
    TextDelta,
    TextEnd,
    ToolStarted,
)

PROTOCOL_VERSION = "1.0"


def run_events(thread_id: str, run_id: str, result: TurnResult) -> list[BaseEvent]:
    """The events of one run: started, tool calls, the answer, finished."""
    events: list[BaseEvent] = [
        RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION)
    ]
    for call in result.tool_calls:
        events += _tool_call(call)
    if result.text:
        events += _text(result.message_id, result.text)
    events.append(_finished(thread_id, run_id, result))
    return events


class RunStream:
    """One run's events as its progress arrives: started, the model's text as it
    streams, each tool call as the model makes it and its result when it has one, then
    finished (or an error, once the run had started).

    Built with the client's `RunAgentInput`, it keeps the client's own view whole:

    - a resume starts with `MESSAGES_SNAPSHOT` of the messages the client sent, so the
      paused call whose result follows is one the stream itself names;
    - a run that pauses sends `STATE_SNAPSHOT` before its interrupt: the client's state
      with the request's secret under `interlock.secret`, which an AG-UI client sends
      back in its next input's `state` by itself;
    - a replayed answer is one `MESSAGES_SNAPSHOT`: the client's messages with the
      stored answer merged in by id, so a client that already has it is left exactly
      as it was, however often it replays.

    A result that arrives without any progress (a cancel of a request that had already
    ended) is sent whole, as `run_events` tells it.
    """

    def __init__(self, thread_id: str, run_id: str, run_input: RunAgentInput | None = None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.started = False
        self._input = run_input
        self._open: str | None = None
        self._texts: set[str] = set()

    def progress(self, event: ProgressEvent) -> list[BaseEvent]:
        """The events one progress report becomes."""
        if isinstance(event, Started):
            self.started = True
            return [self._run_started(), *self._resumed_from()]
        if isinstance(event, TextDelta):
            events: list[BaseEvent] = []
            if event.message_id != self._open:
                events += self._close_text()
                self._open = event.message_id
                self._texts.add(event.message_id)
                events.append(TextMessageStartEvent(message_id=event.message_id, role="assistant"))
            events.append(TextMessageContentEvent(message_id=event.message_id, delta=event.delta))
            return events
        if isinstance(event, TextEnd):
            return self._close_text()
        if isinstance(event, ToolStarted):
            return [*self._close_text(), *_tool_start(event.call_id, event.name, event.input)]
        return [*self._close_text(), _tool_result(event.call_id, event.content)]

    def finished(self, result: TurnResult) -> list[BaseEvent]:
        """The run's end: its answer, unless it already streamed, and `RUN_FINISHED`."""
        if result.outcome == "resynced":
            self.started = True
            given = self._input.messages if self._input is not None else []
            snapshot = MessagesSnapshotEvent(messages=resynced_messages(given, result))
            end = _finished(self.thread_id, self.run_id, result)
            return [self._run_started(), snapshot, *self._state_for(result), end]
        if result.outcome == "replayed" and self._input is not None:
            self.started = True
            merged = MessagesSnapshotEvent(messages=replayed_messages(self._input.messages, result))
            return [self._run_started(), merged, _finished(self.thread_id, self.run_id, result)]
        if not self.started:
            self.started = True
            events = run_events(self.thread_id, self.run_id, result)
            return [*events[:-1], *self._state_for(result), events[-1]]
        events = self._close_text()
        if result.text and result.message_id not in self._texts:
            events += _text(result.message_id, result.text)
        return [*events, *self._state_for(result), _finished(self.thread_id, self.run_id, result)]

    def failed(self, code: str, message: str) -> list[BaseEvent]:
        """A failure after the run started: it ends the run, as AG-UI's `RUN_ERROR`."""
        events = [*self._close_text(), RunErrorEvent(message=message, code=code)]
        return events if self.started else [self._run_started(), *events]

    def refused(self, code: str, message: str, standing: TurnResult) -> list[BaseEvent]:
        """An answer refused by the interrupt rules, told as a run that finished where
        the thread stands now (`standing`, a resync): its open request offered again
        with a fresh secret, or nothing open.

        A client that holds the interrupt it answered lets go of it only when a run
        finishes: `RUN_ERROR` would leave it holding an interrupt nobody can answer, and
        refusing everything sent after it (CopilotKit does). The refusal is a sentence
        for the person, and `{outcome: "refused", code, message}` in `RUN_FINISHED`'s
        result for a program.
        """
        self.started = True
        offer = standing.offer
        words = refusal_words(code, message, offered=offer is not None)
        summary = {"outcome": "refused", "code": code, "message": message}
        outcome: Any = (
            RunFinishedSuccessOutcome()
            if offer is None
            else RunFinishedInterruptOutcome(interrupts=interrupts_of(offer))
        )
        end = RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, result=summary, outcome=outcome
        )
        return [self._run_started(), *_text(None, words), *self._state_for(standing), end]

    def _resumed_from(self) -> list[BaseEvent]:
        if self._input is None or not self._input.resume:
            return []
        return [MessagesSnapshotEvent(messages=list(self._input.messages))]

    def _state_for(self, result: TurnResult) -> list[BaseEvent]:
        """The client's state carrying the new request's secret, before its interrupt."""
        if result.offer is None:
            return []
        state = self._input.state if self._input is not None else None
        kept = dict(state) if isinstance(state, dict) else {}
        kept[STATE_KEY] = {"secret": result.offer.secret}
        return [StateSnapshotEvent(snapshot=kept)]

    def _run_started(self) -> RunStartedEvent:
        return RunStartedEvent(
            thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
        )

    def _close_text(self) -> list[BaseEvent]:
        if self._open is None:
            return []
        closed, self._open = self._open, None
        return [TextMessageEndEvent(message_id=closed)]


REFUSALS: Final = {
    "refused": "Your answer was not taken: this card was opened elsewhere since.",
    "cancelled": "Your answer came after this request ended: {message}.",
    "expired": "Your answer came after this request ended: {message}.",
    "timed_out": "Your answer came too late: {message}.",
    "unknown": "Your answer was not taken: that request is not open on this chat.",
    "in_progress": "Another answer to this request is being carried out.",
    "decision_binding": "{message}.",
}
"""What a person is told when their answer is refused, by code (else: not taken, why)."""


def refusal_words(code: str, message: str, *, offered: bool) -> str:
    """The refusal of an answer as a sentence for the person who gave it, and what
    becomes of the request: offered again, or nothing done on this answer."""
    said = REFUSALS.get(code, "Your answer was not taken: {message}.").format(message=message)
    then = (
        "The request open now is offered again: answer it here."
        if offered
        else "Nothing was done on this answer."
    )
    return f"{said} {then}"


def replayed_messages(messages: list[Message], result: TurnResult) -> list[Message]:
    """The client's `messages` with a replayed answer's messages merged in by id: what
    it has already stays as it is, only what it lacks is added."""
    merged = list(messages)
    calls = {
        call.id for m in merged if isinstance(m, AssistantMessage) for call in m.tool_calls or []
    }
    ids = {m.id for m in merged}
    for call in result.tool_calls:
        if call["id"] not in calls and not call.get("resumed"):
            arguments = json.dumps(call["input"])
            function = FunctionCall(name=call["name"], arguments=arguments)
            merged.append(
                AssistantMessage(
                    id=call["id"], tool_calls=[ToolCall(id=call["id"], function=function)]
                )
            )
        if call["result"] is not None and f"msg_{call['id']}" not in ids:
            merged.append(
                ToolMessage(id=f"msg_{call['id']}", tool_call_id=call["id"], content=call["result"])
            )
    if result.text and result.message_id and result.message_id not in ids:
        merged.append(AssistantMessage(id=result.message_id, content=result.text))
    return merged


def resynced_messages(messages: list[Message], result: TurnResult) -> list[Message]:
    """The thread as a resync restores it: the client's messages when it still has
    them, else the saved turns; then each call the open request waits on, so its
    interrupt names a tool call the client knows."""
    restored = list(messages) or [_turn_message(turn) for turn in result.turns]
    calls = {c.id for m in restored if isinstance(m, AssistantMessage) for c in m.tool_calls or []}
    for asked in result.offer.request.asked if result.offer else ():
        call_id, name = asked.card.get("tool_use_id"), asked.card.get("tool")
        if call_id and name and call_id not in calls:
            arguments = json.dumps(asked.card.get("summary") or {})
            call = ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))
            restored.append(AssistantMessage(id=call_id, tool_calls=[call]))
            calls.add(call_id)
    return restored


def _turn_message(turn: dict[str, Any]) -> Message:
    message_id = f"turn_{turn['seq']}"
    if turn.get("role") == "user":
        return UserMessage(id=message_id, content=str(turn.get("text", "")))
    return AssistantMessage(id=message_id, content=str(turn.get("text", "")))


def encode(events: list[BaseEvent]) -> str:
    """A buffered `text/event-stream` body."""
    encoder = EventEncoder()
    return "".join(encoder.encode(event) for event in events)


def interrupts_of(offer: Offer) -> list[Interrupt]:
    """The AG-UI interrupts of an open request, each carrying its card and the
    request's fresh secret (one resume answers them all)."""
    request = offer.request
    return [
        Interrupt(
            id=asked.interrupt_id,
            reason=f"{kind_of(asked.card)}:{asked.card.get('type', 'request')}",
            message=str(asked.card.get("reason", "The agent needs your decision.")),
            tool_call_id=asked.card.get("tool_use_id"),
            response_schema=response_schema(asked.card),
            # Not the interrupt's `expiresAt`: a client refuses to send anything once that
            # passes (CopilotKit's does, holding the interrupt for good). Interlock decides
            # lateness itself, and a late answer is told so in a run that finishes.
            metadata={
                "card": asked.card,
                "secret": offer.secret,
                "state": request.state.value,
                "expiresAt": iso(request.expires_at),
            },
        )
        for asked in request.asked
    ]


def _tool_call(call: dict[str, Any]) -> list[BaseEvent]:
    call_id = call["id"]
    events: list[BaseEvent] = []
    # A call the run was paused in started in the earlier stream (its arguments are the
    # client's already: AG-UI appends argument deltas): only its result is new.
    if not call.get("resumed"):
        events += _tool_start(call_id, call["name"], call["input"])
    if call["result"] is not None:  # a paused call has no result yet
        events.append(_tool_result(call_id, call["result"]))
    return events


def _tool_start(call_id: str, name: str, arguments: Any) -> list[BaseEvent]:
    return [
        ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name),
        ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(arguments)),
        ToolCallEndEvent(tool_call_id=call_id),
    ]


def _tool_result(call_id: str, content: str) -> ToolCallResultEvent:
    return ToolCallResultEvent(message_id=f"msg_{call_id}", tool_call_id=call_id, content=content)


def _text(message_id: str | None, text: str) -> list[BaseEvent]:
    message_id = message_id or f"msg_{uuid.uuid4().hex}"
    return [
        TextMessageStartEvent(message_id=message_id, role="assistant"),
        TextMessageContentEvent(message_id=message_id, delta=text),
        TextMessageEndEvent(message_id=message_id),
    ]


def _finished(thread_id: str, run_id: str, result: TurnResult) -> RunFinishedEvent:
    if result.offer is not None:
        outcome: Any = RunFinishedInterruptOutcome(interrupts=interrupts_of(result.offer))
        return RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=outcome)
    summary: dict[str, Any] = {"outcome": result.outcome}
    if result.decision:
        summary["decision"] = result.decision
    if result.answered_at:
        summary["answeredAt"] = iso(result.answered_at)
    return RunFinishedEvent(
        thread_id=thread_id, run_id=run_id, result=summary, outcome=RunFinishedSuccessOutcome()
    )
