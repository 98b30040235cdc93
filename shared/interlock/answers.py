"""One way to read every answer: validate against the card, then decide.

Approvals, questions and information requests share the pointer, the claim and the
wire contract; only the card's rules differ. Everything here runs before the claim, so
a bad answer is refused with nothing written and the request stays answerable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from interlock import cards, elicitation, interrupts, questions
from interlock.egress import PACKAGE_PATTERN, safe_url
from interlock.errors import IncompleteResume, InvalidInput, UnknownRequest, validation_message
from interlock.records import RequestRecord

Status = Literal["resolved", "cancelled", "timed_out"]


class ApprovalAnswer(BaseModel):
    """An answer to an approval card, as its response schema describes it."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    reason: str | None = Field(default=None, max_length=cards.MAX_TEXT)
    suggestion: str | None = Field(default=None, max_length=cards.MAX_TEXT)
    packages: list[str] | None = Field(default=None, max_length=50)
    urls: list[str] | None = Field(default=None, max_length=50)
    edits: dict[str, Any] | None = None

    @field_validator("packages")
    @classmethod
    def _package_names(cls, names: list[str] | None) -> list[str] | None:
        for name in names or []:
            if not re.fullmatch(PACKAGE_PATTERN, name):
                raise ValueError(f"not a valid package name: {name!r}")
        return names


@dataclass(frozen=True, slots=True)
class Reply:
    """One resume entry: the interrupt it answers, its status and its payload."""

    interrupt_id: str
    status: Status
    payload: Any = None


@dataclass(frozen=True, slots=True)
class Answers:
    """What a request's every interrupt was answered with.

    Attributes:
        decisions: Per interrupt id, what the person decided.
        responses: Per interrupt id, the validated response (as recorded by the claim).
    """

    decisions: Mapping[str, cards.Decision]
    responses: Mapping[str, Any]

    @property
    def label(self) -> str:
        """One label for the request: the shared decision, else "answered"."""
        labels = {d.label for d in self.decisions.values()}
        return labels.pop() if len(labels) == 1 else "answered"


def kind_of(card: Mapping[str, Any]) -> Literal["approval", "question", "info"]:
    """The interaction kind a card belongs to (a generic interrupt asks for a value)."""
    if card.get("type") == questions.QUESTION:
        return "question"
    if card.get("type") in (questions.INFO, interrupts.GENERIC):
        return "info"
    return "approval"


def response_schema(card: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an answer to `card` (the AG-UI interrupt's responseSchema)."""
    kind = card.get("type")
    if kind == questions.QUESTION:
        return questions.question_schema(card)
    if kind == questions.INFO:
        return questions.info_schema(card)
    if kind == interrupts.GENERIC:
        return interrupts.generic_schema(card)
    if kind == interrupts.CONFIRM:
        return interrupts.confirm_schema(card)
    return cards.response_schema(card)


def decide_all(record: RequestRecord, replies: list[Reply]) -> Answers:
    """Validate one answer per interrupt of `record`, all or none.

    Raises:
        UnknownRequest: an entry answers an interrupt this request does not hold.
        IncompleteResume: an interrupt is unanswered or answered twice (AG-UI 1.0: a
            resume answers every open interrupt); nothing has been written.
        InvalidInput: an answer breaks its card's rules.
    """
    cards_by_id = {a.interrupt_id: a.card for a in record.asked}
    given = [r.interrupt_id for r in replies]
    if len(set(given)) != len(given):
        raise IncompleteResume("each interrupt must be answered once")
    unknown = sorted(set(given) - set(cards_by_id))
    if unknown:
        raise UnknownRequest(f"no open interrupt {unknown[0]!r} in this request")
    missing = [i for i in cards_by_id if i not in given]
    if missing:
        raise IncompleteResume(
            f"this run paused on {len(cards_by_id)} interrupts; answer every one in one "
            f"resume (missing: {', '.join(missing)})"
        )
    decisions: dict[str, cards.Decision] = {}
    responses: dict[str, Any] = {}
    for reply in replies:
        decisions[reply.interrupt_id], responses[reply.interrupt_id] = decide(
            cards_by_id[reply.interrupt_id], reply.status, reply.payload
        )
    return Answers(decisions, responses)


def recorded_answers(record: RequestRecord, recorded: Mapping[str, Any]) -> Answers:
    """The answers a recorded set of responses stands for (a takeover continues with it)."""
    decisions = {
        a.interrupt_id: recorded_decision(a.card, recorded.get(a.interrupt_id))
        for a in record.asked
    }
    return Answers(decisions, {a.interrupt_id: recorded.get(a.interrupt_id) for a in record.asked})


def agent_response(card: Mapping[str, Any], response: Any) -> Any:
    """What the paused tool, hook or intervention receives for `response`.

    A confirm card's `Confirm` evaluates True as approval (anything else denies, so a
    cancellation or a timeout fails closed); an MCP server's input request gets MCP's
    reply (`elicitation.reply`); every other card gets the response itself.
    """
    if card.get("type") == interrupts.CONFIRM:
        return isinstance(response, Mapping) and response.get("decision") == "approve"
    if elicitation.is_mcp(card):
        return elicitation.reply(card, response)
    return response


def decide(card: Mapping[str, Any], status: Status, payload: Any) -> tuple[cards.Decision, Any]:
    """Validate an answer and return the decision and the response the agent receives.

    Raises:
        InvalidInput: the answer breaks the card's rules (nothing has been written).
    """
    if status in ("cancelled", "timed_out"):
        return cards.Decision(status), {"status": status}
    if status != "resolved":
        raise InvalidInput("status must be 'resolved' or 'cancelled'")
    kind = card.get("type")
    if kind == questions.QUESTION:
        return cards.Decision("answered"), questions.validate_question(card, payload)
    if kind == questions.INFO:
        return cards.Decision("answered"), questions.validate_info(card, payload)
    if kind == interrupts.GENERIC:
        answer = interrupts.validate_generic(card, payload)
        return cards.Decision("answered"), (
            elicitation.recorded(answer) if elicitation.is_mcp(card) else answer
        )
    listed = isinstance(payload, Mapping) and ("packages" in payload or "urls" in payload)
    if kind != cards.DOWNLOAD and listed:
        raise InvalidInput("only a download card's URL and package lists can be edited")
    try:
        answer = ApprovalAnswer.model_validate(payload).model_dump(exclude_none=True)
    except ValidationError as exc:
        raise InvalidInput(
            f"the answer does not match the response schema: {validation_message(exc)}"
        ) from None
    if answer.get("decision") != "approve" and ("edits" in answer or "urls" in answer):
        raise InvalidInput("edits come with an approval: a decline changes nothing")
    _check_edits(card, answer.get("edits") or {})
    decision = cards.parse_decision(answer, card)
    if decision.approved:
        # What the person saw and decided on, bound to the answer: execution is held to it.
        answer["fingerprint"] = cards.fingerprint(card, decision)
    return decision, answer


def _check_edits(card: Mapping[str, Any], edits: Mapping[str, Any]) -> None:
    """An edited argument meets what the agent's own call met: the tool's schema for it,
    and, for a URL, every egress rule (`egress.safe_url`). Raises `InvalidInput`."""
    from jsonschema import Draft202012Validator  # imported where an edit is checked

    editable = card.get("editable", {})
    for name, value in edits.items():
        if name not in editable:
            raise InvalidInput(f"{name!r} is not an argument this card lets you change")
        schema = editable[name].get("schema", {})
        problem = next(iter(Draft202012Validator(schema).iter_errors(value)), None)
        if problem is not None:
            raise InvalidInput(f"{name}: {problem.message}")
        if isinstance(value, str) and ("url" in name.lower() or schema.get("format") == "uri"):
            safe_url(value)


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
