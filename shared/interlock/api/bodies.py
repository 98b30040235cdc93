"""Reading request bodies and query values within bounds, before anything else looks.

Python's JSON parser has no limits of its own: a body nested a thousand levels deep
exhausts the recursion limit, and a 5,000-digit number trips the interpreter's
integer-string guard, both as exceptions no handler expects (a 500 and a traceback).
Here the size is checked first, the nesting depth is measured by one pass over the
text, and numbers are parsed by hooks that refuse what no client needs, so every bad
body is a stable 4xx and nothing is written.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, TypeVar

from interlock.api.errors import BadRequest
from interlock.errors import InvalidInput, TooLarge, validation_message

if TYPE_CHECKING:
    # pydantic loads with the first body parsed into a model, not with this module:
    # `bounded_json` and the query values need none of it.
    from pydantic import BaseModel

MAX_BODY_BYTES: Final = 256 * 1024
MAX_DEPTH: Final = 32
MAX_NUMBER_CHARS: Final = 32
# Event numbers are 16 digits (`interlock.adapters.chats.event_number`).
MAX_QUERY_DIGITS: Final = 16


def bounded_json(body: str | None) -> Any:
    """Parse `body` as JSON within the size, depth and number bounds.

    Raises:
        TooLarge: the body is over `MAX_BODY_BYTES`.
        BadRequest: not JSON, nested deeper than `MAX_DEPTH`, or a number out of bounds.
        InvalidInput: text that is not valid Unicode (a lone surrogate).
    """
    text = body or ""
    if len(text.encode("utf-8", errors="surrogatepass")) > MAX_BODY_BYTES:
        raise TooLarge(f"the body is over {MAX_BODY_BYTES} bytes")
    if _depth(text) > MAX_DEPTH:
        raise BadRequest(f"the body is nested deeper than {MAX_DEPTH} levels")
    try:
        data = json.loads(
            text, parse_int=_number(int), parse_float=_number(float), parse_constant=_constant
        )
    except (json.JSONDecodeError, RecursionError, UnicodeError):
        raise BadRequest("the body must be JSON") from None
    try:
        # A lone surrogate (`"\ud800"`) parses, but is no character: it could be neither
        # stored nor shown, so the body is refused here, before anything reads it.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        message = "the body holds text that is not valid Unicode (a lone surrogate)"
        raise InvalidInput(message) from None
    return data


def query_number(raw: str | None, name: str, default: int = 0) -> int:
    """A non-negative integer query value: ASCII digits only, at most 10 of them."""
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > MAX_QUERY_DIGITS:
        raise InvalidInput(f"{name} must be a whole number of at most {MAX_QUERY_DIGITS} digits")
    return int(raw)


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects, strings skipped."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _number(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        if len(text) > MAX_NUMBER_CHARS:
            raise BadRequest(f"a number in the body is longer than {MAX_NUMBER_CHARS} characters")
        return kind(text)

    return parse


def _constant(name: str) -> Any:
    raise BadRequest(f"{name} is not a JSON number")


Parsed = TypeVar("Parsed", bound="BaseModel")


def parse_body(model: type[Parsed], body: str | None) -> Parsed:
    """Parse a JSON body of Interlock's own (unknown fields refused) within the bounds.

    Raises:
        TooLarge, BadRequest: as `bounded_json`, or not a JSON object.
        InvalidInput: the object does not fit `model`.
    """
    from pydantic import ValidationError

    data = bounded_json(body)
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(validation_message(exc)) from None
