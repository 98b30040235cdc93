"""Rules read off a pointer: derived expiry, lapsed leases, refusal order."""

from __future__ import annotations

import pytest

from interlock import errors
from interlock.records import RequestRecord, RequestState, StoredSnapshot, new_request, refusal
from interlock.timing import DAY_S, StorePolicy
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
    assert r.status(NOW_MS + 90_000) is RequestState.EXPIRED


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
    lapsed = request(state=RequestState.CLAIMED, lease_expires_at_ms=NOW_MS)
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
