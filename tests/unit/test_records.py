"""Rules read off a pointer: derived expiry, lapsed leases, refusal order."""

from __future__ import annotations

import pytest

from interlock import errors
from interlock.records import (
    KEEPS_FAILING,
    TOO_MANY_CLAIMS,
    TOO_MANY_TAKEOVERS,
    RequestRecord,
    RequestState,
    StoredSnapshot,
    claim_progress,
    gave_up,
    given_up,
    new_request,
    refusal,
    stalls_now,
)
from interlock.timing import CLOCK_SKEW_MS, DAY_S, StorePolicy
from interlock.tokens import hash_secret, secret_matches

NOW_MS = 1_800_000_000_000


def request(**changes: object) -> RequestRecord:
    base = RequestRecord(
        chat_id="c",
        interrupt_id="i",
        kind="approval",
        card={},
        secret_hash=hash_secret("s"),
        snapshot_key="k",
        user_id="u",
        turn_seq=1,
        created_at=NOW_MS // 1000,
        expires_at=NOW_MS // 1000 + 60,
        ttl=NOW_MS // 1000 + 60 + DAY_S,
    )
    return base.with_changes(**changes)


def test_expiry_is_derived_on_read() -> None:
    r = request()
    assert r.status(NOW_MS) is RequestState.PENDING
    assert r.status(NOW_MS + 60_000) is RequestState.EXPIRED
    assert r.state is RequestState.PENDING, "nothing was stored"


def test_live_claim_past_expiry_stays_claimed_until_its_lease_lapses() -> None:
    r = request(state=RequestState.CLAIMED, lease_expires_at_ms=NOW_MS + 90_000)
    assert r.status(NOW_MS + 70_000) is RequestState.CLAIMED
    # Its lease counts as lapsed once over by every clock, its holder's too
    assert r.status(NOW_MS + 90_000) is RequestState.CLAIMED
    assert r.status(NOW_MS + 90_000 + CLOCK_SKEW_MS) is RequestState.EXPIRED


@pytest.mark.parametrize(
    ("record", "interrupt_id", "secret", "expected"),
    [
        (None, "i", "s", errors.UnknownRequest),
        (request(), "other", "s", errors.UnknownRequest),
        (request(state=RequestState.DONE), "i", "wrong", errors.AlreadyAnswered),
        (request(state=RequestState.CANCELLED), "i", "s", errors.RequestCancelled),
        (request(expires_at=NOW_MS // 1000), "i", "wrong", errors.RequestTimedOut),
        (
            request(state=RequestState.EXPIRED, ended_reason="a newer turn was saved"),
            "i",
            "s",
            errors.RequestExpired,
        ),
        (request(), "i", "wrong", errors.SecretRefused),
        (
            request(state=RequestState.CLAIMED, worker="w", lease_expires_at_ms=NOW_MS + 1),
            "i",
            "s",
            errors.ResumeInProgress,
        ),
        (
            request(state=RequestState.CLAIMED, worker="w", lease_expires_at_ms=NOW_MS + 1),
            "i",
            "wrong",
            errors.SecretRefused,
        ),
    ],
)
def test_refusal_order(
    record: RequestRecord | None, interrupt_id: str, secret: str, expected: type[Exception]
) -> None:
    assert type(refusal(record, interrupt_id, secret, NOW_MS)) is expected


def test_claimable_when_pending_or_lease_lapsed() -> None:
    assert refusal(request(), "i", "s", NOW_MS) is None
    lapsed = request(state=RequestState.CLAIMED, lease_expires_at_ms=NOW_MS - CLOCK_SKEW_MS)
    assert refusal(lapsed, "i", "s", NOW_MS) is None


def test_unknown_stored_state_raises() -> None:
    with pytest.raises(errors.StoreError):
        RequestState.parse("maybe")


def test_secrets_compare_by_digest() -> None:
    assert secret_matches(hash_secret("abc"), "abc")
    assert not secret_matches(hash_secret("abc"), "abd")
    assert not secret_matches(hash_secret("abc"), None)
    assert not secret_matches(hash_secret(""), "")


def test_policy_clamps_expiry_below_the_lifecycle() -> None:
    policy = StorePolicy()
    expires_at, ttl = policy.expiry(NOW_MS, ttl_s=100 * DAY_S)
    assert expires_at == NOW_MS // 1000 + (policy.snapshot_lifecycle_days - 1) * DAY_S
    assert ttl == expires_at + policy.retention_s
    assert policy.expiry(NOW_MS, ttl_s=60)[0] == NOW_MS // 1000 + 60


def test_a_new_request_keeps_only_its_secrets_hash_and_a_clamped_expiry() -> None:
    policy = StorePolicy()
    made, secret = new_request(
        policy,
        chat_id="c",
        interrupt_id="i",
        kind="approval",
        card={"title": "t"},
        user_id="u",
        turn_seq=3,
        now_ms=NOW_MS,
        snapshot=StoredSnapshot("snapshots/c/i", 10, "d" * 64),
        ttl_s=100 * DAY_S,
        owner_roles=("b", "a"),
    )
    again, other = new_request(
        policy,
        chat_id="c",
        interrupt_id="i",
        kind="approval",
        card={},
        user_id="u",
        turn_seq=3,
        now_ms=NOW_MS,
        snapshot=StoredSnapshot("snapshots/c/i", 10, "d" * 64),
    )

    assert secret not in repr(made) and secret_matches(made.secret_hash, secret)
    assert other != secret and not secret_matches(made.secret_hash, other)
    assert (made.expires_at, made.ttl) == policy.expiry(NOW_MS, 100 * DAY_S)
    assert again.expires_at == NOW_MS // 1000 + policy.request_ttl_s
    assert (made.snapshot_key, made.snapshot_digest) == ("snapshots/c/i", "d" * 64)
    assert made.owner_roles == ("a", "b") and made.status(NOW_MS) is RequestState.PENDING


def test_a_new_request_refuses_an_unsafe_user_id() -> None:
    with pytest.raises(errors.InvalidInput):
        new_request(
            StorePolicy(),
            chat_id="c",
            interrupt_id="i",
            kind="approval",
            card={},
            user_id="u/../v",
            turn_seq=1,
            now_ms=NOW_MS,
            snapshot=StoredSnapshot("k", 1, "d"),
        )


def _taken(record: RequestRecord, steps: int, *, new_journal: bool = False) -> RequestRecord:
    """`record` as the claim of a taker that counted `steps` journal steps leaves it."""
    stalls, seen = claim_progress(record, steps, new_journal=new_journal)
    return record.with_changes(
        state=RequestState.CLAIMED,
        claim_count=record.claim_count + 1,
        stalls=stalls,
        journal_seen=seen,
    )


def _cap(record: RequestRecord, steps: int | None = None) -> str | None:
    policy = StorePolicy()
    return given_up(
        record,
        policy.max_claims,
        policy.max_failures,
        max_total_claims=policy.max_total_claims,
        steps=steps,
    )


def test_a_first_claim_counts_as_one_stall_and_starts_from_an_empty_journal() -> None:
    first = _taken(request(), 0, new_journal=True)
    assert (first.claim_count, first.stalls, first.journal_seen) == (1, 1, 0)


def test_claims_that_add_nothing_add_up_to_the_cap() -> None:
    record = request()
    for _ in range(StorePolicy().max_claims):
        assert _cap(record, 0) is None
        record = _taken(record, 0)
    assert record.stalls == StorePolicy().max_claims
    assert _cap(record, 0) == TOO_MANY_CLAIMS
    assert _cap(record) == TOO_MANY_CLAIMS, "uncounted, every claim is presumed a stall"


def test_a_claim_that_found_the_journal_grown_starts_the_count_again() -> None:
    # Given two claims that added nothing, then a third that recorded 4 steps
    record = _taken(_taken(_taken(request(), 0, new_journal=True), 0), 0)
    assert (record.stalls, record.journal_seen) == (3, 0)

    # Then its taker, finding the 4 steps, is not given up and counts itself alone
    assert _cap(record, 4) is None
    record = _taken(record, 4)
    assert (record.stalls, record.journal_seen) == (1, 4)

    # And one that finds the journal as that claim found it counts on from there
    record = _taken(record, 4)
    assert (record.stalls, record.journal_seen) == (2, 4)
    assert _cap(record, 4) is None
    assert _cap(_taken(record, 4), 4) == TOO_MANY_CLAIMS


def test_a_run_killed_after_every_step_goes_on_to_the_hard_ceiling() -> None:
    policy = StorePolicy()
    record = _taken(request(), 0, new_journal=True)
    for steps in range(1, policy.max_total_claims):
        assert _cap(record, steps) is None, steps
        record = _taken(record, steps)
    assert record.claim_count == policy.max_total_claims and record.stalls == 1
    assert _cap(record, policy.max_total_claims) == TOO_MANY_TAKEOVERS


def test_another_answer_replacing_the_recorded_one_starts_a_journal_of_its_own() -> None:
    record = _taken(_taken(request(), 0, new_journal=True), 3)
    replaced = _taken(record, 3, new_journal=True)
    assert (replaced.stalls, replaced.journal_seen) == (record.stalls + 1, 0)


def test_a_reset_claim_is_not_counted_as_a_stall() -> None:
    claimed = _taken(_taken(request(), 0, new_journal=True), 0)
    reset = claimed.reset("t2")
    assert (reset.claim_count, reset.stalls, reset.journal_seen) == (1, 1, 0)
    assert reset.failures == 1


def test_an_item_of_an_earlier_version_reads_as_no_stalls() -> None:
    old = request(state=RequestState.CLAIMED, claim_count=2)  # no stalls stored
    assert stalls_now(old) == 0 and _cap(old, 0) is None


@pytest.mark.parametrize("reason", [TOO_MANY_CLAIMS, TOO_MANY_TAKEOVERS, KEEPS_FAILING])
def test_every_give_up_says_so_and_nothing_else_does(reason: str) -> None:
    ended = request(state=RequestState.EXPIRED, ended_reason=reason, decision="approved")
    assert reason.startswith("given up: ")
    assert gave_up(ended) == reason.removeprefix("given up: ")
    assert gave_up(request(state=RequestState.EXPIRED, ended_reason="a newer turn")) is None
    assert gave_up(request(state=RequestState.CLAIMED, ended_reason=reason)) is None
    earlier = request(
        state=RequestState.EXPIRED, ended_reason="denied: too many attempts to resume this request"
    )
    assert gave_up(earlier) == "denied: too many attempts to resume this request"
