"""One respond path for taps from every channel.

In a fixed order, so that the cheap and safe checks come first:

1. **identity**: the card is one Interlock knows, and the tapper's channel account is
   linked to a user who may answer it (`interlock.access`). An unlinked or unauthorised
   tapper is refused, learns nothing of the card, and nothing changes.
2. **idempotency**: the card is still open. A second tap, or a tap racing another
   channel, is told what the first answer was and changes nothing; so is a tap on a
   card that expired or was cancelled.
3. **the claim**: the same `resume_turn` the page and AG-UI answer through, with the
   secret rotated on the tapper's behalf (the platform's signature and the link stand
   for the secret a page would hold).

`screen_tap` is steps 1 and 2, cheap enough for a webhook to run before it acknowledges;
`apply_tap` runs all three, asynchronously after the acknowledgement.

A card's Dismiss goes the same way with one difference at each step: only the request's
own user may dismiss it (as on the card page), and instead of a claim the request is
cancelled on their word, as the page's Dismiss cancels it (`manage.cancel_request`): the
run never resumes, and nothing it asked about is done.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from interlock import access, errors, manage
from interlock.caller import Caller
from interlock.channels import (
    DISMISS,
    DISMISSED_CHOSEN,
    EDIT,
    FORM,
    GROUP_CHOICES,
    NOTHING_DONE,
    Link,
    Tap,
    answer_for,
    form_answer,
    group_answers,
    interrupt_for,
    outcome_text,
)
from interlock.ports import Stores
from interlock.records import RequestRecord, fresh_secret, unanswerable

if TYPE_CHECKING:  # the Strands side: only `apply_tap` runs an agent
    from interlock.answers import Reply
    from interlock.deps import Runtime

logger = logging.getLogger(__name__)

TapOutcome = Literal["applied", "already_answered", "ended", "refused", "unknown", "busy"]

NOT_YOURS_TO_DISMISS = "Only the person who asked can dismiss this card."
DISMISSED = f"Dismissed: {NOTHING_DONE}."


@dataclass(frozen=True, slots=True)
class TapResult:
    """What became of a tap, and what the tapper is told."""

    outcome: TapOutcome
    text: str


@dataclass(frozen=True, slots=True)
class Screened:
    """A tap that passed the checks: the request, the interrupt and who answers."""

    request: RequestRecord
    interrupt_id: str
    link: Link


def screen_tap(stores: Stores, tap: Tap, now_ms: int) -> TapResult | Screened:
    """Steps 1 and 2: the card is open, and the tapper may answer it."""
    request = stores.requests.get(tap.chat_id, now_ms)
    interrupt_id = interrupt_for(request, tap.fingerprint) if request else None
    if request is None or interrupt_id is None:
        return TapResult("unknown", "This card is no longer open.")
    # Who taps before what became of the card: another user's account learns nothing
    # of it, not even how it was answered (`interlock.access`).
    link = stores.channels.linked(tap.channel, tap.external_id)
    if link is None:
        return TapResult(
            "refused", "Your account is not linked to Interlock: ask an administrator to link it."
        )
    dismissing = tap.choice == DISMISS
    if dismissing and link.user_id != request.user_id:
        # Only the request's own user sets it aside, as on the card page (one it was
        # rerouted to may answer it, not cancel it); said before anything of its state.
        return TapResult("refused", NOT_YOURS_TO_DISMISS)
    if not access.may_answer(Caller(link.user_id, link.roles), request):
        return TapResult("refused", "This card is not yours to answer.")
    problem = unanswerable(request, interrupt_id, now_ms)
    if isinstance(problem, errors.AlreadyAnswered):
        done = problem.current
        said = outcome_text(done.decision, None, done.answered_at, "")
        return TapResult("already_answered", f"Already answered: {said}.")
    if dismissing and isinstance(problem, errors.RequestCancelled):
        if request.ended_reason == manage.CANCELLED_BY_USER:
            return TapResult("ended", f"Already dismissed: {NOTHING_DONE}.")
        return TapResult("ended", f"This card can no longer be dismissed: {problem}.")
    if isinstance(problem, errors.RequestCancelled | errors.RequestExpired):
        verb = "dismissed" if dismissing else "answered"
        return TapResult("ended", f"This card can no longer be {verb}: {problem}.")
    if problem is not None and not isinstance(problem, errors.ResumeInProgress):
        return TapResult("unknown", "This card is no longer open.")
    if isinstance(problem, errors.ResumeInProgress):
        return TapResult("busy", "Someone is answering this card right now.")
    if len(request.asked) > 1 and tap.choice not in GROUP_CHOICES and not dismissing:
        # One answer cannot resume a run that paused on several: they go together.
        return TapResult(
            "refused", "This card is one of several asked together: answer them all at once."
        )
    return Screened(request, interrupt_id, link)


def apply_tap(rt: Runtime, tap: Tap) -> TapResult:
    """All three steps; the tapper is told the outcome (through `rt.notifier`)."""
    result = _apply(rt, tap)
    if rt.notifier is not None:
        rt.notifier.tell(tap, result.text)
    return result


def _apply(rt: Runtime, tap: Tap) -> TapResult:
    from interlock.answers import decide_all
    from interlock.resume import binding_conflict, resume_turn

    now = rt.clock.now_ms()
    screened = screen_tap(rt.stores, tap, now)
    if isinstance(screened, TapResult):
        return screened
    if tap.choice == DISMISS:
        return _dismiss(rt, screened, tap)
    request, link = screened.request, screened.link
    try:
        first, *more = _replies(screened, tap)
        # A different answer to one already acted on is refused before anything changes.
        conflict = binding_conflict(request, decide_all(request, [first, *more]))
        if conflict is not None:
            raise conflict
        secret, secret_hash = fresh_secret()
        rt.stores.requests.rotate_secret(request, "chat", secret_hash, now)
        result = resume_turn(
            rt,
            Caller(link.user_id, link.roles),
            tap.chat_id,
            interrupt_id=first.interrupt_id,
            secret=secret,
            status=first.status,
            payload=first.payload,
            more=more,
            source=tap.channel,
        )
    except errors.InvalidInput as bad:
        return TapResult("refused", f"That answer does not fit the card: {bad}")
    except errors.DecisionBinding as binding:
        return TapResult("already_answered", f"Already decided: {binding}.")
    except errors.ResumeInProgress:
        return TapResult("busy", "Someone is answering this card right now.")
    except errors.SecretRefused:
        # Another answer rotated the secret in between: whatever it was, it came first.
        again = screen_tap(rt.stores, tap, rt.clock.now_ms())
        if isinstance(again, TapResult):
            return again
        return TapResult("busy", "Someone is answering this card right now.")
    except (errors.RequestExpired, errors.RequestCancelled) as ended:
        return TapResult("ended", f"This card can no longer be answered: {ended}.")
    except errors.InterlockError as failed:
        logger.warning("tap failed: %s", failed.code)
        return TapResult("refused", f"The answer could not be applied ({failed.code}).")
    if result.outcome == "replayed":
        said = outcome_text(result.decision, None, result.answered_at, "")
        return TapResult("already_answered", f"Already answered: {said}.")
    return TapResult("applied", f"Thanks: {outcome_text(result.decision, None, None, '')}.")


def _dismiss(rt: Runtime, screened: Screened, tap: Tap) -> TapResult:
    """Cancel the screened request on its user's word, as the card page's Dismiss does
    (`manage.cancel_request`: what a dead claim granted is withdrawn, the user's slot
    freed and the trail's `cancelled` event written, in one transaction), then edit
    every post of it to say it was dismissed, by whom and where."""
    link = screened.link
    try:
        cancelled = manage.cancel_request(
            rt.stores,
            Caller(link.user_id, link.roles),
            tap.chat_id,
            rt.clock.now_ms(),
            rt.config.version,
        )
    except errors.DecisionBinding as binding:
        return TapResult("already_answered", f"Already decided: {binding}.")
    except (errors.RequestExpired, errors.RequestCancelled) as ended:
        return TapResult("ended", f"This card can no longer be dismissed: {ended}.")
    except errors.Forbidden:
        return TapResult("refused", NOT_YOURS_TO_DISMISS)
    except (errors.AlreadyAnswered, errors.ResumeInProgress, errors.UnknownRequest):
        # It changed since it was screened (answered, or being answered): say what it is.
        again = screen_tap(rt.stores, tap, rt.clock.now_ms())
        if isinstance(again, TapResult):
            return again
        return TapResult("busy", "Someone is answering this card right now.")
    except errors.InterlockError as failed:
        logger.warning("dismiss failed: %s", failed.code)
        return TapResult("refused", f"The card could not be dismissed ({failed.code}).")
    if rt.notifier is not None:
        rt.notifier.settled(
            tap.chat_id,
            cancelled.interrupt_ids,
            "dismissed",
            link.user_id,
            tap.channel,
            DISMISSED_CHOSEN,
        )
    return TapResult("applied", DISMISSED)


def _replies(screened: Screened, tap: Tap) -> list[Reply]:
    """The resume entries a tap stands for: one card's answer, or every card's.

    Raises:
        InvalidInput: a button or form the card has not, or an answer left empty.
    """
    # The answer rules (pydantic) load here, after the acknowledgement: the channels
    # function screens taps with this module and must not pay for them at cold start.
    from interlock.answers import Reply

    request = screened.request
    if tap.choice in GROUP_CHOICES:
        given = group_answers(request, tap.choice or "", tap.payload or {})
        return [Reply(interrupt_id, tap.status, payload) for interrupt_id, payload in given]
    card = request.card
    # The change-and-approve form answers with what was typed in it; its button pressed
    # alone carries nothing to approve (`answer_for` refuses it).
    typed = tap.choice == FORM or (tap.choice == EDIT and tap.payload is not None)
    payload = (
        form_answer(card, tap.payload or {}, tap.choice or FORM)
        if typed
        else answer_for(card, tap.choice or "")
    )
    return [Reply(screened.interrupt_id, tap.status, payload)]
