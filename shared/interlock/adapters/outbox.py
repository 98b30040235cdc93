"""The outbox: side effects recorded once per idempotency key.

A tool with an outside side effect writes here before (or instead of) sending, keyed by
the interrupt id that approved it, so a crashed and retaken resume never sends twice.
"""

from __future__ import annotations

import json
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

    def put_once(self, key: str, payload: dict[str, Any], now_ms: int) -> bool:
        """Record the side effect under `key`; True only for the call that wrote it."""
        item = {
            "pk": keys.outbox_pk(key),
            "sk": keys.OUTBOX_SK,
            "payload": json.dumps(payload, separators=(",", ":"), sort_keys=True),
            "at_ms": now_ms,
            "ttl": now_ms // 1000 + self._retention_s,
        }
        try:
            with translated("outbox put"):
                self._client.put_item(
                    TableName=self._table,
                    Item=to_item(item),
                    **expression(condition="attribute_not_exists(#pk)", values={}),
                )
        except ConditionFailed:
            return False
        return True

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
