"""Per-user limits: concurrency slots and a daily budget.

Slots are leased, not counted: each holder is stored with its own expiry, so a worker
killed mid-turn frees its slot when the lease runs out instead of leaking it forever.
"""

from __future__ import annotations

import time
from typing import Any

from interlock import keys
from interlock.adapters.dynamo import (
    ConditionFailed,
    DynamoDBClient,
    expression,
    from_item,
    to_item,
    translated,
)
from interlock.errors import LimitExceeded, StoreError

_RETRIES = 8


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
        self, user_id: str, holder: str, *, cap: int, hold_ms: int, now_ms: int
    ) -> None:
        """Hold one of the user's `cap` slots until released or `hold_ms` passes.

        Read, prune lapsed holders, write back conditional on the version read; a
        concurrent change retries. Raises `LimitExceeded` when all slots are live.
        """
        key = _key(user_id, keys.SLOTS_SK)
        for attempt in range(_RETRIES):
            row = self._get(key)
            live = {h: exp for h, exp in row.get("holders", {}).items() if exp > now_ms}
            if holder not in live and len(live) >= cap:
                raise LimitExceeded(f"all {cap} concurrent slots are in use")
            live[holder] = now_ms + hold_ms
            seen = row.get("version", 0)
            try:
                with translated("reserve slot"):
                    self._client.update_item(
                        TableName=self._table,
                        Key=key,
                        **expression(
                            condition="attribute_not_exists(#version) OR #version = :seen",
                            update="SET #holders = :holders, #version = :next",
                            values={":seen": seen, ":next": seen + 1, ":holders": live},
                        ),
                    )
                return
            except ConditionFailed:
                time.sleep(0.005 * (attempt + 1))  # another reservation won; read again
        raise StoreError("reserve slot failed: too much contention")

    def release_slot(self, user_id: str, holder: str) -> None:
        """Give the slot back (idempotent)."""
        try:
            with translated("release slot"):
                self._client.update_item(
                    TableName=self._table,
                    Key=_key(user_id, keys.SLOTS_SK),
                    **expression(
                        condition="attribute_exists(#holders)",
                        update="REMOVE #holders.#holder",
                        values={},
                        names={"#holder": holder},
                    ),
                )
        except ConditionFailed:
            return  # nothing was ever reserved

    def spend(self, user_id: str, day: str, amount: int, *, cap: int, ttl: int) -> int:
        """Add `amount` to the user's spend for `day`, refusing to pass `cap`."""
        if amount > cap:
            raise LimitExceeded("the request alone exceeds the daily budget")
        try:
            with translated("spend budget"):
                response = self._client.update_item(
                    TableName=self._table,
                    Key=_key(user_id, keys.budget_sk(day)),
                    ReturnValues="UPDATED_NEW",
                    **expression(
                        condition="attribute_not_exists(#used) OR #used <= :room",
                        update="ADD #used :amount SET #ttl = :ttl",
                        values={":room": cap - amount, ":amount": amount, ":ttl": ttl},
                    ),
                )
        except ConditionFailed:
            raise LimitExceeded(f"the daily budget of {cap} is spent") from None
        return int(from_item(response["Attributes"])["used"])

    def _get(self, key: dict[str, Any]) -> dict[str, Any]:
        with translated("read limits"):
            response = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        return from_item(response.get("Item", {}))


def _key(user_id: str, sk: str) -> dict[str, Any]:
    return to_item({"pk": keys.user_pk(user_id), "sk": sk})
