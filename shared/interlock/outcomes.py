"""What a turn or a resume hands back to the API, independent of the wire format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from interlock.records import RequestRecord

Outcome = Literal["completed", "interrupted", "replayed", "abandoned", "resynced"]


@dataclass(frozen=True, slots=True)
class Offer:
    """An open request that is durably stored and may now be shown, with the secret
    that answers it (and, for benchmarks, its snapshot's compressed size)."""

    request: RequestRecord
    secret: str
    snapshot_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Usage:
    """What a run cost: model calls, tokens and tool bodies that ran to completion."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_executions: int = 0


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The result of `run_turn` or `resume_turn`.

    Attributes:
        chat_id: The chat.
        outcome: completed (final text), interrupted (an offer to show), replayed
            (the stored answer of a request that was already answered), or abandoned
            (a cancel of a request that had already ended: the thread moves on).
        text: The final or replayed answer.
        offer: The open request, when interrupted.
        tool_calls: The tool calls of this run, for the event stream.
        usage: What the run cost.
        decision: On a resume or replay, what the person decided.
        answered_at: On a replay, when the request was answered (epoch s).
        waited_ms: On a resume, how long the request waited for its answer.
        message_id: The id of the final message, the same when it is replayed.
        turns: On a resync, the thread's saved turns (oldest first).
    """

    chat_id: str
    outcome: Outcome
    text: str | None = None
    offer: Offer | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    decision: str | None = None
    answered_at: int | None = None
    waited_ms: int | None = None
    message_id: str | None = None
    turns: list[dict[str, Any]] = field(default_factory=list)
