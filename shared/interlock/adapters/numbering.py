"""Event numbers from a per-chat atomic counter, drawn in the write that stores the events.

An audit event is written as a marked `Put` (`event_put`) without a number. When the
transaction that carries it is sent (`dynamo.transact`), the events of each chat are
numbered after the chat's counter item (`CHAT#<chat>` / `EVENTS`), and one more entry
moves that counter on, conditional on it still holding the number the writer knew. So
numbers follow commit order, one writer after another: a reader paging `after=N` can
never see a number before a smaller one is committed, and never skips one. A writer that
lost the race learns the counter's value from the refusal and numbers again.

What it costs: one more entry (the counter) in each transaction that carries events, and
a lone event is a two-entry transaction instead of a put; a writer that does not know the
chat's counter yet (its first write to that chat in this process, unless a read taught
it) may need one retry. Nobody reads the counter to write: the batch read a run or a
resume starts with teaches it (`learn`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Final

from interlock import keys
from interlock.adapters.dynamo import EVENT, Cancelled, Conflicted, expression, to_item
from interlock.errors import StoreError

COUNTER_SK: Final = "EVENTS"
COUNTER: Final = "last_event"
# A chat's first counted event starts above every number the clock-based scheme could
# have minted for it (milliseconds times 1000, plus a minute of clock skew), so events
# written before the counter existed still sort first.
_LEGACY_SPREAD: Final = 1000
_LEGACY_SKEW_MS: Final = 60_000
# Writers to one chat take turns: under heavy contention (several writers at once, all
# the time) a writer may lose a few races in a row before its turn comes.
_ATTEMPTS: Final = 60

_known: dict[tuple[str, str], int] = {}
_chat_locks: dict[tuple[str, str], threading.Lock] = {}
_lock = threading.Lock()


def event_put(table: str, chat_id: str, item: dict[str, Any]) -> dict[str, Any]:
    """A transaction entry that stores the event `item` (serialized, without `sk` and
    `seq`) under the next number of the chat's counter."""
    return {"Put": {"TableName": table, "Item": item}, EVENT: chat_id}


def counter_key(chat_id: str) -> dict[str, Any]:
    return to_item({"pk": keys.chat_pk(chat_id), "sk": COUNTER_SK})


def learn(table: str, chat_id: str, last: int) -> None:
    """Remember that the chat's counter stood at `last` (a write moved it there)."""
    with _lock:
        if last > _known.get((table, chat_id), -1):
            _known[(table, chat_id)] = last


def observed(table: str, chat_id: str, row: dict[str, Any] | None) -> None:
    """Remember the chat's counter as a consistent read found it (`row`: its item, or
    None when the chat has none yet)."""
    with _lock:
        _known[(table, chat_id)] = int((row or {}).get(COUNTER, 0))


def counted_transact(
    send: Callable[[list[dict[str, Any]]], None], items: list[dict[str, Any]]
) -> None:
    """Number the marked events of `items`, add the counters' entries, and `send` it;
    again with the counters as they stand when one moved on (or a conflicting
    transaction got in the way). A refusal of any other entry is the caller's
    `Cancelled`, indexed as the caller numbered them."""
    chats = list(dict.fromkeys((i["Put"]["TableName"], i[EVENT]) for i in items if EVENT in i))
    # Writers of one process take turns per chat (they would only race each other for
    # the counter); the counter's condition orders them against other processes.
    with _turns(chats):
        _send_counted(send, items, chats)


def _send_counted(
    send: Callable[[list[dict[str, Any]]], None],
    items: list[dict[str, Any]],
    chats: list[tuple[str, str]],
) -> None:
    for attempt in range(_ATTEMPTS):
        with _lock:
            seen = {chat: _known.get(chat, 0) for chat in chats}
        entries, counters = _numbered(items, seen)
        try:
            send(entries)
        except Conflicted:
            _pause(attempt)  # another transaction held an item: the same write again
            continue
        except Cancelled as cancelled:
            lost = {i: old for i, old in cancelled.failed.items() if i not in counters}
            moved = {i: old for i, old in cancelled.failed.items() if i in counters}
            if not moved:
                raise Cancelled(lost) from None
            # A counter moved on: number again. What else lost may only have lost beside
            # it (a best-effort entry is dropped only when nothing else failed), so it is
            # judged on the next attempt, not now.
            with _lock:
                for index, old in moved.items():
                    chat, now = counters[index], int((old or {}).get(COUNTER, 0))
                    # Another thread may know a later value already; a counter found
                    # behind what we sent belongs to a table made anew: believe it.
                    ahead = max(now, _known.get(chat, 0))
                    _known[chat] = now if now < seen[chat] else ahead
            # At once: the refusal told the counter as it stands now, and waiting would
            # only let it move on again.
            continue
        for chat, last in _lasts(items, seen).items():
            learn(*chat, last)
        return
    raise StoreError("write events failed: the chat's event counter kept moving")


@contextmanager
def _turns(chats: list[tuple[str, str]]) -> Iterator[None]:
    with _lock:
        locks = [_chat_locks.setdefault(chat, threading.Lock()) for chat in sorted(chats)]
    with ExitStack() as held:
        for lock in locks:  # in one order everywhere: no two writers wait on each other
            held.enter_context(lock)
        yield


def _pause(attempt: int) -> None:
    # Full jitter, growing: writers that collided do not collide again in step, and a
    # writer that keeps losing to busier ones still gets its turn.
    time.sleep(random.uniform(0, min(0.001 * 2**attempt, 0.05)))


def _numbered(
    items: list[dict[str, Any]], seen: dict[tuple[str, str], int]
) -> tuple[list[dict[str, Any]], dict[int, tuple[str, str]]]:
    """The entries to send (events numbered, markers gone, counters last) and which
    index holds which chat's counter."""
    next_of = {chat: _first(chat, last, items) for chat, last in seen.items()}
    entries = []
    for item in items:
        if EVENT not in item:
            entries.append(item)
            continue
        chat = (item["Put"]["TableName"], item[EVENT])
        number = next_of[chat]
        next_of[chat] = number + 1
        body = item["Put"]["Item"]
        # Numbered in place too, so the writer can read back what it stored.
        body.update(to_item({"sk": keys.event_sk(number), "seq": number}))
        entries.append({"Put": item["Put"]})
    counters: dict[int, tuple[str, str]] = {}
    for chat, last in seen.items():
        counters[len(entries)] = chat
        entries.append(_counter_entry(chat, last, next_of[chat] - 1))
    return entries, counters


def _first(chat: tuple[str, str], last: int, items: list[dict[str, Any]]) -> int:
    if last:
        return last + 1
    at_ms = max(
        int(i["Put"]["Item"]["at_ms"]["N"])
        for i in items
        if EVENT in i and (i["Put"]["TableName"], i[EVENT]) == chat
    )
    return (at_ms + _LEGACY_SKEW_MS) * _LEGACY_SPREAD


def _lasts(
    items: list[dict[str, Any]], seen: dict[tuple[str, str], int]
) -> dict[tuple[str, str], int]:
    lasts = dict(seen)
    for item in items:
        if EVENT in item:
            chat = (item["Put"]["TableName"], item[EVENT])
            lasts[chat] = max(lasts[chat], int(item["Put"]["Item"]["seq"]["N"]))
    return lasts


def _counter_entry(chat: tuple[str, str], last: int, to: int) -> dict[str, Any]:
    table, chat_id = chat
    condition = "attribute_not_exists(#last_event)" if not last else "#last_event = :seen"
    return {
        "Update": {
            "TableName": table,
            "Key": counter_key(chat_id),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **expression(
                condition=condition,
                update="SET #last_event = :to",
                values={":seen": last, ":to": to},
            ),
        }
    }
