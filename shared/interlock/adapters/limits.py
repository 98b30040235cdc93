"""Per-user limits: concurrency slots, a daily budget, and short windows' budgets.

Slots are leased, not counted: each slot carries its holder and an expiry, so a worker
killed mid-turn frees its slot when the lease runs out instead of leaking it. All of a
user's slots (both pools: running turns and open requests) and the daily budget are
attributes of one item, `USER#<user>` / `SLOTS`: one per slot (`SLOT2`, `ASK17`: the
holder and its expiry) and one for the day's spend (`B20261204`), each taken, given
back or spent under its own condition. So a turn's slot and its budget unit, a pause's
slot swap, or a finish's two releases write the item once (`merging` joins the entries
of one transaction that write it; `judged` tells which of them a refusal was about).
The minute's budget of new requests is two attributes of the item too: the minute
(`opened_minute`) and how many were opened in it (`opened_count`). An update cannot
choose between starting a minute and counting on in one, so it is offered as entries
to try in turn (`rate_entries`): the one that lost its condition is followed by the
other, until a refusal can only mean that the minute's budget is spent.
"""

from __future__ import annotations

import datetime
import hashlib
from typing import Any, Final

from interlock import keys
from interlock.adapters.dynamo import (
    ConditionFailed,
    DynamoDBClient,
    again_on_conflict,
    best_effort,
    expression,
    from_item,
    judged,
    to_item,
    translated,
)
from interlock.errors import LimitExceeded
from interlock.ports import Entry, Role
from interlock.timing import DAY_S, SNAPSHOT_LIFECYCLE_DAYS

# The slots item outlives every hold (an open request's lasts at most as long as its
# snapshot): each take sets its TTL this far ahead, so a later, shorter take never
# brings the deletion before an earlier, longer hold ends.
_SLOTS_KEPT_S: Final = (SNAPSHOT_LIFECYCLE_DAYS + 1) * DAY_S
# A slot is free, lapsed, or already this holder's (taking it again renews it).
# No clock margin: a slot taken up to `timing.CLOCK_SKEW_MS` early only lets a user
# hold one more for those seconds (a count, not work), and its release names its holder.
_TAKEABLE: Final = (
    "attribute_not_exists(#slot) OR #slot.#until <= :now_ms OR #slot.#holder = :holder"
)
_HELD_BY: Final = "#slot.#holder = :holder"
# Each spend clears the days before it, as far back as the item can live without a
# write (its TTL, then DynamoDB's delay in deleting it): an older day's attribute
# could only be left by a user gone longer than that, whose item is gone with it.
_BUDGET_DAYS_CLEARED: Final = 14
# The users whose minute a store remembers, at most (its guess of which entry holds).
_OPENED_KEPT: Final = 10_000
# The minute new requests were last opened in (minutes since the epoch), and how many.
OPENED_MINUTE: Final = "opened_minute"
OPENED_COUNT: Final = "opened_count"


class LimitStore:
    """Reserve and release concurrency slots; spend a daily and a per-minute budget.

    Args:
        client: A boto3 DynamoDB client.
        table_name: The Interlock table.
    """

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name
        # The minute each user last opened a request through this store: which of the
        # two rate entries is likelier to hold (a guess; the other follows if it loses).
        self._opened: dict[str, int] = {}

    def reserve_slot(
        self,
        user_id: str,
        holder: str,
        *,
        cap: int,
        hold_ms: int,
        now_ms: int,
        pool: str = "SLOT",
    ) -> int:
        """Hold one of the user's `cap` slots until released or `hold_ms` passes.

        Each slot is taken by one conditional update of its own attribute (free,
        lapsed, or already this holder's), so concurrent reservations never retry
        against each other: they only move on to the next slot. Returns the slot's
        number, for `release_slot`. Raises `LimitExceeded` when every slot is held.
        """
        first = int(hashlib.sha256(holder.encode()).hexdigest(), 16) % cap
        for offset in range(cap):
            index = (first + offset) % cap
            take = self._take_args(user_id, holder, index, pool, now_ms, hold_ms)
            try:
                self._update("reserve slot", take)
            except ConditionFailed:
                continue
            return index
        raise LimitExceeded(f"all {cap} concurrent slots are in use")

    def release_slot(self, user_id: str, holder: str, index: int, pool: str = "SLOT") -> None:
        """Give the slot back, if this holder still has it (idempotent)."""
        try:
            self._update("release slot", self._release_args(user_id, holder, index, pool))
        except ConditionFailed:
            return  # lapsed and taken by someone else, or never held

    def release_entry(self, user_id: str, holder: str, index: int, pool: str = "SLOT") -> Entry:
        """`release_slot` as a best-effort entry of another write's transaction, so a run
        gives its slot back in its last write instead of a call of its own."""
        release = {"Update": self._release_args(user_id, holder, index, pool)}
        name = keys.slot_attribute(index, pool)
        return Entry(
            Role.RELEASE,
            best_effort(judged(release, lambda old: _holder(old, name) != holder)),
        )

    def slot_entry(
        self,
        user_id: str,
        holder: str,
        index: int,
        *,
        hold_ms: int,
        now_ms: int,
        pool: str = "SLOT",
    ) -> Entry:
        """Taking slot `index` (free, lapsed or already this holder's) as an entry of
        another write's transaction; refused (`EntryRefused`) when someone else holds it."""
        take = {"Update": self._take_args(user_id, holder, index, pool, now_ms, hold_ms)}
        name = keys.slot_attribute(index, pool)

        def refuses(old: dict[str, Any]) -> bool:
            slot = old.get(name)
            return slot is not None and slot["until"] > now_ms and slot["holder"] != holder

        return Entry(Role.SLOT, judged(take, refuses))

    def _take_args(
        self, user_id: str, holder: str, index: int, pool: str, now_ms: int, hold_ms: int
    ) -> dict[str, Any]:
        values = {
            ":holder": holder,
            ":now_ms": now_ms,
            ":slot": {"holder": holder, "until": now_ms + hold_ms},
            ":ttl": now_ms // 1000 + _SLOTS_KEPT_S,
        }
        return self._on_slots(
            user_id,
            condition=_TAKEABLE,
            update="SET #slot = :slot, #ttl = :ttl",
            values=values,
            names={"#slot": keys.slot_attribute(index, pool)},
        )

    def _release_args(self, user_id: str, holder: str, index: int, pool: str) -> dict[str, Any]:
        return self._on_slots(
            user_id,
            condition=_HELD_BY,
            update="REMOVE #slot",
            values={":holder": holder},
            names={"#slot": keys.slot_attribute(index, pool)},
        )

    def spend(self, user_id: str, day: str, amount: int, *, cap: int) -> int:
        """Add `amount` to the user's spend for `day`, refusing to pass `cap`."""
        if amount > cap:
            raise LimitExceeded("the request alone exceeds the daily budget")
        try:
            spend = {"ReturnValues": "UPDATED_NEW", **self._spend_args(user_id, day, amount, cap)}
            response = self._update("spend budget", spend)
        except ConditionFailed:
            raise LimitExceeded(f"the daily budget of {cap} is spent") from None
        return int(from_item(response["Attributes"])[_spent_on(day)])

    def spend_entry(self, user_id: str, day: str, amount: int, *, cap: int) -> Entry:
        """`spend` as an entry of another write's transaction (refused, `EntryRefused`,
        when it would pass `cap`)."""
        if amount > cap:
            raise LimitExceeded("the request alone exceeds the daily budget")
        update = {"Update": self._spend_args(user_id, day, amount, cap)}
        spent = _spent_on(day)
        return Entry(Role.BUDGET, judged(update, lambda old: old.get(spent, 0) > cap - amount))

    def _spend_args(self, user_id: str, day: str, amount: int, cap: int) -> dict[str, Any]:
        # The days before it go (bare names, letters and digits), so the item keeps one.
        stale = _days_before(day)
        update = "ADD #spent :amount" + (f" REMOVE {', '.join(stale)}" if stale else "")
        return self._on_slots(
            user_id,
            condition="attribute_not_exists(#spent) OR #spent <= :room",
            update=update,
            values={":room": cap - amount, ":amount": amount},
            names={"#spent": _spent_on(day)},
        )

    def refund(self, user_id: str, day: str, amount: int) -> None:
        """Give back `amount` of a day's spend for a request refused before it ran (a day
        with nothing spent has nothing to give back)."""
        refund = self._on_slots(
            user_id,
            condition="attribute_exists(#spent)",
            update="ADD #spent :minus",
            values={":minus": -amount},
            names={"#spent": _spent_on(day)},
        )
        try:
            self._update("refund budget", refund)
        except ConditionFailed:
            return

    def _on_slots(
        self,
        user_id: str,
        *,
        condition: str,
        update: str,
        values: dict[str, Any],
        names: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The arguments of one conditional update of the user's item."""
        written = expression(condition=condition, update=update, values=values, names=names)
        return {"TableName": self._table, "Key": _slots_key(user_id), **written}

    def _update(self, action: str, args: dict[str, Any]) -> dict[str, Any]:
        """One conditional update of the user's item, sent again while a transaction in
        flight holds the item (every transition of the user's turns writes it)."""

        def send() -> dict[str, Any]:
            with translated(action):
                return dict(self._client.update_item(**args))

        return again_on_conflict(send)

    def rate_entries(
        self, user_id: str, minute: int, amount: int, *, cap: int
    ) -> tuple[Entry, ...]:
        """Spending `amount` of the user's budget of new requests for `minute` (minutes
        since the epoch), as entries of another write's transaction to try in turn until
        one holds: one starts the minute (refused when it has begun), the other counts on
        in it (refused when it has not, or when it would pass `cap`). The last refusal
        means the budget is spent: a refused start means the minute has begun, so a
        count after it is refused only when full; a count tried first is tried again
        after the start, in case another writer began the minute in between. Each
        sets no TTL: it rides with the open-request slot's take, which does."""
        if amount > cap:
            raise LimitExceeded("the request alone exceeds the budget")
        names = {"#minute": OPENED_MINUTE, "#count": OPENED_COUNT}
        starts = self._on_slots(
            user_id,
            condition="attribute_not_exists(#minute) OR #minute < :minute",
            update="SET #minute = :minute, #count = :amount",
            values={":minute": minute, ":amount": amount},
            names=names,
        )
        # A minute later than this writer's (another writer's clock ran ahead) is
        # counted in, not started again.
        counts = self._on_slots(
            user_id,
            condition="#minute >= :minute AND #count <= :room",
            update="ADD #count :amount",
            values={":minute": minute, ":room": cap - amount, ":amount": amount},
            names=names,
        )

        def begun(old: dict[str, Any]) -> bool:
            return int(old.get(OPENED_MINUTE, minute - 1)) >= minute

        def full(old: dict[str, Any]) -> bool:
            return not begun(old) or int(old.get(OPENED_COUNT, 0)) > cap - amount

        start = Entry(Role.BUDGET, judged({"Update": starts}, begun))
        count = Entry(Role.BUDGET, judged({"Update": counts}, full))
        counting = self._opened.get(user_id) == minute
        if len(self._opened) >= _OPENED_KEPT:
            self._opened.clear()  # only a guess: forgetting costs at most a refused try
        self._opened[user_id] = minute
        return (count, start, count) if counting else (start, count)


def _slots_key(user_id: str) -> dict[str, Any]:
    return to_item({"pk": keys.user_pk(user_id), "sk": keys.SLOTS_SK})


def _holder(item: dict[str, Any], name: str) -> str | None:
    slot = item.get(name)
    return slot["holder"] if isinstance(slot, dict) else None


def _spent_on(day: str) -> str:
    """The attribute holding a day's spend: `B20261204` for `2026-12-04`."""
    return "B" + day.replace("-", "")


def _days_before(day: str) -> list[str]:
    """The spend attributes of the `_BUDGET_DAYS_CLEARED` days before `day` (none for a
    day that is not a date)."""
    try:
        date = datetime.date.fromisoformat(day)
    except ValueError:
        return []
    earlier = (date - datetime.timedelta(days=n) for n in range(1, _BUDGET_DAYS_CLEARED + 1))
    return [_spent_on(d.isoformat()) for d in earlier]
