"""An MCP server's questions as cards, and a person's answers as MCP's replies.

A tool server following the MCP revision of 2026-07-28 answers a `tools/call` with
`input_required`: named input requests (a form with a restricted JSON Schema, or a URL
to open) and an opaque `requestState`; the client retries the same call with one
`ElicitResult` per request and that state. Here each input request becomes a card of
its own (several make one group, answered in one resume), shown and validated like any
interrupt with a declared schema, and each recorded answer becomes the reply:

- an answer to the form (or "done" on a link card) is `accept` with its content;
- a card the person cancelled is `decline`: they were asked and said no;
- a card nobody answered in time is `cancel`: nobody made a choice.

Plain data in, plain data out: no `mcp` and no `strands` here.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any, Final

from interlock.cards import redact
from interlock.egress import safe_url
from interlock.errors import InvalidInput
from interlock.interrupts import GENERIC, checked_schema, safe_text

SOURCE: Final = "mcp"
# Interlock's own interrupt names (their reason is already a card), one per input request.
INTERRUPT_PREFIX: Final = "interlock.mcp."
_DONE_SCHEMA: Final = {
    "type": "object",
    "properties": {"done": {"type": "boolean", "title": "I have finished on that page"}},
    "required": ["done"],
    "additionalProperties": False,
}


def interrupt_name(round_: int, key: str) -> str:
    """The interrupt of input request `key` in round `round_` of one call (unique per
    call: a retry that asks again raises new interrupts, never the answered ones)."""
    return f"{INTERRUPT_PREFIX}{round_}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def is_mcp(card: Mapping[str, Any]) -> bool:
    """Whether `card` holds an MCP server's input request."""
    return card.get("source") == SOURCE


def input_card(
    *,
    key: str,
    request: Mapping[str, Any],
    tool: str,
    arguments: Mapping[str, Any],
    tool_use_id: str,
    round_: int,
) -> dict[str, Any]:
    """The card for one input request (`request` as the wire spells it, camelCase).

    Raises:
        InvalidInput: a request that is neither a valid form nor an http(s) link, or a
            schema that is not a bounded JSON Schema (the pause fails cleanly).
    """
    if request.get("method") not in (None, "elicitation/create"):
        raise InvalidInput(f"input request {key!r} is not an elicitation")
    params = request.get("params")
    if not isinstance(params, Mapping):
        raise InvalidInput(f"input request {key!r} has no parameters")
    card: dict[str, Any] = {
        "type": GENERIC,
        "source": SOURCE,
        "card_id": uuid.uuid4().hex,
        "tool_use_id": tool_use_id,
        "interrupt_name": interrupt_name(round_, key),
        "input_key": safe_text(key, 100),
        "tool": safe_text(tool, 100),
        "summary": redact(dict(arguments)),
        # The server's words are shown like any model text: scrubbed and bounded.
        "reason": safe_text(params.get("message")) or "The tool server needs your answer.",
    }
    if params.get("mode", "form") == "url":
        # The person opens the server's own page; nothing they enter there passes
        # through Interlock, which keeps only the address to show.
        try:
            link = safe_url(str(params.get("url", ""))).url
        except InvalidInput as exc:
            raise InvalidInput(f"input request {key!r}: {exc}") from None
        card["link"] = link
        card["reason"] += f"\n\n[Open the page]({link}), then say when you have finished."
        card["schema"] = dict(_DONE_SCHEMA)
        return card
    card["schema"] = checked_schema(params.get("requestedSchema"))
    return card


def reply(card: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """What the paused call receives for its card's recorded answer: an MCP
    `ElicitResult` (`action`, and `content` when accepted) as plain data."""
    status = response.get("status") if isinstance(response, Mapping) else None
    if status == "cancelled":
        return {"action": "decline"}
    if status in ("timed_out", "default") or not isinstance(response, Mapping):
        return {"action": "cancel"}
    if "link" in card:
        return {"action": "accept"} if response.get("done") is True else {"action": "cancel"}
    return {"action": "accept", "content": dict(response)}
