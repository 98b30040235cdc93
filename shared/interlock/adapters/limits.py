"""Per-user limits: concurrency slots and a daily budget.

Slots are leased, not counted: each slot carries its holder and an expiry, so a worker
killed mid-turn frees its slot when the lease runs out instead of leaking it. All of a
user's slots (both pools: running turns and open requests) are attributes of one item,
`USER#<user>` / `SLOTS`, one per slot (`SLOT2`, `ASK17`: the holder and its expiry), each
taken and given back under its own condition. So a pause that gives its run slot back
and takes an open-request slot, or a finish that gives both back, writes the item once
(`merging` joins the entries of one transaction that write it).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from interlock import keys
from interlock.adapters.dynamo import (
    ConditionFailed,
    DynamoDBClient,
    best_effort,
    expression,
    from_item,
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
_TAKEABLE: Final = (
    "attribute_not_exists(#slot) OR #slot.#until <= :now_ms OR #slot.#holder = :holder"
)
_HELD_BY: Final = "#slot.#holder = :holder"


class LimitStore:
    """Reserve and release concurrency slots; spend a daily budget.

    Args:
        client: A boto3 DynamoDB client.
        table_name: The Interlock table.
    """

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

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
                with translated("reserve slot"):
                    self._client.update_item(**take)
            except ConditionFailed:
                continue
            return index
        raise LimitExceeded(f"all {cap} concurrent slots are in use")

    def release_slot(self, user_id: str, holder: str, index: int, pool: str = "SLOT") -> None:
        """Give the slot back, if this holder still has it (idempotent)."""
        try:
            with translated("release slot"):
                self._client.update_item(**self._release_args(user_id, holder, index, pool))
        except ConditionFailed:
            return  # lapsed and taken by someone else, or never held

    def release_entry(self, user_id: str, holder: str, index: int, pool: str = "SLOT") -> Entry:
        """`release_slot` as a best-effort entry of another write's transaction, so a run
        gives its slot back in its last write instead of a call of its own."""
        release = self._release_args(user_id, holder, index, pool)
        return Entry(Role.RELEASE, best_effort({"Update": release}))

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
        take = self._take_args(user_id, holder, index, pool, now_ms, hold_ms)
        return Entry(Role.SLOT, {"Update": take})

    def _take_args(
        self, user_id: str, holder: str, index: int, pool: str, now_ms: int, hold_ms: int
    ) -> dict[str, Any]:
        values = {
            ":holder": holder,
            ":now_ms": now_ms,
            ":slot": {"holder": holder, "until": now_ms + hold_ms},
            ":ttl": now_ms // 1000 + _SLOTS_KEPT_S,
        }
        return {
            "TableName": self._table,
            "Key": _slots_key(user_id),
            **expression(
                condition=_TAKEABLE,
                update="SET #slot = :slot, #ttl = :ttl",
                values=values,
                names={"#slot": keys.slot_attribute(index, pool)},
            ),
        }

    def _release_args(self, user_id: str, holder: str, index: int, pool: str) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "Key": _slots_key(user_id),
            **expression(
                condition=_HELD_BY,
                update="REMOVE #slot",
                values={":holder": holder},
                names={"#slot": keys.slot_attribute(index, pool)},
            ),
        }

    def spend(self, user_id: str, day: str, amount: int, *, cap: int, ttl: int) -> int:
        """Add `amount` to the user's spend for `day`, refusing to pass `cap`."""
        if amount > cap:
            raise LimitExceeded("the request alone exceeds the daily budget")
        try:
            with translated("spend budget"):
                response = self._client.update_item(
                    ReturnValues="UPDATED_NEW", **self._spend_args(user_id, day, amount, cap, ttl)
                )
        except ConditionFailed:
            raise LimitExceeded(f"the daily budget of {cap} is spent") from None
        return int(from_item(response["Attributes"])["used"])

    def spend_entry(self, user_id: str, day: str, amount: int, *, cap: int, ttl: int) -> Entry:
        """`spend` as an entry of another write's transaction (refused, `EntryRefused`,
        when it would pass `cap`)."""
        if amount > cap:
            raise LimitExceeded("the request alone exceeds the daily budget")
        return Entry(Role.BUDGET, {"Update": self._spend_args(user_id, day, amount, cap, ttl)})

    def _spend_args(
        self, user_id: str, day: str, amount: int, cap: int, ttl: int
    ) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "Key": _key(user_id, keys.budget_sk(day)),
            **expression(
                condition="attribute_not_exists(#used) OR #used <= :room",
                update="ADD #used :amount SET #ttl = :ttl",
                values={":room": cap - amount, ":amount": amount, ":ttl": ttl},
            ),
        }

    def refund(self, user_id: str, day: str, amount: int) -> None:
        """Give back `amount` of a day's spend for a request refused before it ran (a day
        with nothing spent has nothing to give back)."""
        try:
            with translated("refund budget"):
                self._client.update_item(
                    TableName=self._table,
                    Key=_key(user_id, keys.budget_sk(day)),
                    **expression(
                        condition="attribute_exists(#used)",
                        update="ADD #used :minus",
                        values={":minus": -amount},
                    ),
                )
        except ConditionFailed:
            return


def _key(user_id: str, sk: str) -> dict[str, Any]:
    return to_item({"pk": keys.user_pk(user_id), "sk": sk})


def _slots_key(user_id: str) -> dict[str, Any]:
    return _key(user_id, keys.SLOTS_SK)
