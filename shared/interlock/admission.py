"""Admission and limits: who may start a turn or open a request, and how many.

- `admitted`: one running turn per chat, with its slot and budget, by one conditional
  transaction.
- `reserved`: a concurrency slot and a unit of daily budget for the length of a resume.
- `ask_slots` / `release_ask_slot`: backpressure on how many requests a user has open.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from interlock import errors
from interlock.audit import audit, audit_entry
from interlock.caller import Caller
from interlock.deps import Runtime
from interlock.keys import ASK_POOL
from interlock.ports import Entry, EntryRefused, Role
from interlock.records import ChatMeta, RequestRecord, TurnFence, given_up_cause
from interlock.tokens import new_token

T = TypeVar("T")
TOO_MANY_OPEN: Final = (
    "I need a decision from you to go on, but you have too many open requests (or opened "
    "them too quickly). Answer or cancel some, then ask again."
)


class PauseRefused(Exception):
    """The pause cannot be offered; the turn ends with `message` instead of a card."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@contextmanager
def admitted(
    rt: Runtime,
    caller: Caller,
    seen: ChatMeta,
    prompt: str,
    now_ms: int,
    *,
    request_settled: bool = False,
) -> Iterator[tuple[TurnFence, int, Held]]:
    """Start a turn: save the prompt and take the chat's running-turn lease, a
    concurrency slot and a unit of daily budget, in one transaction, or refuse.

    The refusal comes from the write itself, so of two turns submitted at once, or two
    users racing for a new chat, exactly one is admitted and the other hears why; a
    refused turn spent nothing. The slot is given back when the block ends, unless the
    turn's last write already did. `request_settled`: the read behind `seen` found no
    open request (see `TurnPort.admit`).

    A turn's events are written by its end (`paused`, `turn_completed`, `turn_failed`,
    each naming the turn; the prompt's row holds when it began), so the admission writes
    one only when it takes the chat from a turn whose lease lapsed with no end written:
    `turn_lapsed`, so a worker's death still shows in the trail.

    Raises:
        ChatBusy, Forbidden, TurnRunning: the chat cannot take the turn.
        LimitExceeded: every slot is held, or the day's budget is spent.
    """
    lapsed = (
        [audit_entry(rt, caller, seen.chat_id, "turn_lapsed", turn=seen.last_turn)]
        if seen.run_token is not None
        else []
    )
    turn = {"role": "user", "text": prompt}

    def admit(reservation: list[Entry]) -> tuple[TurnFence, int]:
        return rt.stores.turns.admit(
            seen,
            caller.user_id,
            turn,
            now_ms,
            rt.limits.run_lease_ms,
            also=[*reservation, *lapsed],
            request_settled=request_settled,
        )

    with reserved_in(rt, caller, admit) as ((fence, seq), held):
        yield fence, seq, held


@contextmanager
def reserved_in(
    rt: Runtime, caller: Caller, write: Callable[[list[Entry]], T]
) -> Iterator[tuple[T, Held]]:
    """`reserved`, with the slot and the budget unit taken by `write`'s own transaction.

    `write(reservation)` must commit the two entries of `reservation` (a slot and the
    budget unit) with its own change, or raise `EntryRefused` naming the one that lost:
    the next slot is tried when the slot was held, `LimitExceeded` is raised when the
    budget is spent. A refused write spent nothing. Yields what `write`
    returned and the slot, given back at the end of the block unless the run's last
    write already did (`Held.released`).
    """
    limits, user = rt.limits, caller.user_id
    now = rt.clock.now_ms()
    holder = new_token()
    spend = rt.stores.limits.spend_entry(user, _day(now), 1, cap=limits.daily_turns)
    for index in slot_order(holder, limits.max_concurrent):
        slot = rt.stores.limits.slot_entry(
            user, holder, index, hold_ms=limits.slot_hold_ms, now_ms=now
        )
        try:
            written = write([slot, spend])
        except EntryRefused as refused:
            if refused.role is Role.SLOT:
                continue  # that slot is held: the next one
            if refused.role is Role.BUDGET:
                raise errors.LimitExceeded(
                    f"the daily budget of {limits.daily_turns} is spent"
                ) from None
            # No other entry of these writes has a condition of its own: say which one.
            raise errors.StoreError(f"the write was refused by its {refused.role} entry") from None
        held = Held(user, holder, index)
        try:
            yield written, held
        finally:
            if not held.released:
                rt.stores.limits.release_slot(user, holder, index)
        return
    raise errors.LimitExceeded(f"all {limits.max_concurrent} concurrent slots are in use")


def slot_order(holder: str, cap: int) -> list[int]:
    """The order in which `holder` tries the `cap` slots: from one its hash picks, so
    concurrent holders spread out instead of all contending for the first."""
    first = int(hashlib.sha256(holder.encode()).hexdigest(), 16) % cap
    return [(first + offset) % cap for offset in range(cap)]


@dataclass
class Held:
    """A run's concurrency slot: given back by the run's last write when it can ride in
    it (`riders`, then `released`), else when the run's block ends."""

    user_id: str
    holder: str
    index: int
    released: bool = False

    def riders(self, rt: Runtime) -> list[Entry]:
        """The slot's release, as a best-effort entry of the run's last transaction."""
        return [rt.stores.limits.release_entry(self.user_id, self.holder, self.index)]


@contextmanager
def reserved(rt: Runtime, caller: Caller) -> Iterator[Held]:
    """Hold one concurrency slot and one unit of daily budget for the block.

    The budget unit is given back when the block is refused before anything ran
    (the request was turned away, so it costs nothing). The slot is given back at the
    end of the block unless the run's last write already did (`Held.released`).
    """
    now = rt.clock.now_ms()
    holder = new_token()
    limits = rt.limits
    slot = rt.stores.limits.reserve_slot(
        caller.user_id, holder, cap=limits.max_concurrent, hold_ms=limits.slot_hold_ms, now_ms=now
    )
    held = Held(caller.user_id, holder, slot)
    try:
        day = _day(now)
        rt.stores.limits.spend(caller.user_id, day, 1, cap=limits.daily_turns)
        try:
            yield held
        except (errors.ChatBusy, errors.Forbidden, errors.TurnRunning):
            rt.stores.limits.refund(caller.user_id, day, 1)
            raise
    finally:
        if not held.released:
            rt.stores.limits.release_slot(caller.user_id, holder, slot)


def ask_slot_riders(rt: Runtime, request: RequestRecord) -> list[Entry]:
    """The release of a finished request's open-request slot, as a best-effort entry of
    its finishing transaction."""
    if request.ask_slot is None:
        return []
    return [
        rt.stores.limits.release_entry(
            request.user_id, request.chat_id, request.ask_slot, pool=ASK_POOL
        )
    ]


@dataclass(frozen=True)
class AskSlots:
    """Backpressure on a user's open requests, as entries of the pause's own transaction:
    one unit of the per-minute budget (`spends`: its forms to try in turn, see
    `LimitPort.rate_entries`), and the open-request slots to try in order (`slots`:
    index and entry; the chat is the holder, so a chained request keeps its slot). A
    refused pause spent nothing."""

    spends: tuple[Entry, ...]
    slots: list[tuple[int, Entry]]


def ask_slots(rt: Runtime, caller: Caller, chat_id: str, now: int) -> AskSlots:
    """The backpressure entries of a new pause in `chat_id` (see `AskSlots`)."""
    config, limits = rt.config, rt.stores.limits
    spends = limits.rate_entries(caller.user_id, now // 60_000, 1, cap=config.asks_per_minute)
    expires_at, _ = rt.stores.policy.expiry(now)
    slots = [
        (
            index,
            limits.slot_entry(
                caller.user_id,
                chat_id,
                index,
                hold_ms=expires_at * 1000 - now,
                now_ms=now,
                pool=ASK_POOL,
            ),
        )
        for index in slot_order(chat_id, config.max_open_requests)
    ]
    return AskSlots(spends, slots)


def pause_refused(rt: Runtime, caller: Caller, chat_id: str, exc: Exception) -> PauseRefused:
    """The refusal of a pause that backpressure turned away, audited."""
    audit(rt, caller, chat_id, "pause_refused", reason=str(exc))
    return PauseRefused(TOO_MANY_OPEN)


def release_ask_slot(rt: Runtime, request: RequestRecord) -> None:
    """Free the owner's open-request slot once the request has ended (idempotent)."""
    if request.ask_slot is not None:
        rt.stores.limits.release_slot(
            request.user_id, request.chat_id, request.ask_slot, pool=ASK_POOL
        )


_WITHDRAW_ATTEMPTS: Final = 3


def expire_and_release(
    rt: Runtime, request: RequestRecord, reason: str, now: int, also: Sequence[Entry] = ()
) -> None:
    """Expire an answerable request and, in the same transaction, withdraw any rows an
    earlier (dead) claim granted for its cards (so no withdrawal lands unless the expiry
    does) and write `also` (its trail event); then free its open-request slot."""
    approvals = rt.stores.approvals
    for attempt in range(_WITHDRAW_ATTEMPTS):
        grants = [
            entry
            for asked in request.asked
            if asked.card.get("card_id")
            for entry in approvals.withdraw_entries(
                request.chat_id, request.user_id, asked.card["card_id"]
            )
        ]
        try:
            rt.stores.requests.expire(request, reason, now, also=[*grants, *also])
            break
        except EntryRefused:
            # A row was stamped anew between the read and the write: read them again.
            if attempt == _WITHDRAW_ATTEMPTS - 1:
                raise
    release_ask_slot(rt, request)
    if rt.notifier is not None:
        # Its posts say it can no longer be answered, and why, instead of offering buttons:
        # given up, for one whose retries ran out, never the answer it did not carry out.
        cause = given_up_cause(reason)
        outcome, why = ("expired", reason) if cause is None else ("given_up", cause)
        rt.notifier.settled(request.chat_id, request.interrupt_ids, outcome, None, why)


def give_up(
    rt: Runtime, request: RequestRecord, reason: str, now: int, actor: Caller, **detail: Any
) -> None:
    """End `request` because its retries ran out (`reason`, from `records.given_up`):
    expired with that reason, what a dead claim granted withdrawn, and its `given_up`
    event on the trail (with `detail`), all in one write, whichever path gave it up;
    its channel posts then say it was given up."""
    event = audit_entry(
        rt,
        actor,
        request.chat_id,
        "given_up",
        interrupt_id=request.interrupt_id,
        kind=request.kind,
        reason=reason,
        decision=request.decision,
        claims=request.claim_count,
        stalls=request.stalls,
        failures=request.failures,
        **detail,
    )
    expire_and_release(rt, request, reason, now, also=[event])


def _day(now_ms: int) -> str:
    return datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC).strftime("%Y-%m-%d")
