"""Interlock's own tools: asking for approval, questions, information, and an
egress-checked fetch.

Identity, approvals and "can a human answer" come from the request context, never
from arguments the model chose.
"""

from __future__ import annotations

from typing import Any, Final

from strands import ToolContext, tool

from interlock.answers import answer_text
from interlock.cards import (
    DOWNLOAD,
    download_card,
    fingerprint,
    outcome_text,
    parse_decision,
    unattended_denial,
)
from interlock.context import current_request
from interlock.egress import safe_url
from interlock.errors import CallChanged, InvalidInput
from interlock.harness.scrub import SCRUBBED_NOTE
from interlock.questions import (
    INFO,
    QUESTION,
    InfoSpec,
    QuestionSpec,
    info_card,
    parse_spec,
    question_card,
)
from interlock.records import Subject

APPROVAL_INTERRUPT: Final = "interlock.approval"
MAX_FETCHED_CHARS: Final = 4000


def _ok(text: str) -> dict[str, Any]:
    return {"status": "success", "content": [{"text": text}]}


def _error(text: str) -> dict[str, Any]:
    return {"status": "error", "content": [{"text": text}]}


def own_resume_card(kind: str, tool_use_id: str) -> dict[str, Any] | None:
    """The stored card if this very call is the one whose interrupt is being answered.

    Strands offers no public accessor for "my interrupt was answered", so the card
    records the toolUseId that raised it. A card without that id is unreadable: assume
    it is this call's, because "never validate or merge again" is the safe mistake.
    """
    for card in current_request().resume_cards:
        if card.get("type") == kind and card.get("tool_use_id", tool_use_id) == tool_use_id:
            return card
    return None


@tool(context=True)
def request_approval(
    reason: str,
    urls: list[str] | None = None,
    packages: list[str] | None = None,
    tool_context: ToolContext | None = None,
) -> dict[str, Any]:
    """Ask the user to approve downloads from sites or package installs for this chat.

    Call this tool on its own, never alongside other tools. Name the URLs and packages
    the step needs, or call it after a download was refused (the refused sites are then
    included automatically).

    Args:
        reason: One sentence saying why the data or packages are needed.
        urls: The http(s) URLs to download.
        packages: The package names to install.
    """
    assert tool_context is not None
    context = current_request()
    call_id = tool_context.tool_use["toolUseId"]

    # RESUME: the body re-runs from the top. Answer only from the stored card and the
    # response; never validate or merge again (everything may be approved by now).
    card = own_resume_card(DOWNLOAD, call_id)
    if card is not None:
        answer = tool_context.interrupt(APPROVAL_INTERRUPT, reason=card)
        decision = parse_decision(answer, card)
        if decision.approved and answer.get("fingerprint") != fingerprint(card, decision):
            # Fail closed: the approval recorded is not the one this card and answer make.
            raise CallChanged("the approval recorded is not the one the person gave")
        return (_ok if decision.approved else _error)(outcome_text(card, decision))

    # FIRST CALL: validate, merge what was refused this turn, drop what is approved.
    if not urls and not packages and not context.refused:
        return _error(
            "Nothing to approve: name the URLs or packages you need, or run the step "
            "first so the blocked sites are recorded, then call this tool again."
        )
    try:
        card = download_card(
            reason=reason,
            urls=urls or [],
            packages=packages or [],
            refused=sorted(context.refused, key=lambda s: (s.kind, s.name)),
            approved_among=context.approved_among,
            tool_use_id=call_id,
        )
    except InvalidInput as exc:
        return _error(f"Invalid request: {exc}")
    if card is None:
        return _ok("Already approved: run it.")
    if not context.can_ask_a_human:
        return _error(unattended_denial(card))
    answer = tool_context.interrupt(APPROVAL_INTERRUPT, reason=card)
    decision = parse_decision(answer, card)
    return (_ok if decision.approved else _error)(outcome_text(card, decision))


@tool(context=True)
def fetch_url(url: str, tool_context: ToolContext | None = None) -> dict[str, Any]:
    """Download a web page or file. Only sites approved for this chat can be reached.

    Args:
        url: The http(s) URL to fetch.
    """
    assert tool_context is not None
    context = current_request()
    note = SCRUBBED_NOTE + " " if tool_context.tool_use["toolUseId"] in context.scrubbed else ""
    try:
        safe = safe_url(url)
    except InvalidInput as exc:
        return _error(f"Refused: {exc}")
    site = Subject("site", safe.site)
    if not context.is_approved(site):
        context.refused.add(site)
        return _error(
            f"Blocked: {safe.site} is not approved for this chat. Call request_approval "
            "on its own naming this URL, then fetch it again."
        )
    if context.fetch is None:
        return _error("Downloads are not available in this run.")
    return _ok(note + context.fetch(safe.url)[:MAX_FETCHED_CHARS])


QUESTION_INTERRUPT: Final = "interlock.question"
INFO_INTERRUPT: Final = "interlock.info"


@tool(context=True)
def ask_user(
    type: str,
    prompt: str,
    options: list[str] | None = None,
    min_selections: int = 1,
    max_selections: int | None = None,
    max_length: int = 500,
    required: bool = True,
    default: str | list[str] | None = None,
    tool_context: ToolContext | None = None,
) -> dict[str, Any]:
    """Ask the user one structured question and wait for the answer.

    Use a choice question whenever the possible answers are known.

    Args:
        type: "single_choice", "multiple_choice" or "free_text".
        prompt: The question, one sentence.
        options: The choices (2-20) for a choice question.
        min_selections: Fewest choices for a multiple-choice question.
        max_selections: Most choices for a multiple-choice question.
        max_length: Longest free-text answer.
        required: Whether an answer is required.
        default: The answer used if nobody answers in time.
    """
    assert tool_context is not None
    spec = {
        "type": type,
        "prompt": prompt,
        "options": options or [],
        "min_selections": min_selections,
        "max_selections": max_selections,
        "max_length": max_length,
        "required": required,
        "default": default,
    }
    return _ask(
        tool_context,
        QUESTION,
        QUESTION_INTERRUPT,
        lambda call_id: question_card(parse_spec(QuestionSpec, spec), call_id),
    )


@tool(context=True)
def request_info(
    reason: str, fields: list[dict[str, Any]], tool_context: ToolContext | None = None
) -> dict[str, Any]:
    """Ask the user for missing values (for example a configuration detail) as named fields.

    Args:
        reason: Why the values are needed, one sentence.
        fields: Each {"name", "label", "type": string|integer|number|boolean|email,
            "required", "max_length", "minimum", "maximum"}.
    """
    assert tool_context is not None
    before = _previous_call(tool_context)
    return _ask(
        tool_context,
        INFO,
        INFO_INTERRUPT,
        lambda call_id: info_card(
            parse_spec(InfoSpec, {"reason": reason, "fields": fields}), call_id, before
        ),
    )


def _ask(tool_context: ToolContext, kind: str, name: str, build: Any) -> dict[str, Any]:
    """The shared shape of a question: resume branch first, then validate and ask."""
    context = current_request()
    call_id = tool_context.tool_use["toolUseId"]
    card = own_resume_card(kind, call_id)
    if card is None:
        try:
            card = build(call_id)
        except InvalidInput as exc:
            return _error(f"Invalid request: {exc}")
        if not context.can_ask_a_human:
            fallback = card.get("default")
            if fallback is not None:
                return _ok(answer_text(card, {"status": "default", "answer": fallback}))
            return _error(
                f"Nobody can answer in this run: {card['reason']} Continue without it and say so."
            )
    response = tool_context.interrupt(name, reason=card)
    return _ok(answer_text(card, response))


def _previous_call(tool_context: ToolContext) -> str | None:
    """The tool call that ran just before this one, which the values are for."""
    for message in reversed(tool_context.agent.messages):
        for block in message.get("content", []):
            result = block.get("toolResult")
            if result:
                return str(result["toolUseId"])
    return None


# Interlock's tools that ask a person, and the kinds of card they raise. Resumed, each
# answers its card from the card and the recorded answer alone (see `own_resume_card`).
ASKING_TOOLS: Final = frozenset(
    {request_approval.tool_name, ask_user.tool_name, request_info.tool_name}
)
ASKING_KINDS: Final = frozenset({DOWNLOAD, QUESTION, INFO})
