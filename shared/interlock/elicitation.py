"""An MCP server's questions as cards, and a person's answers as MCP's replies.

A tool server following the MCP revision of 2026-07-28 answers a `tools/call` with
`input_required`: named input requests (a form with a restricted JSON Schema, or a URL
to open) and an opaque `requestState`; the client retries the same call with one
`ElicitResult` per request and that state. Here each input request becomes a card of
its own (several make one group, answered in one resume), shown and validated like any
interrupt with a declared schema, and each recorded answer becomes the reply:

- an answer to the form (or "done" on a link card) is `accept` with its content, even
  when that content says no (an unticked box): the server reads its own fields;
- a card the person declined is `decline`: they were asked and said no. Every surface
  gives the card a Decline of its own (the page's button beside Send, the chat cards'
  Decline), which answers with status `cancelled`, never with a form left empty;
- a card nobody answered in time is `cancel`: nobody made a choice.

An answer is recorded as `{"content": ...}` (`recorded`), so a form whose own field is
called `status` can never be read as a cancellation, in this run or a takeover's. The
schema is held to MCP's flat subset (an object of strings, numbers, booleans and lists of
choices) when the card is made, so every answer it admits is a valid `ElicitResult`.

Plain data in, plain data out: no `mcp` and no `strands` here.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote, urlsplit

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
# MCP's restricted schema: a flat object whose fields are these (a list only of choices).
_PRIMITIVES: Final = frozenset({"string", "number", "integer", "boolean"})
# Characters a link keeps unescaped in its query and fragment; brackets and quotes are
# escaped so the link cannot end the markdown or the attribute it is shown in.
_LINK_SAFE: Final = "=&;%+-._~:/?@!$*,"


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
            link = _link(params.get("url"))
        except InvalidInput as exc:
            raise InvalidInput(f"input request {key!r}: {exc}") from None
        card["link"] = link
        card["reason"] += f"\n\n[Open the page]({link}), then say when you have finished."
        card["schema"] = dict(_DONE_SCHEMA)
        return card
    try:
        card["schema"] = _flat(checked_schema(params.get("requestedSchema")))
    except InvalidInput as exc:
        raise InvalidInput(f"input request {key!r}: {exc}") from None
    return card


def recorded(answer: Any) -> dict[str, Any]:
    """How a person's (already validated) answer to an MCP card is recorded."""
    return {"content": answer}


def reply(card: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """What the paused call receives for its card's recorded response: an MCP
    `ElicitResult` (`action`, and `content` when accepted) as plain data."""
    if not isinstance(response, Mapping):
        return {"action": "cancel"}
    if "content" in response:
        content = response["content"]
        if "link" in card:
            done = isinstance(content, Mapping) and content.get("done") is True
            return {"action": "accept"} if done else {"action": "cancel"}
        return {"action": "accept", "content": dict(content)}
    if response.get("status") == "cancelled":
        return {"action": "decline"}
    return {"action": "cancel"}


def _flat(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` if it is in MCP's restricted subset, with its titles and descriptions
    scrubbed like the server's message (they are shown as the form's labels)."""
    properties = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(properties, Mapping):
        raise InvalidInput("a requested schema must be an object with properties")
    fields: dict[str, Any] = {}
    for name, field in properties.items():
        if not isinstance(field, Mapping) or not _is_primitive(field):
            raise InvalidInput(
                f"field {safe_text(name, 100)!r} is not a string, number, boolean or "
                "list of choices (MCP's restricted schema)"
            )
        fields[name] = {
            **field,
            **{k: safe_text(field[k], 500) for k in ("title", "description") if k in field},
        }
    return {**schema, "properties": fields}


def _is_primitive(field: Mapping[str, Any]) -> bool:
    kind = field.get("type")
    if kind in _PRIMITIVES:
        return True
    items = field.get("items")
    return kind == "array" and isinstance(items, Mapping) and items.get("type") == "string"


def _link(raw: Any) -> str:
    """The server's page as the person opens it: checked like any URL Interlock shows
    (http or https, a real host, no credentials), its query and fragment kept, since
    they name the server's session and the page cannot work without them."""
    if not isinstance(raw, str):
        raise InvalidInput("a link request needs a URL")
    checked = safe_url(raw).url
    parts = urlsplit(raw.strip())
    query = f"?{quote(parts.query, safe=_LINK_SAFE)}" if parts.query else ""
    fragment = f"#{quote(parts.fragment, safe=_LINK_SAFE)}" if parts.fragment else ""
    return f"{checked}{query}{fragment}"
