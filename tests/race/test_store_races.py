"""Races between real threads over HTTP against a moto server on 127.0.0.1."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from interlock import errors
from interlock.adapters.factory import Stores
from interlock.pause import persist_pause
from interlock.records import RequestRecord, RequestState, StoredSnapshot, new_request
from interlock.timing import CLOCK_SKEW_MS, ManualClock

pytestmark = pytest.mark.server
THREADS = 32

SNAP = StoredSnapshot("snapshots/x.json.gz", 1, "0" * 64)


def _open(stores: Stores, clock: ManualClock) -> tuple[RequestRecord, str]:
    opened = persist_pause(
        stores,
        chat_id="race",
        user_id="alice",
        interrupt_id="v1:tool_call:t1:a",
        kind="approval",
        card={"sites": ["example.org"]},
        snapshot={"m": 1},
        turn_seq=1,
        now_ms=clock.now_ms(),
    )
    return opened.request, opened.secret


def _all_at_once(count: int, attempt: Any) -> list[Any]:
    """Run `attempt(n)` in `count` threads released together by a barrier."""
    barrier = threading.Barrier(count)

    def run(n: int) -> Any:
        barrier.wait()
        try:
            return attempt(n)
        except errors.InterlockError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def test_exactly_one_of_many_concurrent_claims_wins(
    server_stores: Stores, clock: ManualClock
) -> None:
    # Given one pending request, read by every contender before any claims
    request, secret = _open(server_stores, clock)

    # When 32 threads claim it at the same moment
    outcomes = _all_at_once(
        THREADS, lambda n: server_stores.requests.claim(request, secret, f"w{n}", clock.now_ms())
    )

    # Then exactly one wins, and every loser is told who holds it
    winners = [o for o in outcomes if isinstance(o, RequestRecord)]
    losers = [o for o in outcomes if not isinstance(o, RequestRecord)]
    assert len(winners) == 1
    assert all(isinstance(o, errors.ResumeInProgress) for o in losers), losers
    assert {o.holder for o in losers} == {winners[0].worker}
    stored = server_stores.requests.get("race", clock.now_ms())
    assert stored is not None and (stored.worker, stored.claim_count) == (winners[0].worker, 1)


def test_a_lapsed_lease_is_taken_over_by_exactly_one_contender(
    server_stores: Stores, clock: ManualClock
) -> None:
    request, secret = _open(server_stores, clock)
    dead = server_stores.requests.claim(request, secret, "dead-worker", clock.now_ms())
    clock.advance(ms=server_stores.policy.lease_ms + CLOCK_SKEW_MS + 1)

    outcomes = _all_at_once(
        THREADS, lambda n: server_stores.requests.claim(dead, secret, f"w{n}", clock.now_ms())
    )

    winners = [o for o in outcomes if isinstance(o, RequestRecord)]
    assert len(winners) == 1 and winners[0].claim_count == 2
    with pytest.raises(errors.LeaseLost):
        server_stores.requests.renew(dead, clock.now_ms())
    with pytest.raises(errors.LeaseLost):
        server_stores.requests.finish(
            dead, answer_key="k", decision="approved", now_ms=clock.now_ms()
        )
    successor, _ = new_request(
        server_stores.policy,
        snapshot=SNAP,
        chat_id="race",
        interrupt_id="v1:tool_call:t2:b",
        kind="approval",
        card={},
        user_id="alice",
        turn_seq=1,
        now_ms=clock.now_ms(),
    )
    with pytest.raises(errors.LeaseLost):
        server_stores.requests.chain(dead, successor)

    server_stores.requests.finish(
        winners[0], answer_key="k", decision="approved", now_ms=clock.now_ms()
    )
    done = server_stores.requests.get("race", clock.now_ms())
    assert done is not None and done.state is RequestState.DONE
    assert done.claim_count == winners[0].claim_count, "the winner's claim finished it"
    assert (done.lease_token, done.snapshot_key) == (None, None), "a finished run keeps neither"


def test_concurrent_finish_and_takeover_leave_one_outcome(
    server_stores: Stores, clock: ManualClock
) -> None:
    # A worker whose lease lapsed races a new claimant: either its finish lands first
    # (then the claimant is told the request is answered) or the takeover does (then
    # the finish is refused). Never both.
    request, secret = _open(server_stores, clock)
    old = server_stores.requests.claim(request, secret, "old", clock.now_ms())
    clock.advance(ms=server_stores.policy.lease_ms + CLOCK_SKEW_MS + 1)

    def attempt(n: int) -> Any:
        if n == 0:
            return server_stores.requests.finish(
                old, answer_key="k", decision="approved", now_ms=clock.now_ms()
            )
        return server_stores.requests.claim(old, secret, f"new{n}", clock.now_ms())

    outcomes = _all_at_once(8, attempt)
    finished = isinstance(outcomes[0], RequestRecord)
    claimed = [o for o in outcomes[1:] if isinstance(o, RequestRecord)]
    assert finished != bool(claimed)
    assert len(claimed) <= 1


def test_audit_numbers_are_unique_under_concurrent_writers(
    server_stores: Stores, clock: ManualClock
) -> None:
    seqs = _all_at_once(
        THREADS,
        lambda n: server_stores.chats.record("c1", "decision", "alice", clock.now_ms(), n=n).seq,
    )

    assert len(set(seqs)) == THREADS
    assert [e.seq for e in server_stores.chats.events("c1")] == sorted(seqs)


def test_concurrent_reservations_never_exceed_the_cap(
    server_stores: Stores, clock: ManualClock
) -> None:
    outcomes = _all_at_once(
        16,
        lambda n: server_stores.limits.reserve_slot(
            "alice", f"h{n}", cap=3, hold_ms=60_000, now_ms=clock.now_ms()
        ),
    )

    held = [o for o in outcomes if isinstance(o, int)]
    assert sorted(held) == [0, 1, 2], "each slot is held once"
    assert all(isinstance(o, errors.LimitExceeded) for o in outcomes if not isinstance(o, int))


def test_many_concurrent_reservations_with_room_all_succeed(
    server_stores: Stores, clock: ManualClock
) -> None:
    # No retries between contenders: with room for all, none is refused or fails.
    outcomes = _all_at_once(
        THREADS,
        lambda n: server_stores.limits.reserve_slot(
            "alice", f"h{n}", cap=THREADS * 2, hold_ms=60_000, now_ms=clock.now_ms()
        ),
    )
    assert all(isinstance(o, int) for o in outcomes), outcomes
    assert len(set(outcomes)) == THREADS


def test_outbox_sends_once_under_concurrent_writers(
    server_stores: Stores, clock: ManualClock
) -> None:
    outcomes = _all_at_once(
        16, lambda n: server_stores.outbox.put_once("k1", {"by": n}, clock.now_ms())
    )
    assert outcomes.count(True) == 1
