"""What a run reports while it runs, for a client that watches it live.

A run reports `Started` once it holds the chat (a new turn was admitted, or a resume
claimed its request): from then on it owns the outcome, so a failure is reported as part
of the run rather than as a refusal. The other events follow the agent as it works.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Started:
    """The run holds the chat; what follows is its own."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's text, as the model produced it."""

    message_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class TextEnd:
    """The model's message `message_id` is complete."""

    message_id: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """The model called a tool (its input is complete)."""

    call_id: str
    name: str
    input: Any


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call's result, as the model will read it."""

    call_id: str
    content: str


ProgressEvent = Started | TextDelta | TextEnd | ToolStarted | ToolFinished
Progress = Callable[[ProgressEvent], None]
"""Where a run reports; it must not raise (a watcher's trouble is not the run's)."""


def ignore(event: ProgressEvent) -> None:
    """A run nobody watches."""
