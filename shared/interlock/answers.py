"""One way to read every answer: validate against the card, then decide.

Approvals, questions and information requests share the pointer, the claim and the
wire contract; only the card's rules differ. Everything here runs before the claim, so
a bad answer is refused with nothing written and the request stays answerable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from interlock import cards, questions
from interlock.egress import PACKAGE_PATTERN
from interlock.errors import InvalidInput

Status = Literal["resolved", "cancelled", "timed_out"]


class ApprovalAnswer(BaseModel):
    """An answer to an approval card, as its response schema describes it."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    reason: str | None = Field(default=None, max_length=cards.MAX_TEXT)
    suggestion: str | None = Field(default=None, max_length=cards.MAX_TEXT)
    packages: list[str] | None = Field(default=None, max_length=50)

    @field_validator("packages")
    @classmethod
    def _package_names(cls, names: list[str] | None) -> list[str] | None:
        import re

        for name in names or []:
            if not re.fullmatch(PACKAGE_PATTERN, name):
                raise ValueError(f"not a valid package name: {name!r}")
        return names


def kind_of(card: Mapping[str, Any]) -> Literal["approval", "question", "info"]:
    """The interaction kind a card belongs to."""
    if card.get("type") == questions.QUESTION:
        return "question"
    if card.get("type") == questions.INFO:
        return "info"
    return "approval"


def response_schema(card: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an answer to `card` (the AG-UI interrupt's responseSchema)."""
    kind = kind_of(card)
    if kind == "question":
        return questions.question_schema(card)
    if kind == "info":
        return questions.info_schema(card)
    return cards.response_schema(card)


def decide(card: Mapping[str, Any], status: Status, payload: Any) -> tuple[cards.Decision, Any]:
    """Validate an answer and return the decision and the response the agent receives.

    Raises:
        InvalidInput: the answer breaks the card's rules (nothing has been written).
    """
    if status in ("cancelled", "timed_out"):
        return cards.Decision(status), {"status": status}
    if status != "resolved":
        raise InvalidInput("status must be 'resolved' or 'cancelled'")
    kind = kind_of(card)
    if kind == "question":
        return cards.Decision("answered"), questions.validate_question(card, payload)
    if kind == "info":
        return cards.Decision("answered"), questions.validate_info(card, payload)
    try:
        answer = ApprovalAnswer.model_validate(payload).model_dump(exclude_none=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error.get("loc", ()))
        raise InvalidInput(
            f"the answer does not match the response schema: "
            f"{where + ': ' if where else ''}{error.get('msg')}"
        ) from None
    return cards.parse_decision(answer, card), answer


def recorded_decision(card: Mapping[str, Any], response: Any) -> cards.Decision:
    """The decision a recorded response stands for (a takeover continues with it)."""
    status = response.get("status") if isinstance(response, Mapping) else None
    if status == "default":
        return cards.Decision("defaulted")
    if status in ("cancelled", "timed_out"):
        return cards.Decision(status)
    if kind_of(card) != "approval":
        return cards.Decision("answered")
    return cards.parse_decision(response, card)


def answer_text(card: Mapping[str, Any], response: Any) -> str:
    """The tool result for a question or information request: explicit, never a guess."""
    what = "question" if kind_of(card) == "question" else "information request"
    status = response.get("status") if isinstance(response, Mapping) else None
    if status == "cancelled":
        return f"The user cancelled the {what} ({card.get('reason')}). Continue without it."
    if status == "timed_out":
        return f"Nobody answered the {what} ({card.get('reason')}) in time. Continue without it."
    if status == "default":
        return f"Nobody answered in time; the default applies: {json.dumps(response['answer'])}."
    if not isinstance(response, Mapping):
        return f"No usable answer to the {what}. Continue without it."
    return f"The user answered: {json.dumps(dict(response), ensure_ascii=False)}"
