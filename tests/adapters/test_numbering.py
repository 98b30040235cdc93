"""The chat's event counter lives on its meta item: a transaction that already writes or
checks that item carries the counter's move in the same entry, and each condition of
that entry still decides what it always decided."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from interlock import errors, keys
from interlock.adapters import numbering
from interlock.adapters.dynamo import (
    Cancelled,
    best_effort,
    expression,
    from_item,
    to_item,
    transact,
    writes,
)
from interlock.adapters.factory import Stores
from interlock.records import TurnFence
from interlock.timing import ManualClock


@pytest.fixture
def chat() -> str:
    return f"n-{secrets.token_hex(4)}"  # this process's counter cache never knew it


@pytest.fixture
def sent(aws: dict[str, Any]) -> Iterator[list[list[dict[str, Any]]]]:
    """The entries of every transaction the client sends."""
    calls: list[list[dict[str, Any]]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(params["TransactItems"])

    events = aws["dynamodb"].meta.events
    events.register("provide-client-params.dynamodb.TransactWriteItems", record)
    yield calls
    events.unregister("provide-client-params.dynamodb.TransactWriteItems", record)


def _meta(aws: dict[str, Any], chat: str) -> dict[str, Any]:
    key = to_item({"pk": keys.chat_pk(chat), "sk": keys.META_SK})
    item = aws["dynamodb"].get_item(TableName=aws["table"], Key=key, ConsistentRead=True)
    return from_item(item.get("Item", {}))


def _meta_update(
    aws: dict[str, Any],
    chat: str,
    condition: str = "",
    update: str = "SET #owner = :me ADD #landed :one",
) -> dict[str, Any]:
    """An update of the chat's meta item that counts how often it landed."""
    args = expression(
        condition=condition or "attribute_not_exists(#owner) OR #owner = :me",
        update=update,
        values={":me": "alice", ":one": 1},
    )
    key = to_item({"pk": keys.chat_pk(chat), "sk": keys.META_SK})
    return {"Update": {"TableName": aws["table"], "Key": key, **args}}


def _event(stores: Stores, chat: str, clock: ManualClock) -> dict[str, Any]:
    return writes([stores.chats.event_entry(chat, "note", "alice", clock.now_ms())])[0]


def test_an_event_beside_a_meta_update_moves_the_counter_in_that_entry(
    aws: dict[str, Any],
    stores: Stores,
    clock: ManualClock,
    chat: str,
    sent: list[list[dict[str, Any]]],
) -> None:
    stores.chats.record(chat, "first", "alice", clock.now_ms())
    stores.chats.meta(chat)  # a consistent read of the meta item teaches the counter
    sent.clear()

    transact(aws["dynamodb"], [_meta_update(aws, chat), _event(stores, chat, clock)], "test")

    # One transaction of two entries: no entry of its own for the counter
    assert [len(entries) for entries in sent] == [2]
    events = stores.chats.events(chat)
    assert [e.type for e in events] == ["first", "note"]
    meta = _meta(aws, chat)
    assert (meta["owner"], meta["landed"], meta["last_event"]) == ("alice", 1, events[-1].seq)


def test_a_counter_that_moved_meanwhile_is_drawn_again_and_the_update_lands_once(
    aws: dict[str, Any], stores: Stores, clock: ManualClock, chat: str
) -> None:
    stores.chats.record(chat, "first", "alice", clock.now_ms())
    # This process believes the counter is further on than it is (as after a table was
    # made anew): the folded entry loses on the counter alone, not on its own condition.
    numbering.learn(aws["table"], chat, 10**12)

    transact(aws["dynamodb"], [_meta_update(aws, chat), _event(stores, chat, clock)], "test")

    events = stores.chats.events(chat)
    assert [e.type for e in events] == ["first", "note"]
    assert events[1].seq == events[0].seq + 1
    assert _meta(aws, chat)["landed"] == 1


def test_a_meta_update_that_loses_its_own_condition_is_refused_at_once_and_writes_nothing(
    aws: dict[str, Any],
    stores: Stores,
    clock: ManualClock,
    chat: str,
    sent: list[list[dict[str, Any]]],
) -> None:
    stores.chats.record(chat, "first", "alice", clock.now_ms())
    stores.chats.meta(chat)
    before = _meta(aws, chat)
    sent.clear()
    taken = _meta_update(aws, chat, condition="attribute_exists(#owner)")  # there is none

    with pytest.raises(Cancelled) as refused:
        transact(aws["dynamodb"], [taken, _event(stores, chat, clock)], "test")

    # The caller's entry is named, by its own index, after one call: the counter held
    assert list(refused.value.failed) == [0]
    assert len(sent) == 1
    assert _meta(aws, chat) == before
    assert [e.type for e in stores.chats.events(chat)] == ["first"]


@pytest.mark.parametrize("held", [True, False])
def test_a_turn_fence_check_carries_the_counter_and_still_fences(
    aws: dict[str, Any], stores: Stores, clock: ManualClock, chat: str, held: bool
) -> None:
    # Given a chat whose meta item holds a running turn's token
    transact(aws["dynamodb"], [_meta_update(aws, chat)], "test")
    token = aws["dynamodb"].update_item(
        TableName=aws["table"],
        Key=to_item({"pk": keys.chat_pk(chat), "sk": keys.META_SK}),
        UpdateExpression="SET run_token = :t",
        ExpressionAttributeValues=to_item({":t": "mine"}),
    )
    assert token["ResponseMetadata"]["HTTPStatusCode"] == 200
    fence = TurnFence(chat, "mine" if held else "theirs")

    # When an event is recorded behind the turn's fence
    if held:
        stores.chats.record(chat, "step", "alice", clock.now_ms(), fence=fence)
    else:
        with pytest.raises(errors.LeaseLost):
            stores.chats.record(chat, "step", "alice", clock.now_ms(), fence=fence)

    # Then it lands, moving the counter, only while the fence holds
    events = stores.chats.events(chat)
    meta = _meta(aws, chat)
    if held:
        assert [e.type for e in events] == ["step"]
        assert meta["last_event"] == events[0].seq
    else:
        assert events == []
        assert "last_event" not in meta
    assert (meta["run_token"], meta["landed"]) == ("mine", 1)


def test_an_event_cannot_ride_with_a_put_of_its_chats_meta_item(
    aws: dict[str, Any], stores: Stores, clock: ManualClock, chat: str
) -> None:
    put = {
        "Put": {
            "TableName": aws["table"],
            "Item": to_item({"pk": keys.chat_pk(chat), "sk": keys.META_SK, "owner": "alice"}),
        }
    }
    with pytest.raises(ValueError, match="Put of their chat's meta item"):
        transact(aws["dynamodb"], [put, _event(stores, chat, clock)], "test")
    assert _meta(aws, chat) == {}


# Every shape of update a meta entry may have: the counter's SET joins the entry's own
# SET clause, or opens one, whatever the clauses' order and case.
UPDATES = {
    "set-then-add": "SET #owner = :me ADD #landed :one",
    "add-then-set": "ADD #landed :one SET #owner = :me",
    "lowercase": "add #landed :one set #owner = :me",
    "remove-only": "REMOVE #gone ADD #landed :one",
}


@pytest.mark.parametrize("shape", UPDATES)
@pytest.mark.parametrize("at", [0, 1])
def test_a_counter_another_writer_moved_is_drawn_again_whatever_the_entry_and_its_place(
    aws: dict[str, Any],
    stores: Stores,
    clock: ManualClock,
    chat: str,
    sent: list[list[dict[str, Any]]],
    shape: str,
    at: int,
) -> None:
    # Given a meta item with an attribute to remove, and a counter this process knows
    # only up to the first of two events (the second came from another writer)
    key = to_item({"pk": keys.chat_pk(chat), "sk": keys.META_SK})
    aws["dynamodb"].put_item(TableName=aws["table"], Item={**key, "gone": {"S": "x"}})
    first = stores.chats.record(chat, "first", "alice", clock.now_ms())
    stores.chats.record(chat, "second", "bob", clock.now_ms())
    numbering.observed(aws["table"], chat, {"last_event": first.seq})
    other = {"Put": {"TableName": aws["table"], "Item": to_item({"pk": f"X#{chat}", "sk": "1"})}}
    entries = [_meta_update(aws, chat, update=UPDATES[shape]), _event(stores, chat, clock)]
    if at:
        entries.insert(0, other)  # the meta entry second
    sent.clear()

    # When the change is sent, its old values asked for on no entry of the caller's
    transact(aws["dynamodb"], entries, "test", read_back=())

    # Then the refusal told the counter, the events were numbered again, and the entry's
    # own change landed once
    assert len(sent) == 2
    events = stores.chats.events(chat)
    assert [(e.type, e.seq - first.seq) for e in events] == [
        ("first", 0),
        ("second", 1),
        ("note", 2),
    ]
    meta = _meta(aws, chat)
    assert (meta["landed"], meta["last_event"]) == (1, events[-1].seq)
    assert ("gone" in meta) == (shape != "remove-only")


def test_a_meta_update_that_loses_while_its_counter_moved_is_refused_after_one_redraw(
    aws: dict[str, Any],
    stores: Stores,
    clock: ManualClock,
    chat: str,
    sent: list[list[dict[str, Any]]],
) -> None:
    first = stores.chats.record(chat, "first", "alice", clock.now_ms())
    stores.chats.record(chat, "second", "bob", clock.now_ms())
    numbering.observed(aws["table"], chat, {"last_event": first.seq})
    other = {"Put": {"TableName": aws["table"], "Item": to_item({"pk": f"X#{chat}", "sk": "1"})}}
    taken = _meta_update(aws, chat, condition="attribute_exists(#owner)")  # there is none
    sent.clear()

    with pytest.raises(Cancelled) as refused:
        transact(aws["dynamodb"], [other, taken, _event(stores, chat, clock)], "test", read_back=())

    assert list(refused.value.failed) == [1]
    assert len(sent) == 2
    assert [e.type for e in stores.chats.events(chat)] == ["first", "second"]


@pytest.mark.parametrize("kind", ["Delete", "best effort"])
def test_an_event_cannot_ride_with_a_meta_entry_that_could_lose_the_counter(
    aws: dict[str, Any], stores: Stores, clock: ManualClock, chat: str, kind: str
) -> None:
    key = to_item({"pk": keys.chat_pk(chat), "sk": keys.META_SK})
    entry = (
        {"Delete": {"TableName": aws["table"], "Key": key}}
        if kind == "Delete"
        else best_effort(_meta_update(aws, chat))
    )
    with pytest.raises(ValueError, match="cannot ride with"):
        transact(aws["dynamodb"], [entry, _event(stores, chat, clock)], "test")
    assert stores.chats.events(chat) == []
