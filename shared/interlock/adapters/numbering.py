"""Event numbers from a per-chat atomic counter, drawn in the write that stores the events.

An audit event is written as a marked `Put` (`event_put`) without a number. When the
transaction that carries it is sent (`dynamo.transact`), the events of each chat are
numbered after the chat's counter (`last_event` on its meta item, `CHAT#<chat>` /
`META`), and the counter moves on in the same transaction, conditional on it still
holding the number the writer knew. So numbers follow commit order, one writer after
another: a reader paging `after=N` can never see a number before a smaller one is
committed, and never skips one. A writer that lost the race learns the counter's value
from the refusal and numbers again.

What it costs: when the transaction already writes or checks the chat's meta item (a
turn's admission, its pause, a resume's finish), the counter's move is folded into that
entry and costs nothing more; otherwise it is one more entry, and a lone event is a
two-entry transaction instead of a put. A writer that does not know the chat's counter
yet (its first write to that chat in this process, unless a read taught it) may need one
retry. Nobody reads the counter to write: the reads a run or a resume starts with teach
it (`observed`).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Final

from interlock import keys
from interlock.adapters.dynamo import (
    BEST_EFFORT,
    EVENT,
    MARKS,
    Cancelled,
    Conflicted,
    expression,
    to_item,
)
from interlock.errors import StoreError

COUNTER_SK: Final = keys.META_SK
COUNTER: Final = "last_event"
# The placeholders of a counter folded into another entry: a digit in each, so they
# never meet the letters-only aliases of `dynamo.expression`.
_FOLDED_NAME: Final = "#event0"
_FOLDED_TO: Final = ":event0"
_FOLDED_SEEN: Final = ":event1"
# The keyword that opens an update's SET clause (any case), not a placeholder's name.
_SET_CLAUSE: Final = re.compile(r"(?<![#:\w.])SET\b", re.IGNORECASE)
# A chat's first counted event starts above every number the clock-based scheme could
# have minted for it (milliseconds times 1000, plus a minute of clock skew), so events
# written before the counter existed still sort first; and above the counter earlier
# versions kept on an `EVENTS` item, which moved one step per event from such a start.
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
    """Number the marked events of `items`, move their chats' counters (folded into the
    entry on each chat's meta item, or as entries of their own), and `send` it;
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
            # A counter lost when it no longer holds what was sent; an entry that carries
            # it may also (or instead) have lost its own condition.
            moved = {
                i: old
                for i, old in cancelled.failed.items()
                if i in counters and _counter_of(old) != seen[counters[i]]
            }
            lost = {i: old for i, old in cancelled.failed.items() if i not in moved}
            if not moved:
                raise Cancelled(lost) from None
            # A counter moved on: number again. What else lost may only have lost beside
            # it (a best-effort entry is dropped only when nothing else failed), so it is
            # judged on the next attempt, not now.
            with _lock:
                for index, old in moved.items():
                    chat, now = counters[index], _counter_of(old)
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
    """The entries to send (events numbered, markers gone, each chat's counter folded
    into the entry on its meta item, or last) and which index holds which chat's
    counter."""
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
        at = _meta_entry(entries, chat)
        if at is None:
            at = len(entries)
            entries.append(_counter_entry(chat, last, next_of[chat] - 1))
        else:
            entries[at] = _carrying_counter(entries[at], last, next_of[chat] - 1)
        counters[at] = chat
    return entries, counters


def _counter_of(old: dict[str, Any] | None) -> int:
    """The counter as a refusal returned its item (none: the item does not exist)."""
    return int((old or {}).get(COUNTER, 0))


def _meta_entry(entries: list[dict[str, Any]], chat: tuple[str, str]) -> int | None:
    """The index of the entry that writes or checks the chat's meta item, if any."""
    table, chat_id = chat
    key = counter_key(chat_id)
    for index, entry in enumerate(entries):
        ((kind, body),) = ((k, v) for k, v in entry.items() if k not in MARKS)
        held = body.get("Key") or {name: body["Item"].get(name) for name in ("pk", "sk")}
        if body["TableName"] != table or held != key:
            continue
        # A Put or Delete of the meta item would lose the counter, and an entry that may
        # be dropped (best effort) would take the counter's move with it.
        if kind not in ("Update", "ConditionCheck") or BEST_EFFORT in entry:
            raise ValueError(f"events cannot ride with a {kind} of their chat's meta item")
        return index
    return None


def _carrying_counter(entry: dict[str, Any], last: int, to: int) -> dict[str, Any]:
    """`entry` (an `Update` or `ConditionCheck` of the chat's meta item) as an `Update`
    that also moves the counter from `last` to `to`, on the condition it still holds
    `last`; its old item comes back on a refusal, telling which condition lost."""
    ((_, body),) = ((k, v) for k, v in entry.items() if k not in MARKS)
    names = body.get("ExpressionAttributeNames", {})
    values = body.get("ExpressionAttributeValues", {})
    if {_FOLDED_NAME} & names.keys() or {_FOLDED_TO, _FOLDED_SEEN} & values.keys():
        raise ValueError("the entry already uses the counter's placeholders")
    if COUNTER in names.values():
        raise ValueError("the entry already writes the chat's event counter")
    held = f"{_FOLDED_NAME} = {_FOLDED_SEEN}" if last else f"attribute_not_exists({_FOLDED_NAME})"
    own = body.get("ConditionExpression")
    move = f"{_FOLDED_NAME} = {_FOLDED_TO}"
    update = body.get("UpdateExpression")
    if update is None:
        update = f"SET {move}"
    elif _SET_CLAUSE.search(update):
        update = _SET_CLAUSE.sub(f"SET {move},", update, count=1)
    else:
        update = f"SET {move} {update}"
    moved_values = to_item({_FOLDED_TO: to, **({_FOLDED_SEEN: last} if last else {})})
    return {
        "Update": {
            **body,
            "ConditionExpression": f"({own}) AND {held}" if own else held,
            "UpdateExpression": update,
            "ExpressionAttributeNames": {**names, _FOLDED_NAME: COUNTER},
            "ExpressionAttributeValues": {**values, **moved_values},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


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
