"""One writer of the event-number race, as its own process: `python -m
tests.race.event_writer ENDPOINT TABLE BUCKET CHAT KIND COUNT` writes COUNT events to CHAT
the way KIND does (see `test_event_numbers`), then exits 0."""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import boto3

from interlock import keys
from interlock.adapters.dynamo import expression, to_item, transact, writes
from interlock.adapters.factory import Stores, build_stores
from interlock.timing import SystemClock


def writers(stores: Stores, client: Any, table: str, chat: str) -> dict[str, Callable[[int], int]]:
    """Four ways Interlock writes events; each writes some (numbered `n` on) and says how many."""
    chats, clock = stores.chats, SystemClock()

    def alone(n: int) -> int:
        chats.record(chat, "tap", "w0", clock.now_ms(), n=n)
        return 1

    def with_a_change(n: int) -> int:
        # Every other change is to the chat's meta item, which then carries the counter.
        change = _meta_change(table, chat) if n % 2 else _other_change(table, chat, n)
        event = chats.event_entry(chat, "resume", "w1", clock.now_ms(), n=n)
        transact(client, [change, *writes([event])], "change with its event")
        return 1

    def two_at_once(n: int) -> int:
        events = [chats.event_entry(chat, "cancel", "w2", clock.now_ms(), n=n + i) for i in (0, 1)]
        transact(client, writes(events), "two events", read_back=())
        return 2

    def sweeper(n: int) -> int:
        chats.record(chat, "swept", "w3", clock.now_ms(), n=n)
        return 1

    return {f.__name__: f for f in (alone, with_a_change, two_at_once, sweeper)}


def _other_change(table: str, chat: str, n: int) -> dict[str, Any]:
    return {"Put": {"TableName": table, "Item": to_item({"pk": f"X#{chat}", "sk": str(n)})}}


def _meta_change(table: str, chat: str) -> dict[str, Any]:
    key = to_item({"pk": keys.chat_pk(chat), "sk": keys.META_SK})
    args = expression(
        condition="attribute_not_exists(#owner) OR #owner = :me",
        update="SET #owner = :me ADD #changes :one",
        values={":me": "w1", ":one": 1},
    )
    return {"Update": {"TableName": table, "Key": key, **args}}


def main(endpoint: str, table: str, bucket: str, chat: str, kind: str, count: str) -> int:
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    session = boto3.session.Session(region_name="us-east-1")
    dynamodb, s3 = (session.client(n, endpoint_url=endpoint) for n in ("dynamodb", "s3"))
    write = writers(build_stores(dynamodb, s3, table, bucket), dynamodb, table, chat)[kind]
    written = 0
    while written < int(count):
        written += write(written)
        # A writer's own work between events (a run's model call takes far longer). With
        # none at all, four writers hammering one chat's counter on the emulator starve
        # each other: a loser's retry arrives after the next winner's write, every time.
        time.sleep(random.uniform(0.02, 0.06))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
