"""The pause protocol: snapshot first, pointer second, card last.

If the snapshot cannot be stored, no pointer is written and no card may be shown: the
worst case is a missing offer, never a card that points at nothing. A small snapshot
is written inside the pointer itself, so the two land together. The snapshot's key
names the writer's fence and its digest is recorded on the pointer, so a worker that
lost its claim can never swap the snapshot a card resumes from.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from strands.agent.agent_result import AgentResult
from strands.interrupt import Interrupt

from interlock import errors
from interlock.admission import AskSlots, PauseRefused, ask_slots, pause_refused
from interlock.answers import kind_of
from interlock.audit import audit, audit_entry
from interlock.caller import Caller
from interlock.deps import Runtime
from interlock.harness.agent import BuiltAgent
from interlock.harness.snapshot import paused_batch, paused_batch_tools, take_snapshot
from interlock.interrupts import foreign_card, guards_call, is_own, tool_use_id_of
from interlock.notify import NOTIFY_HOLD_MS
from interlock.outcomes import Offer
from interlock.ports import Entry, EntryRefused, Role, Stores
from interlock.records import Asked, Kind, RequestRecord, TurnFence, new_request

logger = logging.getLogger(__name__)

PAUSE_FAILED: Final = (
    "I need a decision from you to go on, but this run could not be saved to wait for "
    "it, so I stopped here. Please ask again."
)
UNATTENDED: Final = (
    "This run needs a person's answer to go on, but nobody can answer in this run, so it "
    "stopped here without the answer."
)


def persist_pause(
    stores: Stores,
    *,
    chat_id: str,
    user_id: str,
    interrupt_id: str,
    kind: Kind,
    card: dict[str, Any],
    snapshot: dict[str, Any],
    turn_seq: int,
    now_ms: int,
    ttl_s: int | None = None,
    ask_slot: int | None = None,
    owner_roles: tuple[str, ...] = (),
    fence: TurnFence | None = None,
    also_asked: tuple[Asked, ...] = (),
    events: Sequence[Entry] = (),
    asks: AskSlots | None = None,
    notify_due_ms: int | None = None,
) -> Offer:
    """Store the paused agent, then open the chat's request pointing at it.

    With `fence` (the running turn), the pointer is written in one transaction with the
    turn's release, only while the turn still holds the chat. `events` (the pause's
    audit events) commit with the pointer, and so does `asks` (backpressure: its budget
    unit and the first open-request slot that is free, which the request records).
    `notify_due_ms` marks its channel posts as owed (`records.new_request`).

    Raises:
        SnapshotTooLarge: the snapshot is over the limit; nothing was written.
        StoreError: the snapshot PUT failed; no pointer was written.
        ChatBusy: the chat already has an open request.
        LeaseLost: the turn lost the chat; no pointer was written.
        LimitExceeded: `asks` found no free slot, or no budget; nothing was written.
    """
    stored = stores.blobs.put_snapshot(
        chat_id, interrupt_id, snapshot, version=fence.token if fence else None
    )
    fenced = [stores.turns.end_run(fence)] if fence else []
    tries = list(asks.slots if asks else [(ask_slot, None)])
    spends = list(asks.spends if asks else ())
    while tries:
        index, take = tries[0]
        request, secret = new_request(
            stores.policy,
            chat_id=chat_id,
            interrupt_id=interrupt_id,
            kind=kind,
            card=card,
            user_id=user_id,
            turn_seq=turn_seq,
            now_ms=now_ms,
            snapshot=stored,
            ttl_s=ttl_s,
            ask_slot=index,
            owner_roles=owner_roles,
            also_asked=also_asked,
            notify_due_ms=notify_due_ms,
        )
        # Conditional entries first: the first that lost is the one reported.
        backpressure = [spends[0], take] if spends and take else []
        also = [*fenced, *backpressure, *events]
        try:
            stores.requests.open(request, now_ms, also=also or None)
        except EntryRefused as refused:
            if refused.role is Role.SLOT:
                tries.pop(0)
                continue  # that open-request slot is held: the next one
            if refused.role is Role.BUDGET:
                spends.pop(0)
                if spends:
                    continue  # the minute's budget in its next form
                raise errors.LimitExceeded("too many requests opened this minute") from None
            if refused.role is Role.TURN:
                raise errors.LeaseLost("the turn was lost; the request was not opened") from None
            raise errors.LeaseLost("the request was not opened") from None
        return Offer(request, secret, stored.size)
    raise errors.LimitExceeded("too many open requests")


def offer(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    built: BuiltAgent,
    result: AgentResult,
    turn_seq: int,
    *,
    fence: TurnFence | None,
    claim: RequestRecord | None,
    also: Sequence[Entry] = (),
) -> Offer:
    """Persist the pause of a new turn (`fence`) or of a resumed run (`claim`).

    `also` (best-effort bookkeeping, such as the run's slot release) commits with it.

    Raises `PauseRefused` when the pause cannot be offered; the run then ends with an
    ordinary message instead.
    """
    if not result.interrupts:
        raise PauseRefused(PAUSE_FAILED)
    if not caller.can_ask_a_human:
        # Interlock's own tools never ask in an unattended run; a user's tool, hook or
        # intervention may still have: nobody could answer its card, so none is opened.
        audit(rt, caller, chat_id, "pause_failed", reason="unattended")
        raise PauseRefused(UNATTENDED)
    snapshot = take_snapshot(built.agent, {"chat_id": chat_id, "turn_seq": turn_seq})
    batch = paused_batch(snapshot)
    uses = {u["toolUseId"]: u for u in batch}
    try:
        ordered = in_batch_order(result.interrupts, batch)
        asked = [_asked(i, uses, built) for i in ordered]
    except errors.InvalidInput as unshowable:
        logger.warning("chat_id=<%s>, reason=<%s> | interrupt cannot be shown", chat_id, unshowable)
        audit(rt, caller, chat_id, "pause_failed", reason=unshowable.code)
        raise PauseRefused(PAUSE_FAILED) from unshowable
    # The roles check on resume reads which tools the paused batch holds.
    first = Asked(
        asked[0].interrupt_id,
        {**asked[0].card, "batch_tools": paused_batch_tools(snapshot)},
    )
    now = rt.clock.now_ms()
    # The pause's events commit with the request they describe.
    events = [
        audit_entry(
            rt,
            caller,
            chat_id,
            "paused",
            interrupt_id=one.interrupt_id,
            card_id=one.card.get("card_id"),
            kind=kind_of(one.card),
            chained=claim is not None,
            turn=claim.turn_seq if claim is not None else turn_seq,
        )
        for one in asked
    ]
    events = [*events, *also]
    others = tuple(asked[1:])
    if claim is not None:
        return _chained(rt, caller, claim, first, others, snapshot, now, events)
    return _opened(rt, caller, chat_id, first, others, snapshot, turn_seq, now, fence, events)


def in_batch_order(
    interrupts: Sequence[Interrupt], batch: Sequence[Mapping[str, Any]]
) -> list[Interrupt]:
    """The run's interrupts in the order the model called their tools.

    Parallel tools raise theirs in whatever order they happen to run; every surface
    numbers the cards, so the order must not change from one run to the next.
    Interrupts of no tool in the batch (a hook's) follow, in the order they came.
    """
    position = {use["toolUseId"]: at for at, use in enumerate(batch)}
    return sorted(
        interrupts,
        key=lambda i: position.get(tool_use_id_of(i.id) or "", len(position)),
    )


def _asked(interrupt: Interrupt, uses: Mapping[str, Mapping[str, Any]], built: BuiltAgent) -> Asked:
    """The card for one interrupt: Interlock's own tools raise theirs ready-made."""
    if is_own(interrupt.name) and isinstance(interrupt.reason, Mapping):
        card = dict(interrupt.reason)
    else:
        tool_use_id = tool_use_id_of(interrupt.id)
        tool_use = uses.get(tool_use_id) if tool_use_id else None
        card = foreign_card(
            interrupt_id=interrupt.id,
            name=interrupt.name,
            reason=interrupt.reason,
            tool_use=tool_use,
            confirm=guards_call(interrupt.id) and interrupt.name in built.confirm_names,
            editable=built.editable.get(str(tool_use.get("name"))) if tool_use else None,
        )
    return Asked(interrupt.id, {**card, "interrupt_name": interrupt.name})


def _opened(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    first: Asked,
    others: tuple[Asked, ...],
    snapshot: dict[str, Any],
    turn_seq: int,
    now: int,
    fence: TurnFence | None,
    events: Sequence[Entry],
) -> Offer:
    try:
        return persist_pause(
            rt.stores,
            chat_id=chat_id,
            user_id=caller.user_id,
            interrupt_id=first.interrupt_id,
            kind=kind_of(first.card),
            card=first.card,
            snapshot=snapshot,
            turn_seq=turn_seq,
            now_ms=now,
            owner_roles=tuple(caller.roles),
            fence=fence,
            also_asked=others,
            events=events,
            asks=ask_slots(rt, caller, chat_id, now),
            notify_due_ms=_notify_due(rt, now),
        )
    except errors.LimitExceeded as exc:
        raise pause_refused(rt, caller, chat_id, exc) from exc
    except (errors.TooLarge, errors.StoreError) as exc:
        logger.warning("chat_id=<%s>, reason=<%s> | pause could not be saved", chat_id, exc)
        audit(rt, caller, chat_id, "pause_failed", reason=exc.code)
        raise PauseRefused(PAUSE_FAILED) from exc


def _notify_due(rt: Runtime, now_ms: int) -> int | None:
    # With channels to post on, a new request owes its posts until they are reserved.
    if rt.notifier is None or not rt.notifier.channels:
        return None
    return now_ms + NOTIFY_HOLD_MS


def _chained(
    rt: Runtime,
    caller: Caller,
    claim: RequestRecord,
    first: Asked,
    others: tuple[Asked, ...],
    snapshot: dict[str, Any],
    now: int,
    events: Sequence[Entry],
) -> Offer:
    """A second interrupt in a resumed run replaces the claimed request in place.

    A pause that can never be saved (too large) finishes the claim with an ordinary
    message instead of leaving it claimed for the next click to re-run against; a store
    failure is left to the resume's release, so the next answer continues the journal
    and asks again, repeating nothing.
    """
    stores = rt.stores
    try:
        stored = stores.blobs.put_snapshot(
            claim.chat_id, first.interrupt_id, snapshot, version=claim.fence.token
        )
        successor, secret = new_request(
            stores.policy,
            chat_id=claim.chat_id,
            interrupt_id=first.interrupt_id,
            kind=kind_of(first.card),
            card=first.card,
            user_id=claim.user_id,
            turn_seq=claim.turn_seq,
            now_ms=now,
            snapshot=stored,
            ask_slot=claim.ask_slot,
            owner_roles=claim.owner_roles,
            also_asked=others,
            notify_due_ms=_notify_due(rt, now),
        )
        stores.requests.chain(claim, successor, also=list(events))
    except errors.TooLarge as exc:
        audit(rt, caller, claim.chat_id, "pause_failed", reason=exc.code)
        raise PauseRefused(PAUSE_FAILED) from exc
    return Offer(successor, secret, stored.size)
