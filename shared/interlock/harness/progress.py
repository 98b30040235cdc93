"""Strands' callback events as Interlock progress: text deltas, tool calls, results."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from interlock.progress import Progress, TextDelta, TextEnd, ToolFinished, ToolStarted

logger = logging.getLogger(__name__)


def result_text(result: Any) -> str:
    """A tool result's text, as it is shown to the client."""
    return " ".join(c.get("text", "") for c in result.get("content", []))


class ProgressRelay:
    """A Strands `callback_handler` that reports a run's progress.

    The model's n-th message of the run (from 0) is named `message_id(n)`, so ids are
    the same wherever the run is told again: a takeover replaying the journal, or a
    replay of its final answer (see `interlock.transcript.text_message_id`).
    """

    def __init__(self, report: Progress, message_id: Callable[[int], str]) -> None:
        self._report = report
        self._message_id = message_id
        self._messages = 0
        self._open: str | None = None

    def __call__(self, **event: Any) -> None:
        try:
            self._relay(event)
        except Exception:  # a watcher's failure must never fail the run
            logger.exception("progress could not be reported")

    def _relay(self, event: dict[str, Any]) -> None:
        delta = event.get("data")
        if isinstance(delta, str) and delta:
            if self._open is None:
                self._open = self._message_id(self._messages)
            self._report(TextDelta(self._open, delta))
        message = event.get("message")
        if not isinstance(message, dict):
            return
        if message.get("role") == "assistant":
            if self._open is not None:
                self._report(TextEnd(self._open))
                self._open = None
            self._messages += 1
            for block in message.get("content", []):
                if use := block.get("toolUse"):
                    self._report(ToolStarted(use["toolUseId"], use["name"], use["input"]))
        else:
            for block in message.get("content", []):
                if done := block.get("toolResult"):
                    self._report(ToolFinished(done["toolUseId"], result_text(done)))
