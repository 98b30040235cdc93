"""Entries of one transaction that write the same item go out as one, on moto.

A user's slots are one item: a pause gives its run slot back and takes an open-request
slot, a finish gives both back, each an entry built apart. They must land together, as
each alone would, with each best-effort part still decided by its own condition.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from interlock import keys
from interlock.adapters.dynamo import (
    Cancelled,
    best_effort,
    expression,
    from_item,
    to_item,
    transact,
    writes,
)
from interlock.adapters.limits import LimitStore
from interlock.adapters.merging import grouped, merged
from interlock.timing import ManualClock

HOUR_MS = 3_600_000


@pytest.fixture
def limits(aws: dict[str, Any]) -> LimitStore:
    return LimitStore(aws["dynamodb"], aws["table"])


def _slots(aws: dict[str, Any], user: str) -> dict[str, Any]:
    key = to_item({"pk": keys.user_pk(user), "sk": keys.SLOTS_SK})
    found = aws["dynamodb"].get_item(TableName=aws["table"], Key=key, ConsistentRead=True)
    item = from_item(found.get("Item", {}))
    return {name: slot["holder"] for name, slot in item.items() if isinstance(slot, dict)}


def _take(limits: LimitStore, holder: str, index: int, now: int, pool: str = "SLOT") -> Any:
    return limits.slot_entry("alice", holder, index, hold_ms=HOUR_MS, now_ms=now, pool=pool)


def _held(
    aws: dict[str, Any], limits: LimitStore, holder: str, index: int, now: int, pool: str = "SLOT"
) -> None:
    """Slot `index` of `pool`, taken by `holder` in a transaction of its own."""
    transact(aws["dynamodb"], writes([_take(limits, holder, index, now, pool)]), "take")


def _pause_swap(limits: LimitStore, now: int) -> list[Any]:
    """A pause's two entries on the user's item: the chat takes open-request slot 7, the
    run gives slot 2 back."""
    return [_take(limits, "chat", 7, now, pool="ASK"), limits.release_entry("alice", "run", 2)]


def test_a_pause_gives_its_slot_back_and_takes_another_in_one_write(
    aws: dict[str, Any], limits: LimitStore, clock: ManualClock
) -> None:
    now = clock.now_ms()
    _held(aws, limits, "run", 2, now)
    entries = _pause_swap(limits, now)
    sent: list[list[dict[str, Any]]] = []
    aws["dynamodb"].meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems",
        lambda params, **_: sent.append(params["TransactItems"]),
    )

    transact(aws["dynamodb"], writes(entries), "pause")

    assert _slots(aws, "alice") == {"ASK7": "chat"}
    assert [len(items) for items in sent] == [1], "one entry for the one item"


def test_a_lost_best_effort_part_leaves_the_rest_to_land(
    aws: dict[str, Any], limits: LimitStore, clock: ManualClock
) -> None:
    # The run's slot lapsed and another run took it: giving it back must not free it,
    # and the open-request slot is still taken.
    now = clock.now_ms()
    _held(aws, limits, "other", 2, now)

    transact(aws["dynamodb"], writes(_pause_swap(limits, now)), "pause")

    assert _slots(aws, "alice") == {"SLOT2": "other", "ASK7": "chat"}


def test_each_release_of_a_shared_item_is_decided_by_its_own_condition(
    aws: dict[str, Any], limits: LimitStore, clock: ManualClock
) -> None:
    # Two releases share the item; one slot is no longer this holder's. The other is
    # still given back, after the transaction, on its own.
    now = clock.now_ms()
    _held(aws, limits, "other", 2, now)
    _held(aws, limits, "chat", 7, now, pool="ASK")
    releases = [
        limits.release_entry("alice", "run", 2),
        limits.release_entry("alice", "chat", 7, pool="ASK"),
    ]

    transact(aws["dynamodb"], writes(releases), "finish")

    assert _slots(aws, "alice") == {"SLOT2": "other"}


def test_a_required_part_that_loses_names_itself(
    aws: dict[str, Any], limits: LimitStore, clock: ManualClock
) -> None:
    now = clock.now_ms()
    _held(aws, limits, "other", 7, now, pool="ASK")
    _held(aws, limits, "run", 2, now)
    entries = [limits.release_entry("alice", "run", 2), _take(limits, "chat", 7, now, pool="ASK")]

    with pytest.raises(Cancelled) as lost:
        transact(aws["dynamodb"], writes(entries), "pause")

    assert set(lost.value.failed) == {1}, "the take, as the caller numbered it"
    assert _slots(aws, "alice") == {"SLOT2": "run", "ASK7": "other"}, "nothing was written"


def test_placeholders_of_each_part_are_kept_apart() -> None:
    key = {"pk": {"S": "p"}, "sk": {"S": "s"}}
    parts = [
        {
            "Update": {
                "TableName": "t",
                "Key": key,
                "ConditionExpression": "#a = :a",
                "UpdateExpression": "SET #b = :b",
                "ExpressionAttributeNames": {"#a": "x", "#b": "y"},
                "ExpressionAttributeValues": {":a": {"N": "1"}, ":b": {"N": "2"}},
            }
        },
        {
            "Update": {
                "TableName": "t",
                "Key": key,
                "UpdateExpression": "remove #a ADD #b :a",
                "ExpressionAttributeNames": {"#a": "z", "#b": "n"},
                "ExpressionAttributeValues": {":a": {"N": "3"}},
            }
        },
        {
            "ConditionCheck": {
                "TableName": "t",
                "Key": key,
                "ConditionExpression": "#a > :a",
                "ExpressionAttributeNames": {"#a": "m"},
                "ExpressionAttributeValues": {":a": {"N": "0"}},
            }
        },
    ]

    one = merged(parts)["Update"]

    assert one["ConditionExpression"] == "(#a_0 = :a_0) AND (#a_2 > :a_2)"
    assert one["UpdateExpression"] == "SET #b_0 = :b_0 REMOVE #a_1 ADD #b_1 :a_1"
    assert one["ExpressionAttributeNames"] == {
        "#a_0": "x",
        "#b_0": "y",
        "#a_1": "z",
        "#b_1": "n",
        "#a_2": "m",
    }
    assert set(one["ExpressionAttributeValues"]) == {":a_0", ":b_0", ":a_1", ":a_2"}


def test_a_put_shares_its_item_with_nothing() -> None:
    key = {"pk": {"S": "p"}, "sk": {"S": "s"}}
    put = {"Put": {"TableName": "t", "Item": {**key, "v": {"N": "1"}}}}
    check = {"ConditionCheck": {"TableName": "t", "Key": key, "ConditionExpression": "a"}}

    assert grouped(
        [put, {"Put": {"TableName": "t", "Item": {"pk": {"S": "q"}, "sk": {"S": "s"}}}}, check]
    ) == [[0, 2], [1]]
    with pytest.raises(ValueError, match="share"):
        merged([put, check])


def test_a_turns_slot_and_budget_unit_are_one_write_and_a_refusal_names_the_budget(
    aws: dict[str, Any], limits: LimitStore, clock: ManualClock
) -> None:
    now = clock.now_ms()
    limits.spend("alice", "2026-12-04", 1, cap=1)
    entries = [_take(limits, "run", 2, now), limits.spend_entry("alice", "2026-12-04", 1, cap=1)]

    with pytest.raises(Cancelled) as lost:
        transact(aws["dynamodb"], writes(entries), "admit")

    assert set(lost.value.failed) == {1}, "the budget, not the free slot it shares an item with"
    assert _slots(aws, "alice") == {}


def test_a_spend_clears_the_days_before_it(aws: dict[str, Any], limits: LimitStore) -> None:
    limits.spend("alice", "2026-11-15", 2, cap=5)
    limits.spend("alice", "2026-12-01", 2, cap=5)

    assert limits.spend("alice", "2026-12-03", 1, cap=5) == 1

    key = to_item({"pk": keys.user_pk("alice"), "sk": keys.SLOTS_SK})
    item = from_item(aws["dynamodb"].get_item(TableName=aws["table"], Key=key)["Item"])
    assert {k for k in item if k.startswith("B")} == {"B20261115", "B20261203"}, (
        "a day within the last two weeks is cleared; one from before is left to the TTL"
    )


def test_a_write_of_the_users_item_is_sent_again_while_a_transaction_holds_it(
    aws: dict[str, Any], limits: LimitStore, clock: ManualClock
) -> None:
    # Every transition of a user's turns writes the one item; a lone write that meets
    # one in flight is refused as a conflict, which changes nothing: it goes again.
    conflicts = iter([True, True])

    def conflicting(**_: Any) -> None:
        if next(conflicts, False):
            error = {"Code": "TransactionConflictException", "Message": "in flight"}
            raise ClientError({"Error": error}, "UpdateItem")

    aws["dynamodb"].meta.events.register("before-parameter-build.dynamodb.UpdateItem", conflicting)

    slot = limits.reserve_slot("alice", "run", cap=1, hold_ms=HOUR_MS, now_ms=clock.now_ms())

    assert (slot, _slots(aws, "alice")) == (0, {"SLOT0": "run"})
    assert next(conflicts, None) is None, "both conflicts were met"


def test_best_effort_parts_that_cannot_be_told_apart_are_each_tried_on_their_own(
    aws: dict[str, Any],
) -> None:
    # Without judges nothing says which part of the shared entry lost: both are left
    # out, the rest is written, then each goes alone and its own condition decides.
    def part(attribute: str, condition: str) -> dict[str, Any]:
        update = {
            "TableName": aws["table"],
            "Key": to_item({"pk": "P", "sk": "shared"}),
            **expression(
                condition=condition, update=f"SET #{attribute} = :one", values={":one": 1}
            ),
        }
        return best_effort({"Update": update})

    other = {"Put": {"TableName": aws["table"], "Item": to_item({"pk": "P", "sk": "other"})}}
    holds, loses = part("a", "attribute_not_exists(#b)"), part("c", "attribute_exists(#zzz)")

    transact(aws["dynamodb"], [holds, other, loses], "bookkeeping")

    key = to_item({"pk": "P", "sk": "shared"})
    shared = from_item(aws["dynamodb"].get_item(TableName=aws["table"], Key=key)["Item"])
    assert (shared.get("a"), shared.get("c")) == (1, None)
    other_key = to_item({"pk": "P", "sk": "other"})
    assert "Item" in aws["dynamodb"].get_item(TableName=aws["table"], Key=other_key)


def test_a_count_tried_first_is_tried_again_after_the_start_it_raced(
    aws: dict[str, Any], limits: LimitStore, clock: ManualClock
) -> None:
    # The store counts on in a minute it saw begun; the minute has not begun (its last
    # pause was refused), and another writer begins it between this one's tries.
    minute = clock.now_ms() // 60_000
    limits.rate_entries("alice", minute, 1, cap=2)
    count, start, again = limits.rate_entries("alice", minute, 1, cap=2)
    elsewhere = LimitStore(aws["dynamodb"], aws["table"])

    with pytest.raises(Cancelled):
        transact(aws["dynamodb"], writes([count]), "count")  # not begun
    transact(aws["dynamodb"], writes([elsewhere.rate_entries("alice", minute, 1, cap=2)[0]]), "x")
    with pytest.raises(Cancelled):
        transact(aws["dynamodb"], writes([start]), "start")  # begun meanwhile
    transact(aws["dynamodb"], writes([again]), "count again")

    key = to_item({"pk": keys.user_pk("alice"), "sk": keys.SLOTS_SK})
    item = from_item(aws["dynamodb"].get_item(TableName=aws["table"], Key=key)["Item"])
    assert (item["opened_minute"], item["opened_count"]) == (minute, 2)
    assert len(elsewhere.rate_entries("alice", minute + 1, 1, cap=2)) == 2, "no guess: start"
