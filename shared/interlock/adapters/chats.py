"""Per-chat records: the meta item, saved turns and the audit trail.

Turn numbers come from an atomic counter on the meta item (`ADD`), never from counting
what is there, so two writers can never mint the same number. Event numbers come from a
per-chat counter too, drawn in the very transaction that stores the events
(`interlock.adapters.numbering`), so they follow commit order and an event can still
ride in the transaction of the change it describes.
"""

from __future__ import annotations

import json
from typing import Any

from interlock import keys
from interlock.adapters.dynamo import (
    DynamoDBClient,
    from_item,
    to_item,
    transact,
    translated,
)
from interlock.adapters.fencing import fenced
from interlock.adapters.numbering import event_put, observed
from interlock.ports import Entry, Role
from interlock.records import AuditEvent, ChatMeta, Fence


class ChatStore:
    """Chat meta, turns and audit events.

    Args:
        client: A boto3 DynamoDB client.
        table_name: The Interlock table.
        retention_s: How long turns and events are kept (their `ttl`).
    """

    def __init__(self, client: DynamoDBClient, table_name: str, retention_s: int) -> None:
        self._client = client
        self._table = table_name
        self._retention_s = retention_s

    def meta(self, chat_id: str) -> ChatMeta:
        """The chat's meta item; a chat never written to reads as empty and visible."""
        with translated("read chat"):
            response = self._client.get_item(
                TableName=self._table, Key=_meta_key(chat_id), ConsistentRead=True
            )
        row = from_item(response.get("Item", {}))
        observed(self._table, chat_id, row or None)  # it holds the chat's event counter
        return meta_from_item(chat_id, row)

    def turns(self, chat_id: str, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        """Saved turns with numbers above `after`, oldest first."""
        rows = self._range(chat_id, keys.turn_sk(after + 1), keys.turn_sk(10**10 - 1), limit)
        return [{"seq": r["seq"], "at_ms": r["at_ms"], **json.loads(r["turn"])} for r in rows]

    def record(
        self,
        chat_id: str,
        type: str,
        actor: str,
        now_ms: int,
        *,
        fence: Fence | None = None,
        **detail: Any,
    ) -> AuditEvent:
        """Append an audit event under the chat's next event number: one transaction
        with the chat's counter (`interlock.adapters.numbering`), and with `fence`, only
        while that claim or turn is held (`LeaseLost` otherwise, nothing written)."""
        entry = self.event_entry(chat_id, type, actor, now_ms, **detail)
        if fence is not None:
            fenced(self._client, self._table, fence, [entry.write], "write audit event")
        else:
            transact(self._client, [entry.write], "write audit event", read_back=())
        seq = int(entry.write["Put"]["Item"]["seq"]["N"])
        return AuditEvent(chat_id, seq, type, now_ms, actor, detail)

    def event_entry(self, chat_id: str, type: str, actor: str, now_ms: int, **detail: Any) -> Entry:
        """An audit event as a write for another store's transaction, so the event is
        stored exactly when the change it describes is (and costs no call of its own);
        its number is drawn from the chat's counter as that transaction goes out."""
        body = {"type": type, "at_ms": now_ms, "actor": actor, "detail": _json(detail)}
        item = to_item(
            {"pk": keys.chat_pk(chat_id), **body, "ttl": now_ms // 1000 + self._retention_s}
        )
        return Entry(Role.EVENT, event_put(self._table, chat_id, item))

    def events(self, chat_id: str, after: int = 0, limit: int = 100) -> list[AuditEvent]:
        """Audit events numbered above `after`, oldest first (a reconnecting reader
        passes the last number it saw)."""
        rows = self._range(chat_id, keys.event_sk(after + 1), keys.event_sk(10**16 - 1), limit)
        return [
            AuditEvent(
                chat_id, r["seq"], r["type"], r["at_ms"], r["actor"], json.loads(r["detail"])
            )
            for r in rows
        ]

    def latest_turns(self, chat_id: str, count: int) -> list[dict[str, Any]]:
        """The newest `count` saved turns, oldest first: one query read from the newest
        end, so what it costs depends on `count`, not on the chat's length."""
        rows = self._range(
            chat_id, keys.turn_sk(1), keys.turn_sk(10**10 - 1), count, newest_first=True
        )
        return [
            {"seq": r["seq"], "at_ms": r["at_ms"], **json.loads(r["turn"])} for r in reversed(rows)
        ]

    def _range(
        self, chat_id: str, low: str, high: str, limit: int, *, newest_first: bool = False
    ) -> list[dict[str, Any]]:
        with translated("read chat records"):
            response = self._client.query(
                TableName=self._table,
                ConsistentRead=True,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :low AND :high",
                ExpressionAttributeValues=to_item(
                    {":pk": keys.chat_pk(chat_id), ":low": low, ":high": high}
                ),
                Limit=limit,
                ScanIndexForward=not newest_first,
            )
        return [from_item(item) for item in response.get("Items", [])]


def meta_from_item(chat_id: str, row: dict[str, Any]) -> ChatMeta:
    """The chat's meta record from its (deserialized) item; no item reads as empty."""
    return ChatMeta(
        chat_id=chat_id,
        owner=row.get("owner"),
        last_turn=row.get("last_turn", 0),
        run_token=row.get("run_token"),
        run_until_ms=row.get("run_until_ms"),
    )


def record_item(
    chat_id: str, sk: str, body: dict[str, Any], now_ms: int, retention_s: int
) -> dict[str, Any]:
    """A chat record (turn or event) as a DynamoDB item, with its `ttl`."""
    return to_item(
        {"pk": keys.chat_pk(chat_id), "sk": sk, **body, "ttl": now_ms // 1000 + retention_s}
    )


def turn_body(seq: int, turn: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The stored body of turn number `seq`."""
    return {"seq": seq, "at_ms": now_ms, "turn": _json(turn)}


def _json(value: dict[str, Any]) -> str:
    # Stored as JSON text: free-form details may hold floats DynamoDB's types refuse.
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _meta_key(chat_id: str) -> dict[str, Any]:
    return to_item({"pk": keys.chat_pk(chat_id), "sk": keys.META_SK})
