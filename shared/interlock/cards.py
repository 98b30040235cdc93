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
from dataclasses import dataclass, field
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
    """What the person decided, normalized. `approved` is True only when explicit.

    `urls` and `packages` are a download card's lists as approved (edited or not);
    `edits` the arguments of a gated call the person changed before approving."""

    label: Label
    packages: tuple[str, ...] = ()
    reason: str | None = None
    suggestion: str | None = None
    urls: tuple[str, ...] = ()
    edits: Mapping[str, Any] = field(default_factory=dict)

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
        "impact": _download_impact(bool(sites), bool(names)),
    }


def _download_impact(sites: bool, packages: bool) -> str:
    """What approving grants, naming only what the card covers: a card that names no
    package must not promise to install any (nor one naming no site to download)."""
    grants = " and ".join(
        grant
        for grant, named in (
            ("download from these sites", sites),
            ("install these packages", packages),
        )
        if named
    )
    return f"The agent may {grants} for the rest of this chat."


def action_card(
    *,
    tool: str,
    params: Mapping[str, Any],
    risk: str,
    impact: str,
    tool_use_id: str,
    editable: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Build the card for admitting one call of a tool with outside side effects.

    `editable` maps the arguments the policy lets a person change to their JSON Schema
    (from the tool's input schema); the card shows each one's current value. A
    sensitive-looking argument is never editable: its value is never shown. The card
    keeps a digest of the exact call (`call_digest`), which execution is held to.
    """
    return {
        "type": ACTION,
        "card_id": uuid.uuid4().hex,
        "tool_use_id": tool_use_id,
        "tool": tool,
        "summary": redact(params),
        "risk": risk,
        "impact": impact,
        "reason": f"The agent wants to run {tool}.",
        **call_fields(tool, params, editable),
    }


def call_fields(
    tool: str, params: Mapping[str, Any], editable: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, Any]:
    """What a card that admits one call keeps of it: the exact call's digest, and the
    arguments a person may change (each with its schema and current value; never a
    sensitive-looking one, whose value is never shown)."""
    fields = {
        name: {"schema": dict(schema), "value": params.get(name)}
        for name, schema in (editable or {}).items()
        if not _SENSITIVE.search(name)
    }
    return {"call_digest": call_digest(tool, params), **({"editable": fields} if fields else {})}


def call_digest(tool: str, params: Mapping[str, Any]) -> str:
    """A digest of one exact call: the tool and every argument, unredacted (never shown;
    what runs is compared with it)."""
    call = json.dumps({"tool": tool, "input": params}, sort_keys=True, default=str)
    return hashlib.sha256(call.encode()).hexdigest()


def edited_call(params: Mapping[str, Any], decision: Decision) -> dict[str, Any]:
    """The call's arguments as approved: the agent's, with the person's edits applied."""
    return {**params, **decision.edits}


def fingerprint(card: Mapping[str, Any], decision: Decision) -> str:
    """A digest of what the person was shown and decided on: the card's facts (its
    subject and the exact call it was raised for), the decision, and the lists or
    arguments as approved. Recorded with the answer; what runs is held to it."""
    decided = {
        "card": args_hash(card),
        "call": card.get("call_digest"),
        "label": decision.label,
        "urls": list(decision.urls),
        "packages": list(decision.packages),
        "edits": dict(decision.edits),
    }
    text = json.dumps(decided, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def edit_record(card: Mapping[str, Any], decision: Decision) -> dict[str, Any]:
    """What the person changed, as the trail keeps it: each edited argument's value as
    the agent asked and as approved (redacted like a summary), and the URL list."""
    changed: dict[str, Any] = {}
    if decision.edits:
        changed["edits"] = {
            name: {"from": _summary_of(card["editable"][name].get("value")), "to": _summary_of(v)}
            for name, v in decision.edits.items()
        }
    if decision.approved and decision.urls != tuple(card.get("urls", [])):
        changed["urls"] = {"from": list(card.get("urls", [])), "to": list(decision.urls)}
    return changed


def response_schema(card: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an answer to `card` (the AG-UI interrupt's responseSchema)."""
    properties: dict[str, Any] = {
        "decision": {"enum": ["approve", "reject"]},
        "reason": {"type": "string", "maxLength": MAX_TEXT},
        "suggestion": {"type": "string", "maxLength": MAX_TEXT},
    }
    if card.get("type") == DOWNLOAD:
        # The person may edit the URL and package lists; sites follow the URLs.
        properties["packages"] = {
            "type": "array",
            "maxItems": 50,
            "items": {"type": "string", "pattern": PACKAGE_PATTERN},
        }
        properties["urls"] = {
            "type": "array",
            "maxItems": 50,
            "items": {"type": "string", "maxLength": 2048},
        }
    if card.get("editable"):
        # The arguments the tool's policy lets a person change, typed by its schema.
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


def card_subjects(card: Mapping[str, Any], decision: Decision) -> list[Subject]:
    """The rows an approval writes: the sites and packages as approved (edited or not;
    a site the agent asked about without a URL stays as asked)."""
    sites = set(card.get("sites", []))
    if decision.urls != tuple(card.get("urls", [])):
        asked = {safe_url(url).site for url in card.get("urls", [])}
        sites = (sites - asked) | {safe_url(url).site for url in decision.urls}
    return [Subject("site", host) for host in sorted(sites)] + [
        Subject("package", name) for name in decision.packages
    ]


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
        return Decision(
            "approved",
            packages=_edited_packages(response, card),
            urls=_edited_urls(response, card),
            edits=_edits(response, card),
        )
    label: Label = "rejected_with_feedback" if suggestion else "rejected"
    return Decision(label, reason=reason, suggestion=suggestion)


def outcome_text(card: Mapping[str, Any], decision: Decision) -> str:
    """The tool result the model reads: what was decided and what to do next."""
    subject = _subject_text(card, decision)
    if decision.approved:
        changed = changes_text(card, decision)
        if card.get("type") == ACTION:
            return f"Approved by the user: {subject}.{changed}"
        return f"Approved by the user: {subject}.{changed} Run the step again now."
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
    edited = response.get("packages", card.get("packages", []))
    if not isinstance(edited, list):
        raise InvalidInput("packages must be a list of package names")
    return tuple(sorted({safe_package(p) for p in edited}))


def _edited_urls(response: Mapping[str, Any], card: Mapping[str, Any]) -> tuple[str, ...]:
    # An edited URL meets every rule the agent's own URLs met (`egress.safe_url`).
    edited = response.get("urls", card.get("urls", []))
    if not isinstance(edited, list):
        raise InvalidInput("urls must be a list of URLs")
    return tuple(sorted({safe_url(u).url for u in edited}))


def _edits(response: Mapping[str, Any], card: Mapping[str, Any]) -> dict[str, Any]:
    edits = response.get("edits") or {}
    if not isinstance(edits, Mapping):
        raise InvalidInput("edits must be an object of argument values")
    allowed = card.get("editable", {})
    for name in edits:
        if name not in allowed:
            raise InvalidInput(f"{name!r} is not an argument this card lets you change")
    # Only what differs from the agent's call is an edit.
    return {n: v for n, v in sorted(edits.items()) if v != allowed[n].get("value")}


def changes_text(card: Mapping[str, Any], decision: Decision) -> str:
    """What the person changed before approving, said plainly to the model (empty when
    nothing was changed)."""
    changes = [
        f"{name} changed from {json.dumps(card['editable'][name].get('value'))} to "
        f"{json.dumps(value)}"
        for name, value in decision.edits.items()
    ]
    if decision.urls and decision.urls != tuple(card.get("urls", [])):
        changes.append(f"the URLs changed to {', '.join(decision.urls)}; use these")
    return f" The user changed the call before approving: {'; '.join(changes)}." if changes else ""


def _subject_text(card: Mapping[str, Any], decision: Decision | None) -> str:
    if card.get("type") in (ACTION, "confirm"):
        return f"running {card.get('tool')}"
    packages = decision.packages if decision and decision.approved else card.get("packages", [])
    sites = card.get("sites", [])
    if decision and decision.approved:
        sites = [s.name for s in card_subjects(card, decision) if s.kind == "site"]
    parts = [
        f"sites {', '.join(sites)}" if sites else "",
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
