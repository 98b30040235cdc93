"""The time rules read by two workers whose clocks disagree by the tolerated skew.

One worker wrote a time (a lease's end, an expiry) by its own clock; another judges it
by its own, up to 10 s ahead or behind. The taker (who takes a lease over, recovers a
claim, settles a request, takes a chat from a turn) waits the margin out; the holder
and the person keep their own clock. Each test puts the two clocks `TOLERATED_MS` apart
either way and holds the rule to its promise.
"""

from __future__ import annotations

from typing import Final

import pytest

from interlock import errors
from interlock.heartbeat import Heartbeat
from interlock.records import ChatMeta, RequestRecord, RequestState, refusal
from interlock.tokens import hash_secret

# The skew the design promises to tolerate (docs/architecture.md, "Clocks"). Written
# out rather than read from `timing.CLOCK_SKEW_MS`, so these tests hold the code to the
# promise: with a smaller margin they fail.
TOLERATED_MS: Final = 10_000
SKEWS = pytest.mark.parametrize(
    "skew_ms", [TOLERATED_MS, -TOLERATED_MS], ids=["taker-ahead", "taker-behind"]
)
NOW_MS: Final = 1_800_000_000_000
LEASE_END_MS: Final = NOW_MS + 30_000
GRACE_MS: Final = 30_000


def claimed(**fields: object) -> RequestRecord:
    values: dict[str, object] = {
        "chat_id": "c1",
        "interrupt_id": "i",
        "kind": "approval",
        "card": {},
        "secret_hash": hash_secret("s"),
        "snapshot_key": "k",
        "user_id": "alice",
        "turn_seq": 1,
        "created_at": NOW_MS // 1000,
        "expires_at": NOW_MS // 1000 + 3600,
        "ttl": NOW_MS // 1000 + 7200,
        "state": RequestState.CLAIMED,
        "worker": "holder",
        "lease_token": "t",
        "lease_expires_at_ms": LEASE_END_MS,
        "claim_count": 1,
    }
    return RequestRecord(**{**values, **fields})  # type: ignore[arg-type]


@SKEWS
def test_a_holder_has_stopped_before_a_taker_judges_its_lease_lapsed(skew_ms: int) -> None:
    # Given a holder whose heartbeat knows the lease it stored, and a taker `skew_ms` off
    record = claimed()
    beat = Heartbeat(lambda: None, 60, until_ms=LEASE_END_MS)
    line = LEASE_END_MS + TOLERATED_MS  # where the taker acts, by its own clock

    # Then up to its line the taker finds the claim live, and a person is told so
    assert not record.lease_lapsed(line - 1)
    assert isinstance(refusal(record, "i", "s", line - 1), errors.ResumeInProgress)
    # And once it may take over, the holder's own clock has passed its lease: it stopped
    assert record.lease_lapsed(line) and refusal(record, "i", "s", line) is None
    assert not beat.holds(line - skew_ms)


@SKEWS
def test_a_stranded_claim_is_recovered_only_after_the_grace_on_every_clock(
    skew_ms: int,
) -> None:
    # Given a claim whose worker died, a person and a sweeper `skew_ms` ahead of them
    record = claimed()
    line = LEASE_END_MS + GRACE_MS + TOLERATED_MS  # the sweeper's, by its own clock

    # Then the sweeper leaves it alone until its line
    assert not record.stranded(line - 1, GRACE_MS)
    assert record.stranded(line, GRACE_MS)
    # By when the person has had the whole grace by their own clock
    assert line - skew_ms >= LEASE_END_MS + GRACE_MS


@SKEWS
def test_a_request_is_overdue_only_once_past_its_expiry_on_every_clock(skew_ms: int) -> None:
    # Given a pending request and a sweeper `skew_ms` off the person answering it
    record = claimed(state=RequestState.PENDING, lease_expires_at_ms=None, worker=None)
    expiry_ms = record.expires_at * 1000
    line = expiry_ms + TOLERATED_MS  # the sweeper's, by its own clock

    # Then the sweeper settles it only from its line, and a new request may replace it
    # only then: by when the person's own clock has passed the expiry they were shown,
    # until which it is theirs to answer
    assert not record.overdue(line - 1) and record.blocks_new_request(line - 1)
    assert record.overdue(line) and not record.blocks_new_request(line)
    assert line - skew_ms >= expiry_ms
    assert record.claimable(expiry_ms - 1) and not record.claimable(expiry_ms)
    # And a reader is shown it expired at the stated time, as the person was told
    assert record.status(expiry_ms) is RequestState.EXPIRED


@SKEWS
def test_a_turn_is_taken_from_only_once_its_lease_is_over_on_every_clock(skew_ms: int) -> None:
    # Given a running turn's lease written by its worker, and a next turn `skew_ms` off
    meta = ChatMeta("c1", owner="alice", last_turn=1, run_token="t", run_until_ms=LEASE_END_MS)
    line = LEASE_END_MS + TOLERATED_MS

    # Then the next turn finds it running until its line, when the turn's own clock
    # has passed its lease
    assert meta.running(line - 1)
    assert not meta.running(line) and line - skew_ms >= LEASE_END_MS
