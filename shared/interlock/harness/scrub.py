"""One sanitiser for URLs at the tool boundary: credentials, query strings and fragments
never enter the run.

A model may put a URL carrying `?token=...` into a tool call. The call's arguments are
streamed to the client, kept in the agent's messages (so in its snapshot), recorded in
the journal and saved with the answer, so the only safe place to remove them is where
the call enters: this wrapper rewrites each tool call's input as the model streams it,
before Strands assembles the message. Calls it changed are noted in the request
context, so the tool can tell the model what was removed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterable
from typing import Any

from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from interlock.context import current_request
from interlock.egress import scrub_text
from interlock.harness.wrapped import WrappedModel

SCRUBBED_NOTE = (
    "Note: the query string and fragment were removed from the URL; they are never "
    "sent, shown or stored."
)


def scrub(value: Any) -> tuple[Any, bool]:
    """`value` with every URL in its strings cut to scheme, host and path (no
    credentials, query or fragment), and whether any was."""
    if isinstance(value, str):
        return _scrub_url(value)
    if isinstance(value, list):
        items = [scrub(item) for item in value]
        return [item for item, _ in items], any(changed for _, changed in items)
    if isinstance(value, dict):
        fields = {key: scrub(item) for key, item in value.items()}
        return {k: item for k, (item, _) in fields.items()}, any(c for _, c in fields.values())
    return value, False


def _scrub_url(text: str) -> tuple[str, bool]:
    # Every URL in the string, not only a string that is one: a reason or a prompt
    # that repeats a URL in prose carries its token just the same.
    scrubbed = scrub_text(text)
    return scrubbed, scrubbed != text


class UrlScrubbedModel(WrappedModel):
    """Wraps a model: every tool call it streams reaches Strands with its URLs scrubbed."""

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        tool_use_id: str | None = None
        buffered: list[str] = []
        async for event in self.inner.stream(messages, tool_specs, system_prompt, **kwargs):
            raw: Any = event
            start = raw.get("contentBlockStart", {}).get("start", {}).get("toolUse")
            delta = raw.get("contentBlockDelta", {}).get("delta", {}).get("toolUse")
            if start is not None:
                tool_use_id, buffered = start.get("toolUseId"), []
            elif delta is not None and tool_use_id is not None:
                buffered.append(delta.get("input", ""))
                continue  # held back until the whole input is known
            elif "contentBlockStop" in raw and tool_use_id is not None:
                yield self._whole_input(tool_use_id, "".join(buffered))
                tool_use_id = None
            yield event

    def _whole_input(self, tool_use_id: str, text: str) -> StreamEvent:
        try:
            cleaned, changed = scrub(json.loads(text)) if text else ({}, False)
        except json.JSONDecodeError:
            cleaned, changed = text, False
        if changed:
            _noted(tool_use_id)
        body = json.dumps(cleaned) if not isinstance(cleaned, str) else cleaned
        return {"contentBlockDelta": {"delta": {"toolUse": {"input": body}}}}


def _noted(tool_use_id: str) -> None:
    # Without a request context (a bare agent in a test) there is nobody to tell.
    with contextlib.suppress(RuntimeError):
        current_request().scrubbed.add(tool_use_id)
