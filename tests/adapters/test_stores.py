"""Approvals, chats, audit, limits, outbox and blobs on moto."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from interlock import errors, keys
from interlock.adapters.dynamo import from_item, to_item, transact, writes
from interlock.adapters.factory import Stores
from interlock.adapters.limits import OPENED_COUNT, OPENED_MINUTE, LimitStore
from interlock.admission import ASK_POOL, AskSlots
from interlock.pause import persist_pause
from interlock.records import Subject
from interlock.timing import ManualClock
from tests.turns import append_turn

SITE = Subject("site", "example.org")
PKG = Subject("package", "pandas")
HOUR_MS = 3_600_000


# -- approvals -------------------------------------------------------------------------------


def test_grant_list_and_revoke(stores: Stores, clock: ManualClock) -> None:
    stores.approvals.grant("c1", "alice", [SITE, PKG], "card-1", clock.now_ms())

    listed = stores.approvals.for_user("c1", "alice", clock.now_ms())
    assert {(a.subject, a.card_id, a.granted_by) for a in listed} == {
        (SITE, "card-1", "alice"),
        (PKG, "card-1", "alice"),
    }
    assert stores.approvals.for_user("c1", "bob", clock.now_ms()) == []
    assert stores.approvals.for_user("c2", "alice", clock.now_ms()) == []

    assert stores.approvals.revoke("c1", "alice", SITE) is True
    assert stores.approvals.revoke("c1", "alice", SITE) is False
    assert [a.subject for a in stores.approvals.for_user("c1", "alice", clock.now_ms())] == [PKG]


def test_expired_approvals_are_filtered_on_read(stores: Stores, clock: ManualClock) -> None:
    stores.approvals.grant("c1", "alice", [SITE], "card-1", clock.now_ms())
    clock.advance(seconds=stores.policy.approval_ttl_s)
    assert stores.approvals.for_user("c1", "alice", clock.now_ms()) == []


def test_deny_removes_only_that_cards_rows(stores: Stores, clock: ManualClock) -> None:
    stores.approvals.grant("c1", "alice", [SITE], "card-1", clock.now_ms())
    stores.approvals.grant("c1", "alice", [PKG], "card-2", clock.now_ms())

    assert stores.approvals.withdraw_card("c1", "alice", "card-2") == 1

    assert [a.subject for a in stores.approvals.for_user("c1", "alice", clock.now_ms())] == [SITE]


def test_a_regrant_by_another_card_survives_the_first_cards_deny(
    stores: Stores, clock: ManualClock
) -> None:
    stores.approvals.grant("c1", "alice", [SITE], "card-1", clock.now_ms())
    stores.approvals.grant("c1", "alice", [SITE], "card-2", clock.now_ms())

    assert stores.approvals.withdraw_card("c1", "alice", "card-1") == 0
    assert [a.card_id for a in stores.approvals.for_user("c1", "alice", clock.now_ms())] == [
        "card-2"
    ]


def test_admin_list_is_consulted_with_the_users_rows(stores: Stores, clock: ManualClock) -> None:
    stores.approvals.admin_grant([Subject("site", "pypi.org")], "admin", clock.now_ms())
    stores.approvals.grant("c1", "alice", [SITE], "card-1", clock.now_ms())

    asked = [SITE, Subject("site", "pypi.org"), Subject("package", "numpy")]
    assert stores.approvals.approved_among("c1", "alice", asked, clock.now_ms()) == {
        SITE,
        Subject("site", "pypi.org"),
    }
    assert stores.approvals.approved_among("c9", "bob", asked, clock.now_ms()) == {
        Subject("site", "pypi.org")
    }
    assert stores.approvals.approved_among("c1", "alice", [], clock.now_ms()) == frozenset()


def test_an_approval_past_its_ttl_is_not_among_the_approved(
    stores: Stores, clock: ManualClock
) -> None:
    stores.approvals.grant("c1", "alice", [SITE], "card-1", clock.now_ms())
    clock.advance(seconds=stores.policy.approval_ttl_s + 1)

    assert stores.approvals.approved_among("c1", "alice", [SITE], clock.now_ms()) == frozenset()


def test_a_users_expired_row_does_not_hide_the_administrators_approval(
    stores: Stores, clock: ManualClock
) -> None:
    stores.approvals.grant("c1", "alice", [SITE], "card-1", clock.now_ms())
    stores.approvals.admin_grant([SITE], "admin", clock.now_ms())
    clock.advance(seconds=stores.policy.approval_ttl_s + 1)

    assert stores.approvals.approved_among("c1", "alice", [SITE], clock.now_ms()) == {SITE}


def test_many_approvals_are_written_in_batches(stores: Stores, clock: ManualClock) -> None:
    subjects = [Subject("package", f"pkg{n}") for n in range(60)]
    stores.approvals.grant("c1", "alice", subjects, "card-1", clock.now_ms())
    assert len(stores.approvals.for_user("c1", "alice", clock.now_ms())) == 60


# -- chats and audit --------------------------------------------------------------------------


def test_turns_and_meta(stores: Stores, clock: ManualClock) -> None:
    assert stores.chats.meta("c1").last_turn == 0
    assert append_turn(stores, "c1", {"role": "user", "text": "hi"}, clock.now_ms()) == 1
    assert append_turn(stores, "c1", {"role": "assistant", "text": "yo"}, clock.now_ms()) == 2

    assert [t["text"] for t in stores.chats.turns("c1")] == ["hi", "yo"]
    assert [t["seq"] for t in stores.chats.turns("c1", after=1)] == [2]
    assert stores.chats.meta("c1").last_turn == 2


# -- turns ----------------------------------------------------------------------------


def test_a_failed_turns_release_never_raises_over_its_error_and_drops_an_unnumbered_event(
    aws: dict[str, Any], stores: Stores, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every transaction meets a conflict: the event cannot be numbered, the release
    # cannot land. It gives up quietly (the lease lapses), as it did without the event.
    _, seen, _ = stores.requests.read_for_turn("c1", clock.now_ms())
    turn = {"role": "user", "text": "hi"}
    fence, seq = stores.turns.admit(seen, "alice", turn, clock.now_ms(), 60_000)
    failed = stores.chats.event_entry("c1", "turn_failed", "alice", clock.now_ms(), turn=seq)

    def conflict(**_: Any) -> None:
        reasons = [{"Code": "TransactionConflict"}, {"Code": "None"}]
        error = {"Code": "TransactionCanceledException", "Message": "conflict"}
        raise ClientError({"Error": error, "CancellationReasons": reasons}, "TransactWriteItems")

    monkeypatch.setattr("interlock.adapters.numbering.time.sleep", lambda _: None)
    monkeypatch.setattr("interlock.adapters.admission.time.sleep", lambda _: None)
    with monkeypatch.context() as patched:
        patched.setattr(aws["dynamodb"], "transact_write_items", conflict)
        stores.turns.abandon(fence, also=[failed])
    assert stores.chats.meta("c1").run_token == fence.run_token  # left to lapse

    stores.turns.abandon(fence, also=[failed])  # the store answers again
    assert stores.chats.meta("c1").run_token is None
    assert [e.type for e in stores.chats.events("c1")] == ["turn_failed"]


# -- limits ---------------------------------------------------------------------------


def test_slots_are_capped_and_released(stores: Stores, clock: ManualClock) -> None:
    def reserve(user: str, holder: str) -> int:
        return stores.limits.reserve_slot(
            user, holder, cap=2, hold_ms=60_000, now_ms=clock.now_ms()
        )

    first = reserve("alice", "h1")
    second = reserve("alice", "h2")
    assert {first, second} == {0, 1}
    assert reserve("alice", "h1") == first, "a holder re-reserving keeps its slot"
    with pytest.raises(errors.LimitExceeded):
        reserve("alice", "h3")

    stores.limits.release_slot("alice", "h1", first)
    stores.limits.release_slot("alice", "h1", first)  # idempotent
    assert reserve("alice", "h3") == first
    reserve("bob", "h1")


def test_release_never_frees_a_slot_another_holder_took(stores: Stores, clock: ManualClock) -> None:
    slot = stores.limits.reserve_slot("alice", "old", cap=1, hold_ms=1000, now_ms=clock.now_ms())
    clock.advance(ms=1000)
    assert (
        stores.limits.reserve_slot("alice", "new", cap=1, hold_ms=60_000, now_ms=clock.now_ms())
        == slot
    )

    stores.limits.release_slot("alice", "old", slot)  # the dead holder's late release

    with pytest.raises(errors.LimitExceeded):
        stores.limits.reserve_slot("alice", "third", cap=1, hold_ms=1000, now_ms=clock.now_ms())


def test_releasing_a_slot_never_reserved_is_harmless(stores: Stores) -> None:
    stores.limits.release_slot("nobody", "h1", 0)


def test_daily_budget(stores: Stores) -> None:
    assert stores.limits.spend("alice", "2026-11-29", 3, cap=5) == 3
    assert stores.limits.spend("alice", "2026-11-29", 2, cap=5) == 5
    with pytest.raises(errors.LimitExceeded):
        stores.limits.spend("alice", "2026-11-29", 1, cap=5)
    assert stores.limits.spend("alice", "2026-11-30", 1, cap=5) == 1


def _pause_with_asks(stores: Stores, limits: Any, chat: str, now_ms: int, cap: int) -> None:
    """A pause of alice's in `chat` under `cap` new requests a minute (`limits` spends)."""
    asks = AskSlots(
        limits.rate_entries("alice", now_ms // 60_000, 1, cap=cap),
        [
            (n, limits.slot_entry("alice", chat, n, hold_ms=HOUR_MS, now_ms=now_ms, pool=ASK_POOL))
            for n in range(4)
        ],
    )
    persist_pause(
        stores,
        chat_id=chat,
        user_id="alice",
        interrupt_id=f"v1:tool_call:t-{chat}:a",
        kind="approval",
        card={"card_id": chat},
        snapshot={"agent": chat},
        turn_seq=1,
        now_ms=now_ms,
        asks=asks,
    )


def test_the_minute_budget_of_new_requests_caps_each_minute_and_starts_again(
    stores: Stores, clock: ManualClock
) -> None:
    clock.advance(ms=-(clock.now_ms() % 60_000))  # the top of a minute
    _pause_with_asks(stores, stores.limits, "c1", clock.now_ms(), cap=2)
    clock.advance(seconds=30)
    _pause_with_asks(stores, stores.limits, "c2", clock.now_ms(), cap=2)
    with pytest.raises(errors.LimitExceeded, match="this minute"):
        _pause_with_asks(stores, stores.limits, "c3", clock.now_ms(), cap=2)
    assert stores.requests.get("c3", clock.now_ms()) is None, "a refused pause wrote nothing"

    clock.advance(seconds=30)  # the next minute
    _pause_with_asks(stores, stores.limits, "c3", clock.now_ms(), cap=2)
    assert stores.requests.get("c3", clock.now_ms()) is not None


def test_a_store_that_guesses_the_minute_wrong_tries_the_other_form(
    aws: dict[str, Any], stores: Stores, clock: ManualClock
) -> None:
    # Each store guesses from the pauses it made itself: another process's store knows
    # nothing of alice's minute and starts it, is refused, and counts on instead.
    clock.advance(ms=-(clock.now_ms() % 60_000))
    elsewhere = LimitStore(aws["dynamodb"], aws["table"])
    _pause_with_asks(stores, stores.limits, "c1", clock.now_ms(), cap=2)
    _pause_with_asks(stores, elsewhere, "c2", clock.now_ms(), cap=2)
    with pytest.raises(errors.LimitExceeded):
        _pause_with_asks(stores, stores.limits, "c3", clock.now_ms(), cap=2)
    clock.advance(seconds=60)
    _pause_with_asks(stores, stores.limits, "c3", clock.now_ms(), cap=2)  # a new minute

    key = to_item({"pk": keys.user_pk("alice"), "sk": keys.SLOTS_SK})
    item = from_item(aws["dynamodb"].get_item(TableName=aws["table"], Key=key)["Item"])
    assert (item[OPENED_MINUTE], item[OPENED_COUNT]) == (clock.now_ms() // 60_000, 1)
    listed = aws["dynamodb"].scan(TableName=aws["table"])["Items"]
    assert [i["sk"]["S"] for i in listed if i["pk"]["S"] == keys.user_pk("alice")] == ["SLOTS"]


# -- outbox and blobs ----------------------------------------------------------------------------


def test_a_refund_gives_back_a_spend_and_a_day_never_spent_has_nothing_to_give(
    stores: Stores,
) -> None:
    stores.limits.spend("alice", "2026-12-03", 3, cap=5)
    stores.limits.refund("alice", "2026-12-03", 3)
    assert stores.limits.spend("alice", "2026-12-03", 5, cap=5) == 5

    stores.limits.refund("alice", "2026-12-04", 1)
    assert stores.limits.spend("alice", "2026-12-04", 5, cap=5) == 5


def test_outbox_puts_once(stores: Stores, clock: ManualClock) -> None:
    assert stores.outbox.put_once("v1:before_tool_call:t1:x", {"to": "tom"}, clock.now_ms())
    assert not stores.outbox.put_once("v1:before_tool_call:t1:x", {"to": "eve"}, clock.now_ms())
    assert stores.outbox.get("v1:before_tool_call:t1:x") == {"to": "tom"}
    assert stores.outbox.get("other") is None


def test_snapshots_are_gzip_json_under_deterministic_keys(
    stores: Stores, aws: dict[str, Any]
) -> None:
    stored = stores.blobs.put_snapshot("c1", "v1:tool_call:t1:a", {"messages": [1, 2]}, "f1.1")
    objects = aws["s3"].list_objects_v2(Bucket=aws["bucket"])["Contents"]
    (obj,) = objects
    assert obj["Key"] == stored.key
    assert obj["Key"].startswith("snapshots/c1/") and obj["Key"].endswith(".f1.1.json.gz")
    assert obj["Size"] == stored.size
    head = aws["s3"].head_object(Bucket=aws["bucket"], Key=obj["Key"])
    assert head["ContentEncoding"] == "gzip"
    assert stores.blobs.get_snapshot(obj["Key"], stored.digest) == {"messages": [1, 2]}

    # The same writer (fence) writes the same key; another writer never overwrites it.
    again = stores.blobs.put_snapshot("c1", "v1:tool_call:t1:a", {"messages": [1, 2]}, "f1.1")
    assert again == stored
    other = stores.blobs.put_snapshot("c1", "v1:tool_call:t1:a", {"messages": [3]}, "f2.2")
    assert other.key != stored.key
    assert stores.blobs.get_snapshot(stored.key, stored.digest) == {"messages": [1, 2]}


def test_a_snapshot_that_is_not_the_one_recorded_is_refused(
    stores: Stores, aws: dict[str, Any]
) -> None:
    stored = stores.blobs.put_snapshot("c1", "v1:tool_call:t1:a", {"messages": [1]}, "f1.1")
    # A modified object under the same key: its digest no longer matches the pointer's.
    aws["s3"].put_object(Bucket=aws["bucket"], Key=stored.key, Body=b"not gzip at all")
    with pytest.raises(errors.SnapshotLost, match="not the one"):
        stores.blobs.get_snapshot(stored.key, stored.digest)
    with pytest.raises(errors.SnapshotLost, match="cannot be read"):
        stores.blobs.get_snapshot(stored.key)


def test_missing_snapshot_is_an_error_and_missing_answer_is_none(stores: Stores) -> None:
    with pytest.raises(errors.SnapshotLost, match="gone"):
        stores.blobs.get_snapshot("snapshots/c1/nope.json.gz")
    assert stores.blobs.get_answer("answers/c1/nope.json.gz") is None
    key = stores.blobs.put_answer("c1", "i1", {"text": "done"})
    assert stores.blobs.get_answer(key) == {"text": "done"}


def test_identifiers_cannot_escape_their_partition(stores: Stores, clock: ManualClock) -> None:
    for bad in ("a#b", "../etc", "", "x" * 200, "a/b"):
        with pytest.raises(errors.InvalidInput):
            stores.chats.meta(bad)


@pytest.mark.parametrize("counter_known", ["right", "wrong"])
def test_a_best_effort_entry_that_loses_drops_only_itself(
    aws: dict[str, Any], stores: Stores, clock: ManualClock, counter_known: str
) -> None:
    from interlock.adapters import numbering

    if counter_known == "wrong":
        # This process believes the chat's event counter is elsewhere (another writer
        # moved it, or the table was made anew): the counter loses beside the entry.
        numbering.learn(aws["table"], "c1", 5)
    now = clock.now_ms()
    mine = stores.limits.reserve_slot("alice", "me", cap=1, hold_ms=60_000, now_ms=now)
    theirs = stores.limits.reserve_slot("bob", "them", cap=1, hold_ms=60_000, now_ms=now)
    event = stores.chats.event_entry("c1", "note", "alice", now)

    entries = [
        event,
        stores.limits.release_entry("bob", "not-them", theirs),  # loses: not the holder
        stores.limits.release_entry("alice", "me", mine),  # holds: must still commit
    ]
    transact(aws["dynamodb"], writes(entries), "test")

    assert [e.type for e in stores.chats.events("c1")] == ["note"]
    assert stores.limits.reserve_slot("alice", "new", cap=1, hold_ms=1, now_ms=now) == mine
    with pytest.raises(errors.LimitExceeded):
        stores.limits.reserve_slot("bob", "new", cap=1, hold_ms=1, now_ms=now)
