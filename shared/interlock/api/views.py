"""JSON views of stored records for the JSON routes (no AG-UI models: fast to import).

The response model and the card readers (pydantic, both) load with the first view
rendered: only the request routes render one, and `iso` alone needs neither.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from interlock.records import RequestRecord


def request_view(request: RequestRecord, now_ms: int, secret: str | None) -> dict[str, Any]:
    """The JSON shape of a chat's open (or last) request for the requests route."""
    from interlock.api.schemas import RequestView

    return RequestView.model_validate(_view(request, now_ms, secret)).wire()


def _view(request: RequestRecord, now_ms: int, secret: str | None) -> dict[str, Any]:
    from interlock.answers import kind_of, response_schema
    from interlock.records import RequestState, decided_text, gave_up

    view: dict[str, Any] = {
        "interruptId": request.interrupt_id,
        "kind": request.kind,
        "state": request.status(now_ms).value,
        "card": request.card,
        "responseSchema": response_schema(request.card),
        "expiresAt": iso(request.expires_at),
        "toolCallId": request.card.get("tool_use_id"),
    }
    if request.also_asked:
        view["alsoAsked"] = [
            {
                "interruptId": asked.interrupt_id,
                "kind": kind_of(asked.card),
                "card": asked.card,
                "responseSchema": response_schema(asked.card),
                "toolCallId": asked.card.get("tool_use_id"),
            }
            for asked in request.also_asked
        ]
    if secret is not None:
        view["secret"] = secret
    if (cause := gave_up(request)) is not None:
        # Its retries ran out before the run went to its end: say so, whatever answer
        # was recorded (never "Approved by …" for an approval that was given up).
        view["decision"] = "given_up"
        view["decided"] = _given_up_text(request, cause)
    elif request.decision and (ended := _ended_unrun(request, now_ms)) is not None:
        # An answer was recorded but never carried out: the request ended instead. Say
        # how it ended; never "Approved by …" for an approval that did not run.
        view["decision"] = ended
        view["decided"] = _ended_text(request, ended)
    elif request.decision:
        view["decision"] = request.decision
        if request.also_asked and (decisions := _card_decisions(request)):
            view["decisions"] = decisions
        view["answeredAt"] = iso(request.answered_at) if request.answered_at else None
        view["answer"] = request.final_text
        view["decidedBy"] = request.decided_by
        view["decidedAt"] = iso(request.decided_at_ms // 1000) if request.decided_at_ms else None
        view["decided"] = decided_text(request)
    if request.state is RequestState.CLAIMED:
        # A claim's answer binds once acted on; until then a later answer replaces it.
        view["binding"] = request.acted_on
        view["interrupted"] = request.claim_count > 1 or request.lease_lapsed(now_ms)
    if request.ended_reason:
        view["endedReason"] = request.ended_reason
    return view


_ENDINGS = frozenset({"cancelled", "timed_out", "defaulted", "expired"})


def _ended_unrun(request: RequestRecord, now_ms: int) -> str | None:
    """`cancelled` or `expired` when `request` ended that way although an answer of
    another kind was recorded on it (claimed, then cancelled or given up); else None."""
    from interlock.records import RequestState

    state = request.status(now_ms)
    if state not in (RequestState.CANCELLED, RequestState.EXPIRED):
        return None
    return None if request.decision in _ENDINGS else state.value


def _ended_text(request: RequestRecord, ended: str) -> str:
    from interlock.records import decided_text

    fate = "was not carried through" if request.acted_on else "was never carried out"
    return f"{ended.capitalize()}: the answer recorded earlier ({decided_text(request)}) {fate}"


def _given_up_text(request: RequestRecord, cause: str) -> str:
    """ "Given up (…): the answer recorded earlier (Approved by alice at 12:03 UTC) was
    not carried through": a given-up request as a person reads it."""
    from interlock.records import decided_text

    text = f"Given up ({cause})"
    if request.decision is None or request.decision in _ENDINGS:
        return text
    fate = "was not carried through" if request.acted_on else "was never carried out"
    return f"{text}: the answer recorded earlier ({decided_text(request)}) {fate}"


def _card_decisions(request: RequestRecord) -> dict[str, str] | None:
    """What each card of a decided pause was answered with (they may differ: one
    approved, one denied), read from the answers the claim recorded."""
    import json

    from interlock.answers import recorded_answers

    try:
        recorded = json.loads(request.response or "")
    except ValueError:
        return None
    if not isinstance(recorded, dict):
        return None
    answers = recorded_answers(request, recorded)
    return {interrupt: decision.label for interrupt, decision in answers.decisions.items()}


def iso(epoch_s: int) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.UTC).isoformat().replace("+00:00", "Z")
