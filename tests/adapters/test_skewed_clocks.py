"""Two workers whose clocks disagree by the tolerated skew, on one store.

Each test runs two `ManualClock`s `TOLERATED_MS` apart, one way or the other, on the
same store (both moto transports and the in-memory stores): the side that takes
something away (a takeover, the sweeper's recovery or settle) acts only once the time
another worker wrote is over by every clock, and the holder and the person keep their
own: a holder is never taken from while it believes its lease held, and a person is
never pre-empted before what they were promised.
"""

from __future__ import annotations

import json
from typing import Final

import pytest

from examples.analyst.script import DEMO_SCENARIOS
from interlock import errors
from interlock.adapters.factory import Stores
from interlock.fanout import overdue_chats
from interlock.harness.model import ScriptedModel
from interlock.heartbeat import Heartbeat
from interlock.outcomes import Offer
from interlock.records import RequestRecord, RequestState
from interlock.resume import resume_turn
from interlock.sweeper import settle_overdue
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, TurnLimits, run_turn

# The skew the design promises to tolerate (docs/architecture.md, "Clocks"). Written
# out rather than read from `timing.CLOCK_SKEW_MS`, so these tests hold the code to the
# promise: with a smaller margin they fail.
TOLERATED_MS: Final = 10_000
SKEWS = pytest.mark.parametrize(
    "skew_ms", [TOLERATED_MS, -TOLERATED_MS], ids=["taker-ahead", "taker-behind"]
)
ALICE = Caller("alice", frozenset({"reporter"}))
APPROVE = {"decision": "approve"}
DENY = {"decision": "reject"}


class Two:
    """Two workers' clocks, `skew_ms` apart: `mine` (the holder's, the person's, the
    opener's) and `theirs` (the taker's), moved together."""

    def __init__(self, skew_ms: int) -> None:
        self.mine = ManualClock()
        self.theirs = ManualClock(self.mine.now_ms() + skew_ms)

    def taker_reads(self, at_ms: int) -> None:
        """Move both clocks on until the taker's reads `at_ms`."""
        self._on(at_ms - self.theirs.now_ms())

    def mine_reads(self, at_ms: int) -> None:
        """Move both clocks on until mine reads `at_ms`."""
        self._on(at_ms - self.mine.now_ms())

    def _on(self, step_ms: int) -> None:
        assert step_ms >= 0, "clocks only move on"
        self.mine.advance(ms=step_ms)
        self.theirs.advance(ms=step_ms)


def _runtime(stores: Stores, clock: ManualClock, worker: str) -> Runtime:
    return Runtime(
        stores,
        lambda: ScriptedModel(DEMO_SCENARIOS),
        clock=clock,
        fetch=lambda url: "a,b\n1,2",
        limits=TurnLimits(heartbeat_s=60, max_concurrent=16),
        worker_id=worker,
    )


def _paused(stores: Stores, clock: ManualClock, chat: str) -> Offer:
    result = run_turn(_runtime(stores, clock, "pauser"), ALICE, chat, "download the table")
    assert result.offer is not None
    return result.offer


def _answer(stores: Stores, clock: ManualClock, chat: str, offer: Offer, payload: object) -> str:
    done = resume_turn(
        _runtime(stores, clock, "person"),
        ALICE,
        chat,
        interrupt_id=offer.request.interrupt_id,
        secret=offer.secret,
        status="resolved",
        payload=payload,
    )
    assert done.outcome == "completed"
    return done.decision or ""


def _claimed_by_a_dead_worker(stores: Stores, clock: ManualClock, offer: Offer) -> RequestRecord:
    """alice's approve, claimed by a worker (on `clock`) that died right after."""
    request = offer.request
    answer = json.dumps({request.interrupt_id: APPROVE}, separators=(",", ":"))
    return stores.requests.claim(
        request, offer.secret, "dead", clock.now_ms(), ("approved", answer), by="alice"
    )


def _found(stores: Stores, clock: ManualClock) -> list[str]:
    grace = stores.policy.recovery_grace_ms
    return list(overdue_chats(stores.requests, clock.now_ms(), 100, grace))


@SKEWS
def test_a_taker_never_takes_a_lease_its_holder_still_believes_held(
    stores: Stores, skew_ms: int
) -> None:
    # Given a holder's claim and its heartbeat, and a taker whose clock is `skew_ms` off
    clocks = Two(skew_ms)
    offer = _paused(stores, clocks.mine, "c-takeover")
    claim = stores.requests.claim(offer.request, offer.secret, "holder", clocks.mine.now_ms())
    assert claim.lease_expires_at_ms is not None
    beat = Heartbeat(lambda: None, 60, until_ms=claim.lease_expires_at_ms)
    line = claim.lease_expires_at_ms + TOLERATED_MS  # the taker's, by its own clock

    # When a person's takeover and the sweeper's recovery try just before that line
    clocks.taker_reads(line - 1)
    with pytest.raises(errors.ResumeInProgress):
        stores.requests.claim(claim, offer.secret, "taker", clocks.theirs.now_ms())
    with pytest.raises(errors.ResumeInProgress):
        stores.requests.claim_lapsed(claim, "sweeper", clocks.theirs.now_ms())

    # Then they are refused; and at the line the holder's own clock has passed its
    # lease (it starts nothing more), and the takeover goes through
    clocks.taker_reads(line)
    assert not beat.holds(clocks.mine.now_ms())
    taken = stores.requests.claim(claim, offer.secret, "taker", clocks.theirs.now_ms())
    assert (taken.worker, taken.claim_count) == ("taker", 2)


@SKEWS
def test_a_persons_deny_within_the_grace_wins_over_a_skewed_sweeper(
    stores: Stores, skew_ms: int
) -> None:
    # Given alice's approve whose worker died right after its claim, and a sweeper
    # whose clock is `skew_ms` off hers
    clocks = Two(skew_ms)
    chat = "c-grace"
    offer = _paused(stores, clocks.mine, chat)
    claim = _claimed_by_a_dead_worker(stores, clocks.mine, offer)
    assert claim.lease_expires_at_ms is not None
    grace = stores.policy.recovery_grace_ms
    line = claim.lease_expires_at_ms + grace + TOLERATED_MS  # the sweeper's, by its clock

    # When the sweeper comes by just before its line (with a sweeper 10 s ahead, alice
    # is 29.999 s into the 30 s grace by her own clock)
    clocks.taker_reads(line - 1)
    sweeper = _runtime(stores, clocks.theirs, "sweeper")
    assert chat not in _found(stores, clocks.theirs)
    assert settle_overdue(sweeper, chat, clocks.theirs.now_ms()) == "skipped"

    # Then alice's Deny, given now, is the answer that runs: nothing acted on the approve
    assert _answer(stores, clocks.mine, chat, offer, DENY) == "rejected"
    done = stores.requests.get(chat, clocks.mine.now_ms())
    assert done is not None and (done.state, done.decision) == (RequestState.DONE, "rejected")
    assert stores.approvals.for_user(chat, "alice", clocks.mine.now_ms()) == []


@SKEWS
def test_the_sweeper_settles_only_once_the_expiry_is_past_on_every_clock(
    stores: Stores, skew_ms: int
) -> None:
    # Given an unanswered request, and a sweeper `skew_ms` off the clock that opened it
    clocks = Two(skew_ms)
    chat = "c-expiry"
    offer = _paused(stores, clocks.mine, chat)
    expiry_ms = offer.request.expires_at * 1000
    line = expiry_ms + TOLERATED_MS  # the sweeper's, by its own clock
    sweeper = _runtime(stores, clocks.theirs, "sweeper")

    # When the sweeper comes by just before its line, it neither finds nor settles it
    clocks.taker_reads(line - 1)
    assert chat not in _found(stores, clocks.theirs)
    assert settle_overdue(sweeper, chat, clocks.theirs.now_ms()) == "skipped"
    with pytest.raises(errors.InterlockError):
        stores.requests.claim_overdue(
            offer.request, "sweeper", clocks.theirs.now_ms(), ("timed_out", "{}")
        )

    # Then at its line the expiry is past on the opener's clock too, and it settles it
    clocks.taker_reads(line)
    assert clocks.mine.now_ms() >= expiry_ms
    assert chat in _found(stores, clocks.theirs)
    assert settle_overdue(sweeper, chat, clocks.theirs.now_ms()) == "timed_out"


def _last_moment(stores: Stores, skew_ms: int) -> tuple[Two, Offer, Runtime]:
    clocks = Two(skew_ms)
    offer = _paused(stores, clocks.mine, "c-last")
    return clocks, offer, _runtime(stores, clocks.theirs, "sweeper")


def test_a_person_answering_at_the_stated_expiry_wins_over_a_sweeper_10_s_ahead(
    stores: Stores,
) -> None:
    # Given an unanswered request, and a sweeper whose clock is 10 s ahead of alice's
    clocks, offer, sweeper = _last_moment(stores, TOLERATED_MS)
    expiry_ms = offer.request.expires_at * 1000

    # When alice answers at the last moment her card promised, by her clock, and the
    # sweeper (reading 9.999 s past the expiry) comes by first
    clocks.mine_reads(expiry_ms - 1)
    assert settle_overdue(sweeper, "c-last", clocks.theirs.now_ms()) == "skipped"

    # Then her answer is the one that runs
    assert _answer(stores, clocks.mine, "c-last", offer, APPROVE) == "approved"
    done = stores.requests.get("c-last", clocks.mine.now_ms())
    assert done is not None and (done.state, done.decision) == (RequestState.DONE, "approved")


def test_a_person_past_the_stated_expiry_is_refused_by_her_clock_and_a_sweeper_behind_waits(
    stores: Stores,
) -> None:
    # Given an unanswered request, and a sweeper whose clock is 10 s behind alice's
    clocks, offer, sweeper = _last_moment(stores, -TOLERATED_MS)
    expiry_ms = offer.request.expires_at * 1000
    line = expiry_ms + TOLERATED_MS  # the sweeper's, by its own clock

    # When alice answers just past the stated expiry by her clock, she is refused (the
    # person's side keeps its own clock), though no sweeper has settled it yet
    clocks.mine_reads(expiry_ms)
    with pytest.raises(errors.RequestTimedOut):
        _answer(stores, clocks.mine, "c-last", offer, APPROVE)

    # Then the sweeper behind her still waits its own margin out, then settles it
    clocks.taker_reads(line - 1)
    assert settle_overdue(sweeper, "c-last", clocks.theirs.now_ms()) == "skipped"
    clocks.taker_reads(line)
    assert settle_overdue(sweeper, "c-last", clocks.theirs.now_ms()) == "timed_out"
