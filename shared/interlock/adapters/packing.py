"""Stored text made smaller: DynamoDB bills a write by the item's size, and every byte
of an attribute crosses the wire once in its request (as base64 when it is binary).

- `packed` / `unpacked`: a JSON value (a card), always compressed.
- `compact` / `text`: a text (a journal step, an answer) compressed only when that makes
  it smaller even as base64; a short text is stored as itself.

Both are compressed against a preset dictionary: the JSON skeleton every card, or every
step and answer, shares (a card's keys and fixed sentences; a model response's stream
events, a tool's result, an answer's tool calls), none of it any agent's content. A
small card or step carries little else, so the dictionary, not the item, holds most of
what it repeats. The card's matters most: it rides on the request's item, which a
claim, every journal step's fence check and the finish pay for by the kilobyte.

A zlib stream names the dictionary it needs (its Adler-32) in its header. A dictionary is
therefore never edited once items were written with it: a better one is added to
`_DICTIONARIES` and made `_CURRENT`, and steps written with the old one still read.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Final

# Version 1 of the preset dictionary. zlib looks for matches from its end first, so the
# commonest strings come last.
_V1: Final = (
    b'{"message_id":"msg_","tool_calls":[{"id":"tooluse_","input":{},"name":"","result":"",'
    b'"resumed":false,"status":"success"}]}'
    b'{"k":"tool","id":"tooluse_","result":{"status":"success","content":[{"text":""}],'
    b'"toolUseId":"tooluse_"}}'
    b'{"k":"model","events":[{"messageStart":{"role":"assistant"}},{"contentBlockStart":'
    b'{"start":{"toolUse":{"toolUseId":"tooluse_","name":""}}}},{"contentBlockDelta":'
    b'{"delta":{"toolUse":{"input":"{\\""}}}},{"contentBlockDelta":{"delta":{"text":""}}},'
    b'{"contentBlockStop":{}},{"messageStop":{"stopReason":"tool_use"}},{"messageStop":'
    b'{"stopReason":"end_turn"}},{"metadata":{"usage":{"inputTokens":,"outputTokens":,'
    b'"totalTokens":}}}]}'
)
# Version 1 of the cards' dictionary: the keys and fixed texts of each kind of card as
# `packed` writes them (keys sorted, no spaces), the commonest (a download) last.
_CARD_V1: Final = (
    b'{"details":{},"fields":[{"label":"","max_length":200,"maximum":null,"minimum":null,'
    b'"name":"","required":true,"type":"string"}],"for_call":null,"schema":{"properties":'
    b'{},"required":[],"type":"object"},"tool":"request_info","type":"info"}'
    b'{"default":null,"max_length":500,"max_selections":null,"min_selections":1,'
    b'"options":[],"prompt":"","question_type":"single_choice","reason":"","required":true,'
    b'"tool":"ask_user","type":"question"}'
    b'{"impact":" runs only if you approve.","interrupt_name":"","reason":"The agent wants '
    b'to run .","risk":"high","summary":{},"tool":"","type":"action"}{"type":"confirm"}'
    b'{"type":"interrupt"}'
    b'{"batch_tools":["request_approval"],"card_id":"","impact":"The agent may download '
    b'from these sites and install these packages for the rest of this chat.",'
    b'"interrupt_name":"interlock.approval","packages":[],"reason":"","risk":"medium",'
    b'"sites":[""],"summary":{"packages":[],"reason":"","urls":["https://"]},'
    b'"tool":"request_approval","tool_use_id":"tooluse_","type":"download","urls":'
    b'["https://'
)
_DICTIONARIES: Final = {zlib.adler32(d): d for d in (_V1, _CARD_V1)}
_CURRENT: Final = _V1
_CARDS: Final = _CARD_V1
_FDICT: Final = 0x20  # the header's flag for a stream that needs a preset dictionary


def packed(value: Any) -> bytes:
    """`value` (a card) as JSON compressed against the cards' dictionary: a card is
    written once and then billed by size on every later write of its item (a claim,
    each step's fence check, the finish)."""
    deflate = zlib.compressobj(zdict=_CARDS)
    raw = json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    return deflate.compress(raw) + deflate.flush()


def unpacked(stored: bytes | str) -> Any:
    """The JSON value `packed` stored; a card packed without a dictionary, as before
    cards had one, and JSON text, as written before cards were packed, read too."""
    return json.loads(_inflated(stored) if isinstance(stored, bytes) else stored)


def compact(text: str) -> str | bytes:
    """`text` compressed against the preset dictionary when that is no larger as
    base64 than the text itself, else `text` unchanged."""
    raw = text.encode()
    deflate = zlib.compressobj(zdict=_CURRENT)
    squeezed = deflate.compress(raw) + deflate.flush()
    return squeezed if len(squeezed) * 4 <= len(raw) * 3 else text


def text(stored: str | bytes) -> str:
    """The text `compact` stored."""
    return _inflated(stored).decode() if isinstance(stored, bytes) else stored


def _inflated(stored: bytes) -> bytes:
    if len(stored) < 6 or not stored[1] & _FDICT:
        return zlib.decompress(stored)
    dictionary = _DICTIONARIES.get(int.from_bytes(stored[2:6], "big"))
    if dictionary is None:
        raise ValueError("stored text needs a preset dictionary this version does not have")
    inflate = zlib.decompressobj(zdict=dictionary)
    return inflate.decompress(stored) + inflate.flush()
