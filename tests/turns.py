"""A turn saved behind the run's back, as no path of Interlock's own saves one.

Interlock saves turns only in the transactions that admit and complete a turn, and
admission refuses while a request is open. The checks that expire a request when a
newer turn exists in its chat (resume, the sweeper) and the history reads are tested
by saving a turn directly, as another writer of the table would.
"""

from __future__ import annotations

from typing import Any

from interlock import keys
from interlock.adapters.chats import record_item, turn_body
from interlock.adapters.dynamo import from_item, to_item
from interlock.adapters.factory import Stores
from interlock.records import ChatMeta
from local.memory import MemoryChats


def append_turn(stores: Stores, chat_id: str, turn: dict[str, Any], now_ms: int) -> int:
    """Save `turn` under the chat's next turn number (an atomic `ADD` on its meta item,
    as admission numbers turns); returns that number."""
    chats: Any = stores.chats
    if isinstance(chats, MemoryChats):
        return _append_in_memory(chats, chat_id, turn, now_ms)
    client, table = chats._client, chats._table
    counted = client.update_item(
        TableName=table,
        Key=to_item({"pk": keys.chat_pk(chat_id), "sk": keys.META_SK}),
        UpdateExpression="ADD #last_turn :one",
        ExpressionAttributeNames={"#last_turn": "last_turn"},
        ExpressionAttributeValues=to_item({":one": 1}),
        ReturnValues="UPDATED_NEW",
    )
    seq = int(from_item(counted["Attributes"])["last_turn"])
    body = turn_body(seq, turn, now_ms)
    item = record_item(chat_id, keys.turn_sk(seq), body, now_ms, chats._retention_s)
    client.put_item(TableName=table, Item=item)
    return seq


def _append_in_memory(chats: Any, chat_id: str, turn: dict[str, Any], now_ms: int) -> int:
    memory = chats._m
    with memory.lock:
        meta = memory.metas.get(chat_id, ChatMeta(chat_id))
        seq = meta.last_turn + 1
        memory.metas[chat_id] = ChatMeta(
            chat_id, meta.owner, seq, meta.run_token, meta.run_until_ms
        )
        memory.turns.setdefault(chat_id, {})[seq] = {"seq": seq, "at_ms": now_ms, **turn}
    return seq
