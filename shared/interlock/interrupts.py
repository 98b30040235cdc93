"""Cards for interrupts Interlock did not raise itself.

A user's tool (`tool_context.interrupt`), a user's hook (`event.interrupt`) or a
Strands intervention returning `Confirm` (the vended `HumanInTheLoop` among them) can
pause a run. Each becomes a card stored, shown and answered like Interlock's own:

- a **confirm** card for an intervention's `Confirm`: the guarded tool, a redacted
  summary of its input, the prompt, and an approve/reject answer;
- a **generic** card for anything else: the reason shown as plain text, the tool and a
  summary when the interrupt guards or runs inside a tool call, and the answer schema
  the reason declares (`{"message": ..., "response_schema": {...}}`), else any bounded
  JSON value.

Interrupts named `interlock.*` are Interlock's own; their reason is already a card.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, Final

from interlock.cards import MAX_TEXT, call_fields, redact
from interlock.errors import InvalidInput
from interlock.scrubbing import scrub_text

CONFIRM: Final = "confirm"
GENERIC: Final = "interrupt"
OWN_PREFIX: Final = "interlock."
MAX_VALUE_BYTES: Final = 16_384
MAX_SCHEMA_BYTES: Final = 8_192
_DEFAULT_MESSAGE: Final = "The agent needs your answer to go on."


def is_own(name: str) -> bool:
    """Whether an interrupt is one of Interlock's own (its reason is a card)."""
    return name.startswith(OWN_PREFIX)


_INPUT_DUMP: Final = "\n  Input: "


def tool_use_id_of(interrupt_id: str) -> str | None:
    """The toolUseId a Strands interrupt id names (`v1:<placement>:<toolUseId>:<uuid>`)."""
    version, _, rest = interrupt_id.partition(":")
    placement, _, rest = rest.partition(":")
    tool_use_id, _, suffix = rest.rpartition(":")
    if version != "v1" or placement not in ("tool_call", "before_tool_call") or not suffix:
        return None
    return tool_use_id or None


def guards_call(interrupt_id: str) -> bool:
    """Whether the interrupt was raised before its tool ran (a hook or intervention)."""
    return interrupt_id.startswith("v1:before_tool_call:")


def foreign_card(
    *,
    interrupt_id: str,
    name: str,
    reason: Any,
    tool_use: Mapping[str, Any] | None,
    confirm: bool,
    editable: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The card for an interrupt raised by the user's code or an intervention.

    `confirm` marks a `Confirm` from an intervention: its answer is approve or reject,
    and it binds the exact call it guards (`cards.call_fields`), whose `editable`
    arguments (name to JSON Schema) a person may change before approving.
    """
    details = dict(reason) if isinstance(reason, Mapping) else {}
    message = details.pop("message", None) if details else reason
    if tool_use is not None and isinstance(message, str):
        # Strands' HumanInTheLoop appends the call's raw input to its question; the card
        # shows the arguments itself, bounded and redacted, so the raw copy goes.
        message = message.partition(_INPUT_DUMP)[0]
    card: dict[str, Any] = {
        "type": CONFIRM if confirm else GENERIC,
        "card_id": uuid.uuid4().hex,
        "tool_use_id": tool_use_id_of(interrupt_id),
        "interrupt_name": safe_text(name, 200),
        "reason": safe_text(message) or _DEFAULT_MESSAGE,
    }
    if tool_use is not None:
        card["tool"] = safe_text(tool_use.get("name"), 100)
        card["summary"] = redact(dict(tool_use.get("input") or {}))
    if confirm:
        card["risk"] = "high"
        card["impact"] = f"{card.get('tool', 'The tool')} runs only if you approve."
        if tool_use is not None:
            card.update(call_fields(card["tool"], dict(tool_use.get("input") or {}), editable))
        return card
    schema = details.pop("response_schema", None)
    if schema is not None:
        card["schema"] = checked_schema(schema)
    if details:
        card["details"] = redact(details)
    return card


def checked_schema(schema: Any) -> dict[str, Any]:
    """A declared answer schema, if it is a valid, bounded JSON Schema object.

    Raises:
        InvalidInput: not an object, too large, or not a valid JSON Schema; the pause
            fails cleanly instead of showing a card nobody can answer.
    """
    if not isinstance(schema, Mapping):
        raise InvalidInput("an interrupt's response_schema must be a JSON Schema object")
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise InvalidInput(f"an interrupt's response_schema is over {MAX_SCHEMA_BYTES} bytes")
    # jsonschema is imported where a schema is checked: the requests and channels
    # functions render cards but check none, and it would cost their cold start ~35 ms.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise InvalidInput(f"an interrupt's response_schema is invalid: {exc.message}") from None
    return dict(schema)


def confirm_schema(card: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The answer to a confirm card: approve or reject, with an optional reason, and
    the edits of the arguments the card lets a person change."""
    properties: dict[str, Any] = {
        "decision": {"enum": ["approve", "reject"]},
        "reason": {"type": "string", "maxLength": MAX_TEXT},
    }
    if card and card.get("editable"):
        properties["edits"] = {
            "type": "object",
            "properties": {n: f["schema"] for n, f in card["editable"].items()},
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "properties": properties,
        "required": ["decision"],
        "additionalProperties": False,
    }


def generic_schema(card: Mapping[str, Any]) -> dict[str, Any]:
    """The declared schema, or any JSON value (bounded in size when answered)."""
    declared = card.get("schema")
    if isinstance(declared, Mapping):
        return dict(declared)
    return {"description": f"Any JSON value of at most {MAX_VALUE_BYTES} bytes."}


_FIELD_TYPES: Final = frozenset({"string", "integer", "number", "boolean"})


def schema_fields(card: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The fields of a card whose declared schema is a flat object of plain values (an
    MCP form is one): per property its name, label, type (`email` for a string of that
    format), whether it is required, its bounds and its options (an enum). None when
    the schema is anything else: a form of one text answer stands in for it then.

    Forms that cannot draw a JSON Schema (a Slack modal) draw these instead; the
    answer is still validated against the schema itself.
    """
    schema = card.get("schema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    required = set(schema.get("required") or ())
    fields = []
    for name, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if kind not in _FIELD_TYPES:
            return None
        options = [str(o) for o in spec.get("enum") or ()]
        fields.append(
            {
                "name": str(name),
                "label": safe_text(spec.get("title") or name, 100),
                "type": "email" if spec.get("format") == "email" else kind,
                "required": name in required,
                "max_length": spec.get("maxLength"),
                "minimum": spec.get("minimum"),
                "maximum": spec.get("maximum"),
                "options": options,
            }
        )
    return fields


def validate_generic(card: Mapping[str, Any], payload: Any) -> Any:
    """The answer to a generic card, or `InvalidInput` (nothing has been written)."""
    if len(json.dumps(payload, separators=(",", ":"))) > MAX_VALUE_BYTES:
        raise InvalidInput(f"the answer is over {MAX_VALUE_BYTES} bytes")
    declared = card.get("schema")
    if isinstance(declared, Mapping):
        from jsonschema import Draft202012Validator  # see checked_schema
        from jsonschema.exceptions import ValidationError

        try:
            Draft202012Validator(declared).validate(payload)
        except ValidationError as exc:
            where = ".".join(str(p) for p in exc.absolute_path)
            raise InvalidInput(
                f"the answer does not match the response schema: "
                f"{where + ': ' if where else ''}{exc.message[:200]}"
            ) from None
    return payload


def safe_text(value: Any, limit: int = MAX_TEXT) -> str:
    """Text safe to store and show: printable characters (and line breaks), every URL in
    it scrubbed, bounded."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    cleaned = "".join(ch for ch in text if ch.isprintable() or ch == "\n").strip()
    cleaned = scrub_text(cleaned)  # a URL in the text keeps no token
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"
