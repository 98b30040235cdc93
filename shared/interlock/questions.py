"""Questions and information requests: the same pause, a different card.

The agent asks from a structured template (a `QuestionSpec` or an `InfoSpec`), never in
free prose; the card carries the rules, its response schema says them to any client,
and `validate_answer` enforces them on the server before anything is written.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from interlock.errors import InvalidInput, validation_message

QUESTION: Final = "question"
INFO: Final = "info"
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_EMAIL: Final = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


class QuestionSpec(BaseModel):
    """A question the agent may ask: single choice, multiple choice or free text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["single_choice", "multiple_choice", "free_text"]
    prompt: str = Field(min_length=1, max_length=300)
    options: list[str] = Field(default_factory=list, max_length=20)
    min_selections: int = Field(default=1, ge=0, le=20)
    max_selections: int | None = Field(default=None, ge=1, le=20)
    max_length: int = Field(default=500, ge=1, le=4000)
    required: bool = True
    default: str | list[str] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> QuestionSpec:
        if self.type == "free_text":
            if self.options:
                raise ValueError("a free-text question has no options")
            return self
        if len(self.options) < 2 or len(set(self.options)) != len(self.options):
            raise ValueError("a choice question needs at least two distinct options")
        if any(not o.strip() or len(o) > 100 for o in self.options):
            raise ValueError("options must be 1-100 characters")
        if self.max_selections is not None and self.max_selections < self.min_selections:
            raise ValueError("max_selections is below min_selections")
        if self.default is not None:
            _choice_answer(self.as_card_fields(), self.default, "default")
        return self

    def as_card_fields(self) -> dict[str, Any]:
        """The spec as card fields; `question_type` because the card's `type` is its kind."""
        fields = self.model_dump()
        fields["question_type"] = fields.pop("type")
        return fields


class InfoField(BaseModel):
    """One named value the agent needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    label: str = Field(min_length=1, max_length=100)
    type: Literal["string", "integer", "number", "boolean", "email"] = "string"
    required: bool = True
    max_length: int = Field(default=200, ge=1, le=2000)
    minimum: float | None = None
    maximum: float | None = None


class InfoSpec(BaseModel):
    """A request for missing information, tied to the call that needed it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str = Field(min_length=1, max_length=300)
    fields: list[InfoField] = Field(min_length=1, max_length=10)

    @model_validator(mode="after")
    def _unique(self) -> InfoSpec:
        if len({f.name for f in self.fields}) != len(self.fields):
            raise ValueError("field names must be unique")
        return self


def question_card(spec: QuestionSpec, tool_use_id: str) -> dict[str, Any]:
    return {
        "type": QUESTION,
        "card_id": uuid.uuid4().hex,
        "tool_use_id": tool_use_id,
        "tool": "ask_user",
        "reason": spec.prompt,
        **spec.as_card_fields(),
    }


def info_card(spec: InfoSpec, tool_use_id: str, for_call: str | None) -> dict[str, Any]:
    return {
        "type": INFO,
        "card_id": uuid.uuid4().hex,
        "tool_use_id": tool_use_id,
        "tool": "request_info",
        "for_call": for_call,
        "reason": spec.reason,
        "fields": [f.model_dump() for f in spec.fields],
    }


def parse_spec(model: type[QuestionSpec] | type[InfoSpec], data: Any) -> Any:
    """A validated spec, or `InvalidInput` naming the first problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(validation_message(exc)) from None


def question_schema(card: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an answer to a question card."""
    kind = card["question_type"]
    answer: dict[str, Any]
    if kind == "single_choice":
        answer = {"enum": card["options"]}
    elif kind == "multiple_choice":
        answer = {
            "type": "array",
            "items": {"enum": card["options"]},
            "uniqueItems": True,
            "minItems": card["min_selections"],
        }
        if card.get("max_selections"):
            answer["maxItems"] = card["max_selections"]
    else:
        answer = {"type": "string", "maxLength": card["max_length"]}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"answer": answer},
        "additionalProperties": False,
    }
    if card.get("required", True):
        schema["required"] = ["answer"]
    return schema


def info_schema(card: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an answer to an information request."""
    properties = {f["name"]: _field_schema(f) for f in card["fields"]}
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "required": [f["name"] for f in card["fields"] if f["required"]],
    }


def validate_question(card: Mapping[str, Any], payload: Any) -> dict[str, Any]:
    """The normalized answer `{"answer": ...}`, or `InvalidInput` (nothing changes)."""
    if not isinstance(payload, Mapping) or set(payload) - {"answer"}:
        raise InvalidInput("the answer must be an object with only 'answer'")
    value = payload.get("answer")
    if value is None or value == "" or value == []:
        if card.get("required", True):
            raise InvalidInput("answer: this question requires an answer")
        return {"answer": card.get("default")}
    if card["question_type"] == "free_text":
        return {"answer": _free_text(value, card["max_length"], "answer")}
    return {"answer": _choice_answer(card, value, "answer")}


def validate_info(card: Mapping[str, Any], payload: Any) -> dict[str, Any]:
    """The normalized field values, or `InvalidInput` naming the first bad field."""
    if not isinstance(payload, Mapping):
        raise InvalidInput("the answer must be an object of field values")
    fields = {f["name"]: f for f in card["fields"]}
    unknown = set(payload) - set(fields)
    if unknown:
        raise InvalidInput(f"{sorted(unknown)[0]}: not a field of this request")
    values: dict[str, Any] = {}
    for name, field in fields.items():
        value = payload.get(name)
        if value is None or value == "":
            if field["required"]:
                raise InvalidInput(f"{name}: required")
            continue
        values[name] = _field_value(field, value)
    return values


def _choice_answer(card: Mapping[str, Any], value: Any, where: str) -> Any:
    options = card["options"]
    if card["question_type"] == "single_choice":
        if value not in options:
            raise InvalidInput(f"{where}: choose one of the listed options")
        return value
    if not isinstance(value, list) or len(set(value)) != len(value):
        raise InvalidInput(f"{where}: choose a list of distinct options")
    if any(v not in options for v in value):
        raise InvalidInput(f"{where}: every choice must be one of the listed options")
    low, high = card.get("min_selections", 1), card.get("max_selections")
    if len(value) < low or (high is not None and len(value) > high):
        bounds = f"{low}-{high}" if high is not None else f"at least {low}"
        raise InvalidInput(f"{where}: choose {bounds} options")
    return value


def _free_text(value: Any, max_length: int, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: must be text")
    if _CONTROL.search(value):
        raise InvalidInput(f"{where}: control characters are not allowed")
    if len(value) > max_length:
        raise InvalidInput(f"{where}: at most {max_length} characters")
    return value.strip()


def _field_schema(field: Mapping[str, Any]) -> dict[str, Any]:
    kind = field["type"]
    if kind in ("string", "email"):
        schema: dict[str, Any] = {"type": "string", "maxLength": field["max_length"]}
        if kind == "email":
            schema["format"] = "email"
    elif kind == "boolean":
        schema = {"type": "boolean"}
    else:
        schema = {"type": kind}
        if field.get("minimum") is not None:
            schema["minimum"] = field["minimum"]
        if field.get("maximum") is not None:
            schema["maximum"] = field["maximum"]
    schema["title"] = field["label"]
    return schema


def _field_value(field: Mapping[str, Any], value: Any) -> Any:
    name, kind = field["name"], field["type"]
    if kind in ("string", "email"):
        text = _free_text(value, field["max_length"], name)
        if kind == "email" and not _EMAIL.fullmatch(text):
            raise InvalidInput(f"{name}: not an email address")
        return text
    if kind == "boolean":
        if not isinstance(value, bool):
            raise InvalidInput(f"{name}: must be true or false")
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (kind == "integer" and not float(value).is_integer())
    ):
        raise InvalidInput(
            f"{name}: must be {'a whole number' if kind == 'integer' else 'a number'}"
        )
    low, high = field.get("minimum"), field.get("maximum")
    if (low is not None and value < low) or (high is not None and value > high):
        raise InvalidInput(f"{name}: must be between {low} and {high}")
    return int(value) if kind == "integer" else value
