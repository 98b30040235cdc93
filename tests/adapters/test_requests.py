"""The pointer store on moto: opening, secrets, claims, leases, finishing, chaining."""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

import pytest

from interlock import errors, keys
from interlock.adapters import requests as pointer
from interlock.adapters.factory import Stores
from interlock.outcomes import Offer
from interlock.pause import persist_pause
from interlock.ports import EntryRefused, NotPending, Role
from interlock.records import RequestState, StoredSnapshot, Subject, fresh_secret, new_request
from interlock.timing import CLOCK_SKEW_MS, DAY_S, ManualClock
from interlock.tokens import digest_of

CHAT = "chat-1"
CARD = {"sites": ["example.org"], "reason": "fetch the reference table"}

SNAP = StoredSnapshot("snapshots/x.json.gz", 1, "0" * 64)


def pause(
    stores: Stores,
    clock: ManualClock,
    interrupt_id: str = "v1:tool_call:t1:a",
    chat: str = CHAT,
    **extra: Any,
) -> Offer:
    return persist_pause(
        stores,
        chat_id=chat,
        user_id="alice",
        interrupt_id=interrupt_id,
        kind="approval",
        card=CARD,
        turn_seq=1,
        now_ms=clock.now_ms(),
        **{"snapshot": {"messages": ["hello"]}, **extra},
    )


def raw_item(aws: dict[str, Any], chat: str = CHAT) -> dict[str, Any]:
    return (
        aws["dynamodb"]
        .get_item(TableName=aws["table"], Key={"pk": {"S": f"CHAT#{chat}"}, "sk": {"S": "REQUEST"}})
        .get("Item", {})
    )


# -- opening -----------------------------------------------------------------------------


LARGE = {"messages": [__import__("os").urandom(6 * 1024).hex()]}


def s3_keys(aws: dict[str, Any]) -> list[str]:
    listed = aws["s3"].list_objects_v2(Bucket=aws["bucket"])
    return [o["Key"] for o in listed.get("Contents", [])]


@pytest.mark.parametrize("snapshot", [{"messages": ["hello"]}, LARGE], ids=["small", "large"])
def test_every_snapshot_is_stored_in_s3_and_its_pointer_keeps_the_key_and_digest(
    stores: Stores, clock: ManualClock, aws: dict[str, Any], snapshot: dict[str, Any]
) -> None:
    opened = pause(stores, clock, snapshot=snapshot)

    stored = stores.requests.get(CHAT, clock.now_ms())
    assert stored == opened.request
    assert stored.state is RequestState.PENDING
    assert s3_keys(aws) == [stored.snapshot_key]
    body = aws["s3"].get_object(Bucket=aws["bucket"], Key=stored.snapshot_key)["Body"].read()
    assert stored.snapshot_digest == digest_of(body) and len(stored.snapshot_digest) == 43
    assert stores.blobs.read_snapshot(stored.stored_snapshot) == snapshot
    item = raw_item(aws)
    assert "snapshot" not in item, "no snapshot bytes ride in the pointer"
    assert "sweep_shard" in item, "open requests are in the sparse expiry index"


def test_a_snapshot_that_is_not_the_recorded_one_is_refused(
    stores: Stores, clock: ManualClock
) -> None:
    stored = pause(stores, clock).request
    other = stores.blobs.put_snapshot(CHAT, "i", {"messages": ["forged"]})
    with pytest.raises(errors.SnapshotLost):
        stores.blobs.read_snapshot(replace(stored.stored_snapshot, key=other.key))


def test_pointer_is_never_written_when_the_snapshot_put_fails(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    # Given a bucket that refuses the PUT (it no longer exists)
    aws["s3"].delete_bucket(Bucket=aws["bucket"])

    with pytest.raises(errors.StoreError):
        pause(stores, clock, snapshot=LARGE)

    assert raw_item(aws) == {}


def test_pointer_is_never_written_when_the_snapshot_is_too_large(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    big = {"blob": __import__("os").urandom(6 * 1024 * 1024).hex()}
    with pytest.raises(errors.SnapshotTooLarge):
        persist_pause(
            stores,
            chat_id=CHAT,
            user_id="alice",
            interrupt_id="i",
            kind="approval",
            card=CARD,
            snapshot=big,
            turn_seq=1,
            now_ms=clock.now_ms(),
        )
    assert raw_item(aws) == {}
    listed = aws["s3"].list_objects_v2(Bucket=aws["bucket"])
    assert listed.get("KeyCount", 0) == 0


@pytest.mark.parametrize("lost", [Role.SLOT, Role.BUDGET])
def test_a_refused_rider_is_named_by_its_role_and_nothing_is_written(
    stores: Stores, clock: ManualClock, lost: Role
) -> None:
    now = clock.now_ms()
    stores.limits.reserve_slot("alice", "someone-else", cap=1, hold_ms=60_000, now_ms=now)
    stores.limits.spend("alice", "today", 3, cap=3)
    free_slot = stores.limits.slot_entry("alice", "me", 1, hold_ms=60_000, now_ms=now)
    held_slot = stores.limits.slot_entry("alice", "me", 0, hold_ms=60_000, now_ms=now)
    room = stores.limits.spend_entry("alice", "tomorrow", 1, cap=3)
    spent = stores.limits.spend_entry("alice", "today", 1, cap=3)
    event = stores.chats.event_entry(CHAT, "paused", "alice", now)
    riders = [room, held_slot, event] if lost is Role.SLOT else [spent, free_slot, event]
    request, _ = new_request(
        stores.policy,
        snapshot=SNAP,
        chat_id=CHAT,
        interrupt_id="v1:tool_call:t1:a",
        kind="approval",
        card=CARD,
        user_id="alice",
        turn_seq=1,
        now_ms=now,
    )

    with pytest.raises(EntryRefused) as refused:
        stores.requests.open(request, now, also=riders)

    assert refused.value.role is lost
    assert stores.requests.get(CHAT, now) is None
    assert stores.chats.events(CHAT) == []
    assert stores.limits.spend("alice", "tomorrow", 1, cap=3) == 1


def test_second_request_refused_while_one_is_live(stores: Stores, clock: ManualClock) -> None:
    first = pause(stores, clock)

    with pytest.raises(errors.ChatBusy) as refused:
        pause(stores, clock, interrupt_id="v1:tool_call:t2:b")

    assert refused.value.current == first.request
    assert stores.requests.get(CHAT, clock.now_ms()) == first.request


def test_second_request_allowed_once_the_first_is_done(stores: Stores, clock: ManualClock) -> None:
    first = pause(stores, clock)
    claim = stores.requests.claim(first.request, first.secret, "w1", clock.now_ms())
    stores.requests.finish(claim, answer_key="a", decision="approved", now_ms=clock.now_ms())

    second = pause(stores, clock, interrupt_id="v1:tool_call:t2:b")

    assert stores.requests.get(CHAT, clock.now_ms()) == second.request


def test_second_request_allowed_once_the_first_is_past_expiry(
    stores: Stores, clock: ManualClock
) -> None:
    pause(stores, clock, ttl_s=60)
    clock.advance(ms=60_000 + CLOCK_SKEW_MS)  # past its expiry by every clock

    second = pause(stores, clock, interrupt_id="v1:tool_call:t2:b")

    assert stores.requests.get(CHAT, clock.now_ms()) == second.request


def test_live_claim_past_expiry_still_blocks_a_new_request(
    stores: Stores, clock: ManualClock
) -> None:
    first = pause(stores, clock, ttl_s=60)
    clock.advance(seconds=59)
    stores.requests.claim(first.request, first.secret, "w1", clock.now_ms())
    clock.advance(seconds=5)  # past expiry, lease (30 s) still live

    with pytest.raises(errors.ChatBusy):
        pause(stores, clock, interrupt_id="v1:tool_call:t2:b")


def test_logical_expiry_is_clamped_below_the_snapshot_lifecycle(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock, ttl_s=365 * DAY_S)
    policy = stores.policy
    lifecycle_end = clock.now_ms() // 1000 + policy.snapshot_lifecycle_days * DAY_S

    assert opened.request.expires_at <= lifecycle_end - policy.lifecycle_margin_s
    assert opened.request.ttl == opened.request.expires_at + policy.retention_s


def test_oversized_card_is_refused_and_nothing_is_written(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    with pytest.raises(errors.TooLarge):
        persist_pause(
            stores,
            chat_id=CHAT,
            user_id="alice",
            interrupt_id="i",
            kind="approval",
            # Stored compressed: text that does not compress, over the item budget
            card={"text": secrets.token_urlsafe(310_000)},
            snapshot={},
            turn_seq=1,
            now_ms=clock.now_ms(),
        )
    assert raw_item(aws) == {}


# -- reading and the secret -----------------------------------------------------------------


def test_only_the_hash_of_the_secret_is_stored(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    opened = pause(stores, clock)
    assert opened.secret not in repr(raw_item(aws))


def test_reading_issues_a_fresh_secret_and_the_old_one_stops_working(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock)
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None

    fresh, fresh_hash = fresh_secret()
    rotated = stores.requests.rotate_secret(current, "stream", fresh_hash, clock.now_ms())
    reread = stores.requests.get(CHAT, clock.now_ms())
    assert reread is not None and reread == rotated

    with pytest.raises(errors.SecretRefused):
        stores.requests.claim(reread, opened.secret, "w1", clock.now_ms())
    assert stores.requests.claim(reread, fresh, "w1", clock.now_ms()).worker == "w1"


def test_a_read_on_one_surface_leaves_another_surfaces_secret_working(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock)  # the AG-UI stream holds `opened.secret`
    page, page_hash = fresh_secret()
    stores.requests.rotate_secret(opened.request, "page", page_hash, clock.now_ms())
    newer, newer_hash = fresh_secret()
    stores.requests.rotate_secret(opened.request, "page", newer_hash, clock.now_ms())
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None

    # The page's own older copy stops working; the stream's is untouched.
    with pytest.raises(errors.SecretRefused):
        stores.requests.claim(current, page, "w1", clock.now_ms())
    assert current.secret_field(newer) == "page_secret_hash"
    assert stores.requests.claim(current, opened.secret, "w1", clock.now_ms()).worker == "w1"


def test_a_claim_holds_when_another_surface_reads_between_its_read_and_its_write(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock)
    read = stores.requests.get(CHAT, clock.now_ms())
    assert read is not None
    # The card page opens the card after this answer's read, before its claim.
    stores.requests.rotate_secret(read, "page", fresh_secret()[1], clock.now_ms())
    stores.requests.rotate_secret(read, "chat", fresh_secret()[1], clock.now_ms())

    assert stores.requests.claim(read, opened.secret, "w1", clock.now_ms()).worker == "w1"


def test_a_claim_loses_to_its_own_surfaces_rotation_in_between(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock)
    read = stores.requests.get(CHAT, clock.now_ms())
    assert read is not None
    # A second AG-UI tab resyncs: the copy this answer holds is the older one now.
    stores.requests.rotate_secret(read, "stream", fresh_secret()[1], clock.now_ms())

    with pytest.raises(errors.SecretRefused):
        stores.requests.claim(read, opened.secret, "w1", clock.now_ms())
    after = stores.requests.get(CHAT, clock.now_ms())
    assert after is not None and after.state is RequestState.PENDING and after.worker is None


def test_an_expired_request_reads_as_expired_not_unknown(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock, ttl_s=60)
    clock.advance(seconds=61)

    stored = stores.requests.get(CHAT, clock.now_ms())
    assert stored is not None
    assert stored.status(clock.now_ms()) is RequestState.EXPIRED
    with pytest.raises(errors.RequestExpired):
        stores.requests.claim(stored, opened.secret, "w1", clock.now_ms())
    with pytest.raises(errors.RequestExpired):
        stores.requests.rotate_secret(opened.request, "stream", fresh_secret()[1], clock.now_ms())


def test_a_record_past_its_ttl_reads_as_absent(stores: Stores, clock: ManualClock) -> None:
    opened = pause(stores, clock, ttl_s=60)
    clock.advance(seconds=opened.request.ttl - clock.now_ms() // 1000)
    assert stores.requests.get(CHAT, clock.now_ms()) is None


def test_an_unknown_stored_state_is_an_error(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    pause(stores, clock)
    aws["dynamodb"].update_item(
        TableName=aws["table"],
        Key={"pk": {"S": f"CHAT#{CHAT}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":s": {"S": "approved-probably"}},
    )
    with pytest.raises(errors.StoreError, match="unknown stored request state"):
        stores.requests.get(CHAT, clock.now_ms())


# -- claims ------------------------------------------------------------------------------------


def test_claim_condition_reads_like_the_rule() -> None:
    assert pointer.CLAIM == (
        "#interrupt_id = :interrupt_id"
        " AND :secret_hash IN (#secret_hash, #page_secret_hash, #chat_secret_hash)"
        " AND (#state = :pending OR (#state = :claimed AND #lease_expires_at_ms <= :lapse_ms))"
        " AND #expires_at > :now_s AND #claim_count = :seen_count"
    )


def test_claim_sets_owner_lease_and_count(stores: Stores, clock: ManualClock) -> None:
    opened = pause(stores, clock)
    now = clock.now_ms()

    claim = stores.requests.claim(opened.request, opened.secret, "worker-a", now)

    assert claim.state is RequestState.CLAIMED
    assert claim.worker == "worker-a"
    assert claim.claim_count == 1
    assert claim.lease_token
    assert claim.lease_expires_at_ms == now + stores.policy.lease_ms
    assert claim.resume_deadline_ms == now + stores.policy.max_resume_ms


def test_loser_is_told_who_holds_the_claim_without_a_second_read(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock)
    stores.requests.claim(opened.request, opened.secret, "worker-a", clock.now_ms())

    # The loser still holds the record as it read it (pending): the write itself fails.
    with pytest.raises(errors.ResumeInProgress) as lost:
        stores.requests.claim(opened.request, opened.secret, "worker-b", clock.now_ms())

    assert lost.value.holder == "worker-a"


def test_wrong_id_is_unknown_and_wrong_secret_is_refused(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock)
    with pytest.raises(errors.SecretRefused):
        stores.requests.claim(opened.request, "not-the-secret", "w", clock.now_ms())
    other = opened.request.with_changes(interrupt_id="v1:tool_call:zz:z")
    with pytest.raises(errors.UnknownRequest):
        stores.requests.claim(other, opened.secret, "w", clock.now_ms())
    assert stores.requests.get(CHAT, clock.now_ms()) == opened.request


def test_a_lapsed_lease_is_taken_over_and_the_old_holder_is_refused(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock)
    old = stores.requests.claim(opened.request, opened.secret, "worker-a", clock.now_ms())
    clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS)

    new = stores.requests.claim(old, opened.secret, "worker-b", clock.now_ms())

    assert (new.worker, new.claim_count) == ("worker-b", 2)
    with pytest.raises(errors.LeaseLost):
        stores.requests.renew(old, clock.now_ms())
    with pytest.raises(errors.LeaseLost):
        stores.requests.finish(old, answer_key="k", decision="approved", now_ms=clock.now_ms())
    assert stores.requests.get(CHAT, clock.now_ms()).worker == "worker-b"  # type: ignore[union-attr]


def test_a_replacing_claim_withdraws_the_earlier_grants_in_its_own_transaction(
    stores: Stores, clock: ManualClock
) -> None:
    # Given an approve whose claim granted a row, and whose worker died before acting
    opened = pause(stores, clock)
    first = stores.requests.claim(
        opened.request, opened.secret, "worker-a", clock.now_ms(), answer=("approved", "1")
    )
    site = [Subject("site", "example.org")]
    stores.approvals.grant(CHAT, "alice", site, "card-1", clock.now_ms(), fence=first.fence)
    clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS)
    withdrawals = stores.approvals.withdraw_entries(CHAT, "alice", "card-1")

    # When a refused takeover brings them, nothing changes
    with pytest.raises(errors.SecretRefused):
        stores.requests.claim(
            first,
            "wrong",
            "worker-b",
            clock.now_ms(),
            answer=("rejected", "2"),
            replaces=withdrawals,
        )
    assert len(stores.approvals.for_user(CHAT, "alice", clock.now_ms())) == 1

    # And a takeover with another answer records it and drops the row, all at once
    second = stores.requests.claim(
        first,
        opened.secret,
        "worker-b",
        clock.now_ms(),
        answer=("rejected", "2"),
        replaces=withdrawals,
    )
    assert (second.decision, second.response, second.worker) == ("rejected", "2", "worker-b")
    assert stores.approvals.for_user(CHAT, "alice", clock.now_ms()) == []


# -- leases ------------------------------------------------------------------------------------


def test_renewal_extends_the_lease_but_never_past_the_deadline(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock)
    claim = stores.requests.claim(opened.request, opened.secret, "w", clock.now_ms())

    clock.advance(seconds=20)
    assert stores.requests.renew(claim, clock.now_ms()) == clock.now_ms() + stores.policy.lease_ms

    deadline = claim.resume_deadline_ms
    assert deadline is not None
    clock.advance(ms=deadline - clock.now_ms() - 1000)
    assert stores.requests.renew(claim, clock.now_ms()) == deadline
    clock.advance(ms=1000)
    with pytest.raises(errors.LeaseLost):
        stores.requests.renew(claim, clock.now_ms())


# -- finishing and replay ------------------------------------------------------------------------


def test_finish_marks_done_and_a_later_claim_replays(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    opened = pause(stores, clock)
    claim = stores.requests.claim(opened.request, opened.secret, "w", clock.now_ms())

    done = stores.requests.finish(
        claim,
        answer_key="answers/x",
        decision="approved",
        final_text="Here is the table.",
        now_ms=clock.now_ms(),
    )

    assert (done.state, done.answer_key, done.final_text) == (
        RequestState.DONE,
        "answers/x",
        "Here is the table.",
    )
    assert "sweep_shard" not in raw_item(aws), "done requests leave the expiry index"
    with pytest.raises(errors.AlreadyAnswered) as replay:
        stores.requests.claim(opened.request, opened.secret, "w2", clock.now_ms())
    assert replay.value.current == done


def test_replay_does_not_need_the_latest_secret(stores: Stores, clock: ManualClock) -> None:
    opened = pause(stores, clock)
    fresh, fresh_hash = fresh_secret()
    stores.requests.rotate_secret(opened.request, "stream", fresh_hash, clock.now_ms())
    claim = stores.requests.claim(
        opened.request.with_changes(secret_hash=fresh_hash),
        fresh,
        "w",
        clock.now_ms(),
    )
    stores.requests.finish(claim, answer_key="k", decision="approved", now_ms=clock.now_ms())

    # A second tab still holding the first secret is shown the outcome, not refused.
    with pytest.raises(errors.AlreadyAnswered):
        stores.requests.claim(opened.request, opened.secret, "w2", clock.now_ms())


def test_final_text_is_dropped_whole_when_it_would_not_fit(
    stores: Stores, clock: ManualClock
) -> None:
    opened = pause(stores, clock)
    claim = stores.requests.claim(opened.request, opened.secret, "w", clock.now_ms())

    done = stores.requests.finish(
        claim,
        answer_key="k",
        decision="approved",
        final_text="y" * (stores.policy.max_item_bytes - 100),
        now_ms=clock.now_ms(),
    )

    assert done.state is RequestState.DONE
    assert done.final_text is None


# -- chaining ------------------------------------------------------------------------------------


def test_chain_replaces_the_request_in_place(stores: Stores, clock: ManualClock) -> None:
    opened = pause(stores, clock)
    claim = stores.requests.claim(opened.request, opened.secret, "w", clock.now_ms())
    successor, secret = new_request(
        stores.policy,
        snapshot=SNAP,
        chat_id=CHAT,
        interrupt_id="v1:tool_call:t9:c",
        kind="approval",
        card={"n": 2},
        user_id="alice",
        turn_seq=1,
        now_ms=clock.now_ms(),
    )

    stores.requests.chain(claim, successor)

    stored = stores.requests.get(CHAT, clock.now_ms())
    assert stored is not None
    assert (stored.interrupt_id, stored.state, stored.claim_count) == (
        "v1:tool_call:t9:c",
        RequestState.PENDING,
        0,
    )
    assert stores.requests.claim(stored, secret, "w2", clock.now_ms()).worker == "w2"


def test_chain_after_a_lost_claim_is_refused(stores: Stores, clock: ManualClock) -> None:
    opened = pause(stores, clock)
    old = stores.requests.claim(opened.request, opened.secret, "w", clock.now_ms())
    clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS)
    stores.requests.claim(old, opened.secret, "w2", clock.now_ms())
    successor, _ = new_request(
        stores.policy,
        snapshot=SNAP,
        chat_id=CHAT,
        interrupt_id="v1:tool_call:t9:c",
        kind="approval",
        card={},
        user_id="alice",
        turn_seq=1,
        now_ms=clock.now_ms(),
    )

    with pytest.raises(errors.LeaseLost):
        stores.requests.chain(old, successor)
    assert stores.requests.get(CHAT, clock.now_ms()).interrupt_id == opened.request.interrupt_id  # type: ignore[union-attr]


# -- ending ----------------------------------------------------------------------------------------


def test_expire_and_cancel_end_an_answerable_request(stores: Stores, clock: ManualClock) -> None:
    opened = pause(stores, clock)
    cancelled = stores.requests.cancel(opened.request, "user cancelled", clock.now_ms())
    assert cancelled.state is RequestState.CANCELLED
    with pytest.raises(errors.RequestCancelled):
        stores.requests.claim(opened.request, opened.secret, "w", clock.now_ms())

    second = pause(stores, clock, interrupt_id="v1:tool_call:t2:b")
    expired = stores.requests.expire(second.request, "a new turn was saved", clock.now_ms())
    assert (expired.state, expired.ended_reason) == (RequestState.EXPIRED, "a new turn was saved")
    with pytest.raises(errors.RequestExpired, match="a new turn was saved"):
        stores.requests.claim(second.request, second.secret, "w", clock.now_ms())


def test_the_sweeper_can_expire_an_overdue_request(stores: Stores, clock: ManualClock) -> None:
    opened = pause(stores, clock, ttl_s=60)
    clock.advance(seconds=120)
    assert stores.requests.expire(opened.request, "timed out", clock.now_ms()).state is (
        RequestState.EXPIRED
    )


def test_ending_a_live_claim_is_refused(stores: Stores, clock: ManualClock) -> None:
    opened = pause(stores, clock)
    claim = stores.requests.claim(opened.request, opened.secret, "w", clock.now_ms())
    with pytest.raises(errors.ResumeInProgress):
        stores.requests.cancel(claim, "too late", clock.now_ms())


# -- heartbeat on the real store ----------------------------------------------------------------


def test_heartbeat_keeps_the_lease_and_stops_when_it_is_taken_over(
    stores: Stores, clock: ManualClock
) -> None:
    import time

    from interlock.heartbeat import Heartbeat

    opened = pause(stores, clock)
    claim = stores.requests.claim(opened.request, opened.secret, "w1", clock.now_ms())

    def renew() -> None:
        clock.advance(seconds=10)  # each beat, ten seconds of work have passed
        stores.requests.renew(claim, clock.now_ms())

    beat = Heartbeat(renew, 0.01).start()
    deadline = time.monotonic() + 10
    while beat.renewals < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    beat.stop()
    held = stores.requests.get(CHAT, clock.now_ms())
    assert held is not None and held.holds_live_claim(clock.now_ms())
    assert beat.renewals >= 5 and not beat.lost.is_set()

    # Once another worker takes the request over, the old heartbeat stops by itself.
    clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS)
    stores.requests.claim(held, opened.secret, "w2", clock.now_ms())
    beat = Heartbeat(renew, 0.01).start()
    assert beat.lost.wait(2.0)
    beat.stop()


def test_a_small_answer_is_stored_in_the_finish_and_a_large_one_is_not(
    stores: Stores, clock: ManualClock
) -> None:
    offer = pause(stores, clock)
    claim = stores.requests.claim(offer.request, offer.secret, "w1", clock.now_ms())
    rest = {"tool_calls": [{"name": "fetch_url"}], "message_id": "m-1"}
    budget = stores.policy.max_item_bytes

    assert stores.requests.answer_fits(claim, "done", rest)
    assert not stores.requests.answer_fits(claim, "x" * budget, rest)
    done = stores.requests.finish(
        claim,
        answer_key=None,
        answer=rest,
        final_text="done",
        decision="approved",
        now_ms=clock.now_ms(),
    )

    stored = stores.requests.get(CHAT, clock.now_ms())
    assert stored is not None and stored.state is RequestState.DONE
    assert (stored.answer_key, stored.final_text) == (None, "done")
    assert stored.answer == done.answer and stored.answer is not None
    assert '"message_id":"m-1"' in stored.answer
    with pytest.raises(ValueError):
        stores.requests.finish(
            claim, answer_key=None, answer=None, decision="approved", now_ms=clock.now_ms()
        )


def test_a_claim_in_one_transaction_never_takes_over_a_lapsed_claim(
    stores: Stores, clock: ManualClock
) -> None:
    # Given B read the request pending, then A claimed it, recorded a step and failed
    offer = pause(stores, clock)
    seen_by_b = offer.request
    a = stores.requests.claim(seen_by_b, offer.secret, "A", clock.now_ms(), ("approved", "{}"))
    stores.requests.record_step(a, 0, '{"k":"tool"}', acting=False)
    stores.requests.release(a, clock.now_ms(), reset=False)

    # When B claims what it read in one transaction
    with pytest.raises(NotPending) as lapsed:
        stores.requests.claim_with(
            seen_by_b, offer.secret, "B", clock.now_ms(), ("rejected", "{}"), lambda _: []
        )

    # Then nothing was written, and B is handed the claimed record to take over
    assert stores.requests.steps(lapsed.value.current) == ['{"k":"tool"}']
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None and current.decision == "approved" and current.worker == "A"


def test_the_inbox_lists_a_users_open_requests_newest_first_up_to_its_limit(
    stores: Stores, clock: ManualClock
) -> None:
    for chat in ("inbox-b", "inbox-a", "inbox-c"):
        pause(stores, clock, chat=chat)
        clock.advance(seconds=1)

    listed = stores.requests.open_for("alice", limit=2)

    assert [e.chat_id for e in listed] == ["inbox-c", "inbox-a"]
    assert stores.requests.open_for("bob", limit=5) == []


def test_the_inbox_goes_on_from_where_a_page_ended_even_within_one_millisecond(
    stores: Stores, clock: ManualClock
) -> None:
    for chat in ("inbox-a", "inbox-b", "inbox-c", "inbox-d"):
        pause(stores, clock, chat=chat)  # all in the same millisecond
    clock.advance(seconds=1)
    pause(stores, clock, chat="inbox-e")

    seen: list[str] = []
    after = None
    while True:
        page = stores.requests.open_for("alice", 2, after)
        seen += [e.chat_id for e in page]
        if len(page) < 2:
            break
        after = (page[-1].created_ms, page[-1].chat_id)

    assert seen[0] == "inbox-e"
    assert sorted(seen) == ["inbox-a", "inbox-b", "inbox-c", "inbox-d", "inbox-e"]


def test_a_claim_in_one_transaction_keeps_a_notice_mark_cleared_meanwhile(
    stores: Stores, clock: ManualClock
) -> None:
    # Given a request whose posts were owed, read before the mark was cleared
    offer = pause(stores, clock, notify_due_ms=clock.now_ms())
    read = stores.requests.get(CHAT, clock.now_ms())
    assert read is not None and read.notify_due_ms is not None
    stores.requests.notified(CHAT, offer.request.interrupt_id)

    # When it is claimed as read
    stores.requests.claim_with(
        read, offer.secret, "w1", clock.now_ms(), ("approved", "{}"), lambda claimed: []
    )

    # Then the mark stays cleared: the finder no longer lists the chat for its posts
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None and current.notify_due_ms is None
    shard = keys.sweep_shard(CHAT, keys.SWEEP_SHARDS)
    assert CHAT not in stores.channels.due_notices(shard, clock.now_ms() + 1, 10)


def test_an_unanswered_request_past_its_expiry_cannot_be_cancelled(
    stores: Stores, clock: ManualClock
) -> None:
    # Its timeout policy applies: the sweeper settles it, a cancel may not take it first
    opened = pause(stores, clock, ttl_s=60)
    clock.advance(seconds=61)

    with pytest.raises(errors.RequestExpired):
        stores.requests.cancel(opened.request, "user cancelled", clock.now_ms())
    assert stores.requests.get(CHAT, clock.now_ms()).state is RequestState.PENDING
    # While one answered in time may be cancelled past it: nothing was acted on yet
    clock.advance(ms=CLOCK_SKEW_MS)  # (the first is past its expiry by every clock)
    second = pause(stores, clock, interrupt_id="v1:tool_call:t2:b", ttl_s=60)
    claimed = stores.requests.claim(second.request, second.secret, "w", clock.now_ms())
    clock.advance(seconds=61 + stores.policy.lease_ms // 1000)
    assert stores.requests.cancel(claimed, "user cancelled", clock.now_ms()).state is (
        RequestState.CANCELLED
    )
