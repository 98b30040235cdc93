"""Approval cards and the decisions people make on them.

A card is plain JSON: it is stored in the pointer, shown by any AG-UI client, and read
back by the tool on resume. Parsing a decision fails closed: only an explicit approval
approves; a missing field, a cancelled status or an unknown shape all mean no.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from interlock.egress import PACKAGE_PATTERN, safe_package, safe_url
from interlock.errors import InvalidInput
from interlock.records import Subject

DOWNLOAD: Final = "download"
ACTION: Final = "action"
Label = Literal[
    "approved",
    "rejected",
    "rejected_with_feedback",
    "cancelled",
    "timed_out",
    "defaulted",
    "answered",
]

MAX_TEXT: Final = 1000
_SENSITIVE: Final = re.compile(r"pass|secret|token|key|auth|cookie|credential|session", re.I)
REDACTED: Final = "[redacted]"


@dataclass(frozen=True, slots=True)
class Decision:
    """What the person decided, normalized. `approved` is True only when explicit."""

    label: Label
    packages: tuple[str, ...] = ()
    reason: str | None = None
    suggestion: str | None = None

    @property
    def approved(self) -> bool:
        return self.label == "approved"


def download_card(
    *,
    reason: str,
    urls: Iterable[str],
    packages: Iterable[str],
    refused: Iterable[Subject],
    approved_among: Callable[[frozenset[Subject]], frozenset[Subject]],
    tool_use_id: str,
) -> dict[str, Any] | None:
    """Build the card for a download approval, or None if nothing is left to ask.

    Validates what the model named, merges what was refused this turn and drops what
    `approved_among` says is already approved (asked once, for exactly these subjects).
    Raises `InvalidInput` for a URL or package breaking the rules.
    """
    safe_urls = {u.url: u.site for u in (safe_url(raw) for raw in urls)}
    sites = set(safe_urls.values()) | {s.name for s in refused if s.kind == "site"}
    names = {safe_package(p) for p in packages} | {s.name for s in refused if s.kind == "package"}
    approved = approved_among(
        frozenset({Subject("site", h) for h in sites} | {Subject("package", p) for p in names})
    )
    sites = {h for h in sites if Subject("site", h) not in approved}
    names = {p for p in names if Subject("package", p) not in approved}
    if not sites and not names:
        return None
    return {
        "type": DOWNLOAD,
        "card_id": uuid.uuid4().hex,
        "tool_use_id": tool_use_id,
        "tool": "request_approval",
        "reason": _text(reason, "reason"),
        "sites": sorted(sites),
        "urls": sorted(u for u, site in safe_urls.items() if site in sites),
        "packages": sorted(names),
        # The call's parameters as shown to the person: the stripped URLs, never tokens.
        "summary": redact({"reason": reason, "urls": sorted(safe_urls), "packages": sorted(names)}),
        "risk": "medium",
        "impact": "The agent may download from these sites and install these packages "
        "for the rest of this chat.",
    }


def action_card(
    *, tool: str, params: Mapping[str, Any], risk: str, impact: str, tool_use_id: str
) -> dict[str, Any]:
    """Build the card for admitting one call of a tool with outside side effects."""
    return {
        "type": ACTION,
        "card_id": uuid.uuid4().hex,
        "tool_use_id": tool_use_id,
        "tool": tool,
        "summary": redact(params),
        "risk": risk,
        "impact": impact,
        "reason": f"The agent wants to run {tool}.",
    }


def response_schema(card: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an answer to `card` (the AG-UI interrupt's responseSchema)."""
    properties: dict[str, Any] = {
        "decision": {"enum": ["approve", "reject"]},
        "reason": {"type": "string", "maxLength": MAX_TEXT},
        "suggestion": {"type": "string", "maxLength": MAX_TEXT},
    }
    if card.get("type") == DOWNLOAD:
        # Only the package list is editable by the person answering.
        properties["packages"] = {
            "type": "array",
            "maxItems": 50,
            "items": {"type": "string", "pattern": PACKAGE_PATTERN},
        }
    return {
        "type": "object",
        "properties": properties,
        "required": ["decision"],
        "additionalProperties": False,
    }


def card_subjects(card: Mapping[str, Any], decision: Decision) -> list[Subject]:
    """The rows an approval writes: the card's sites and the (possibly edited) packages."""
    sites = [Subject("site", host) for host in card.get("sites", [])]
    return sites + [Subject("package", name) for name in decision.packages]


def parse_decision(response: Any, card: Mapping[str, Any]) -> Decision:
    """Read a person's answer to `card`, failing closed.

    Accepted shapes: `{"decision": "approve", "packages"?: [...]}`,
    `{"decision": "reject", "reason"?: str, "suggestion"?: str}`,
    `{"status": "cancelled" | "timed_out"}`. Anything else is a rejection.
    """
    if not isinstance(response, Mapping):
        return Decision("rejected", reason="no usable answer was given")
    status = response.get("status")
    if status in ("cancelled", "timed_out"):
        return Decision(status)
    reason = _optional_text(response.get("reason"))
    suggestion = _optional_text(response.get("suggestion"))
    if response.get("decision") is True or response.get("decision") == "approve":
        return Decision("approved", packages=_edited_packages(response, card))
    label: Label = "rejected_with_feedback" if suggestion else "rejected"
    return Decision(label, reason=reason, suggestion=suggestion)


def outcome_text(card: Mapping[str, Any], decision: Decision) -> str:
    """The tool result the model reads: what was decided and what to do next."""
    subject = _subject_text(card, decision)
    if decision.approved:
        if card.get("type") == ACTION:
            return f"Approved by the user: {subject}."
        return f"Approved by the user: {subject}. Run the step again now."
    if decision.label == "cancelled":
        return f"The user cancelled the request for {subject}. Continue without it and say so."
    if decision.label == "timed_out":
        return f"Nobody answered the request for {subject} in time. Continue without it and say so."
    text = f"The user declined {subject}."
    if decision.reason:
        text += f" Reason: {decision.reason}."
    if decision.suggestion:
        text += f" Suggestion: {decision.suggestion}. Follow the suggestion if you can."
    else:
        text += " Continue without it and say so."
    return text


def unattended_denial(card: Mapping[str, Any]) -> str:
    """The deterministic answer when nobody can be asked in this run."""
    return (
        "Access denied: approval cannot be asked in this run because nobody can answer it; "
        f"only what is already approved applies. Blocked: {_subject_text(card, None)}. "
        "Continue without that data and say so."
    )


def args_hash(card: Mapping[str, Any]) -> str:
    """A digest of what was asked about (the card's subject), for the audit trail."""
    keys = ("tool", "sites", "urls", "packages", "summary", "options", "fields", "reason")
    subject = {k: card[k] for k in keys if k in card}
    return hashlib.sha256(json.dumps(subject, sort_keys=True).encode()).hexdigest()


def redact(params: Mapping[str, Any]) -> dict[str, Any]:
    """A parameter summary safe to show and store: sensitive keys masked at any depth
    (inside lists too), long text cut."""
    return {
        key: REDACTED if _SENSITIVE.search(str(key)) else _summary_of(value)
        for key, value in params.items()
    }


def _summary_of(value: Any) -> Any:
    if isinstance(value, Mapping):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_summary_of(item) for item in value]
    if isinstance(value, str) and len(value) > 200:
        return value[:200] + "…"
    return value


def _edited_packages(response: Mapping[str, Any], card: Mapping[str, Any]) -> tuple[str, ...]:
    # The person may edit only the package list; sites and URLs stay as the agent asked.
    edited = response.get("packages", card.get("packages", []))
    if not isinstance(edited, list):
        raise InvalidInput("packages must be a list of package names")
    return tuple(sorted({safe_package(p) for p in edited}))


def _subject_text(card: Mapping[str, Any], decision: Decision | None) -> str:
    if card.get("type") in (ACTION, "confirm"):
        return f"running {card.get('tool')}"
    packages = decision.packages if decision and decision.approved else card.get("packages", [])
    parts = [
        f"sites {', '.join(card.get('sites', []))}" if card.get("sites") else "",
        f"packages {', '.join(packages)}" if packages else "",
    ]
    return " and ".join(p for p in parts if p) or "nothing"


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what} must be a non-empty sentence")
    return _optional_text(value) or ""


def _optional_text(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    cleaned = "".join(ch for ch in value.strip() if ch.isprintable())
    return cleaned[:MAX_TEXT]
