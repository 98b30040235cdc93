"""Rendering a turn's result as AG-UI 1.0 events, with the protocol's own models."""

from __future__ import annotations

import json
import uuid
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

from interlock.answers import kind_of, response_schema
from interlock.api.views import iso
from interlock.outcomes import Offer, TurnResult

PROTOCOL_VERSION = "1.0"


def run_events(thread_id: str, run_id: str, result: TurnResult) -> list[BaseEvent]:
    """The events of one run: started, tool calls, the answer, finished."""
    events: list[BaseEvent] = [
        RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION)
    ]
    for call in result.tool_calls:
        events += _tool_call(call)
    if result.text:
        message_id = result.message_id or f"msg_{uuid.uuid4().hex}"
        events += [
            TextMessageStartEvent(message_id=message_id, role="assistant"),
            TextMessageContentEvent(message_id=message_id, delta=result.text),
            TextMessageEndEvent(message_id=message_id),
        ]
    events.append(_finished(thread_id, run_id, result))
    return events


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
            expires_at=iso(request.expires_at),
            metadata={"card": asked.card, "secret": offer.secret, "state": request.state.value},
        )
        for asked in request.asked
    ]


def _tool_call(call: dict[str, Any]) -> list[BaseEvent]:
    call_id = call["id"]
    events: list[BaseEvent] = []
    # A call the run was paused in started in the earlier stream (its arguments are the
    # client's already: AG-UI appends argument deltas): only its result is new.
    if not call.get("resumed"):
        events += [
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=call["name"]),
            ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(call["input"])),
            ToolCallEndEvent(tool_call_id=call_id),
        ]
    if call["result"] is not None:  # a paused call has no result yet
        events.append(
            ToolCallResultEvent(
                message_id=f"msg_{call_id}", tool_call_id=call_id, content=call["result"]
            )
        )
    return events


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
