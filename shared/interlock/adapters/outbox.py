"""The outbox: side effects recorded once per idempotency key.

A tool with an outside side effect records it here before it leaves the process, under
a key that is stable across takeovers (the journal replays the tool call's id). The row
is written in one transaction with the writer's fence, so a worker that lost its claim
records (and so sends) nothing; a retaken run finds the row and does not send again.
"""

from __future__ import annotations

import json
from typing import Any

from interlock import keys
from interlock.adapters.dynamo import (
    Cancelled,
    DynamoDBClient,
    expression,
    from_item,
    put_new,
    to_item,
    translated,
)
from interlock.adapters.fencing import fenced
from interlock.records import Fence


class Outbox:
    """Put-once records of side effects.

    Args:
        client: A boto3 DynamoDB client.
        table_name: The Interlock table.
        retention_s: How long a record is kept (its `ttl`).
    """

    def __init__(self, client: DynamoDBClient, table_name: str, retention_s: int) -> None:
        self._client = client
        self._table = table_name
        self._retention_s = retention_s

    def put_once(
        self, key: str, payload: dict[str, Any], now_ms: int, fence: Fence | None = None
    ) -> bool:
        """Record the side effect under `key`; True only for the call that wrote it.

        With `fence`, the row is written only while the fence is held (else `LeaseLost`).
        """
        item = {
            "pk": keys.outbox_pk(key),
            "sk": keys.OUTBOX_SK,
            "payload": json.dumps(payload, separators=(",", ":"), sort_keys=True),
            "at_ms": now_ms,
            "ttl": now_ms // 1000 + self._retention_s,
        }
        put = {
            "TableName": self._table,
            "Item": to_item(item),
            **expression(condition="attribute_not_exists(#pk)", values={}),
        }
        if fence is not None:
            try:
                fenced(self._client, self._table, fence, [{"Put": put}], "outbox put", effect=True)
            except Cancelled:
                return False
            return True
        return put_new(self._client, self._table, item, "outbox put")

    def get(self, key: str) -> dict[str, Any] | None:
        """The payload recorded under `key`, if any."""
        with translated("outbox read"):
            response = self._client.get_item(
                TableName=self._table,
                Key=to_item({"pk": keys.outbox_pk(key), "sk": keys.OUTBOX_SK}),
                ConsistentRead=True,
            )
        item = response.get("Item")
        return json.loads(from_item(item)["payload"]) if item else None
