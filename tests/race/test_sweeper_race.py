"""Two sweepers racing over the same overdue requests settle each exactly once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from examples.analyst.script import DEMO_SCENARIOS
from interlock.adapters.factory import Stores
from interlock.harness.model import ScriptedModel
from interlock.records import RequestRecord, RequestState
from interlock.sweeper import SweepReport, sweep
from interlock.timing import CLOCK_SKEW_MS, ManualClock
from interlock.turns import Caller, Runtime, TurnLimits, run_turn

pytestmark = pytest.mark.server
CHATS = [f"overdue-{n}" for n in range(6)]


def test_two_sweepers_settle_each_overdue_request_once(
    server_stores: Stores, clock: ManualClock
) -> None:
    # Given six unanswered requests past their expiry
    def runtime(worker: str) -> Runtime:
        return Runtime(
            server_stores,
            lambda: ScriptedModel(DEMO_SCENARIOS),
            clock=clock,
            limits=TurnLimits(heartbeat_s=60, max_concurrent=16),
            worker_id=worker,
        )

    alice = Caller("alice", frozenset({"reporter"}))
    for chat in CHATS:
        assert run_turn(runtime("pauser"), alice, chat, "send the report").outcome == "interrupted"
    clock.advance(seconds=server_stores.policy.request_ttl_s, ms=CLOCK_SKEW_MS)

    # When two sweepers run at the same moment
    barrier = threading.Barrier(2)

    def run(worker: str) -> SweepReport:
        barrier.wait(timeout=10)
        return sweep(runtime(worker), clock.now_ms())

    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(run, ["sweeper-a", "sweeper-b"]))

    # Then every request was settled by exactly one of them
    assert sum(r.timed_out for r in reports) == len(CHATS)
    assert sorted(c for r in reports for c in r.chats) == sorted(CHATS)
    for chat in CHATS:
        request = server_stores.requests.get(chat, clock.now_ms())
        assert (request.decision, request.claim_count) == ("timed_out", 1)
        events = [e.type for e in server_stores.chats.events(chat)]
        assert events.count("timed_out") == 1 and events.count("turn_completed") == 1
        assert server_stores.outbox.get(f"{chat}#{request.card['tool_use_id']}") is None


def _report_runtime(stores: Stores, clock: ManualClock, worker: str) -> Runtime:
    return Runtime(
        stores,
        lambda: ScriptedModel(DEMO_SCENARIOS),
        clock=clock,
        limits=TurnLimits(heartbeat_s=60, max_concurrent=16),
        worker_id=worker,
    )


def test_a_sweep_reaching_a_request_late_leases_it_from_the_time_of_its_claim(
    server_stores: Stores, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an overdue request, and a sweep whose own start lies ten minutes back
    alice = Caller("alice", frozenset({"reporter"}))
    run_turn(
        _report_runtime(server_stores, clock, "pauser"), alice, "late-sweep", "send the report"
    )
    clock.advance(seconds=server_stores.policy.request_ttl_s + 600, ms=CLOCK_SKEW_MS)
    started_ms = clock.now_ms() - 600_000

    # When it reaches the request now (the claim it takes is seen as it is written: the
    # finish that follows removes the lease)
    claims: list[RequestRecord] = []
    claim_overdue = server_stores.requests.claim_overdue

    def claiming(*args: Any, **kwargs: Any) -> RequestRecord:
        claims.append(claim_overdue(*args, **kwargs))
        return claims[-1]

    monkeypatch.setattr(server_stores.requests, "claim_overdue", claiming)
    sweep(_report_runtime(server_stores, clock, "sweeper"), started_ms)

    # Then the lease it took runs from now, not from the sweep's start
    assert [c.lease_expires_at_ms for c in claims] == [
        clock.now_ms() + server_stores.policy.lease_ms
    ]
    request = server_stores.requests.get("late-sweep", clock.now_ms())
    assert request is not None and request.state is RequestState.DONE


def test_a_sweep_stops_claiming_before_its_deadline(
    server_stores: Stores, clock: ManualClock
) -> None:
    alice = Caller("alice", frozenset({"reporter"}))
    run_turn(_report_runtime(server_stores, clock, "pauser"), alice, "deadline", "send the report")
    clock.advance(seconds=server_stores.policy.request_ttl_s + 1, ms=CLOCK_SKEW_MS)

    # A sweep with less time left than settling one request takes leaves it for the next
    report = sweep(
        _report_runtime(server_stores, clock, "sweeper"),
        clock.now_ms(),
        deadline_ms=clock.now_ms() + 5_000,
    )

    assert (report.found, report.deferred, report.timed_out) == (1, 1, 0)
    request = server_stores.requests.get("deadline", clock.now_ms())
    assert request is not None and request.claim_count == 0


def test_overlapping_sweeps_settle_a_request_once(
    server_stores: Stores, clock: ManualClock
) -> None:
    # Given an overdue request, and a first sweep that is slow in the middle of settling it
    alice = Caller("alice", frozenset({"reporter"}))
    run_turn(_report_runtime(server_stores, clock, "pauser"), alice, "overlap", "send the report")
    clock.advance(seconds=server_stores.policy.request_ttl_s + 1, ms=CLOCK_SKEW_MS)
    inside, go_on = threading.Event(), threading.Event()

    class Slow(ScriptedModel):
        async def stream(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            inside.set()
            go_on.wait(timeout=30)
            async for event in super().stream(*args, **kwargs):
                yield event

    slow = Runtime(
        server_stores,
        lambda: Slow(DEMO_SCENARIOS),
        clock=clock,
        limits=TurnLimits(heartbeat_s=60),
        worker_id="slow",
    )
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(sweep, slow, clock.now_ms())
        assert inside.wait(timeout=30)

        # When the next scheduled sweep runs while the first still works
        second = sweep(_report_runtime(server_stores, clock, "next"), clock.now_ms())
        go_on.set()
        first_report = first.result(timeout=30)

    # Then the second skipped it, the first settled it, once
    assert (second.skipped, second.timed_out) == (1, 0)
    assert first_report.timed_out == 1
    request = server_stores.requests.get("overlap", clock.now_ms())
    assert request is not None and (request.decision, request.claim_count) == ("timed_out", 1)
    events = [e.type for e in server_stores.chats.events("overlap")]
    assert events.count("timed_out") == 1 and events.count("turn_completed") == 1


def test_a_sweep_racing_a_persons_answer_settles_the_request_once(
    server_stores: Stores, server_aws: dict[str, object], clock: ManualClock
) -> None:
    # Given a request at its expiry, a person whose clock says it is still open and a
    # sweeper whose clock says it is overdue by every clock (clocks of two machines
    # further apart than `CLOCK_SKEW_MS`: within it the sweeper would wait the person out)
    from interlock.resume import resume_turn
    from tests.e2e.support import outbox_records

    alice = Caller("alice", frozenset({"reporter"}))
    rt = _report_runtime(server_stores, clock, "pauser")
    offer = run_turn(rt, alice, "race-person", "send the report").offer
    assert offer is not None
    person_clock = ManualClock(offer.request.expires_at * 1000 - 500)
    sweeper_clock = ManualClock(offer.request.expires_at * 1000 + CLOCK_SKEW_MS + 500)
    barrier = threading.Barrier(2)

    def person() -> object:
        barrier.wait(timeout=10)
        try:
            return resume_turn(
                _report_runtime(server_stores, person_clock, "person"),
                alice,
                "race-person",
                interrupt_id=offer.request.interrupt_id,
                secret=offer.secret,
                status="resolved",
                payload={"decision": "approve"},
            ).decision
        except Exception as lost:  # the loser's refusal is the point
            return type(lost).__name__

    def sweeper() -> SweepReport:
        barrier.wait(timeout=10)
        return sweep(
            _report_runtime(server_stores, sweeper_clock, "sweeper"), sweeper_clock.now_ms()
        )

    # When both act at once
    with ThreadPoolExecutor(max_workers=2) as pool:
        said, swept = pool.submit(person), pool.submit(sweeper)
        person_result, report = said.result(timeout=60), swept.result(timeout=60)

    # Then exactly one of them settled it, and the report went out only if approved
    request = server_stores.requests.get("race-person", sweeper_clock.now_ms())
    assert request is not None and request.state.value == "done" and request.claim_count == 1
    person_won = person_result == "approved"
    assert person_won != (report.timed_out == 1), (person_result, report)
    assert request.decision == ("approved" if person_won else "timed_out")
    assert len(outbox_records(server_aws)) == (1 if person_won else 0)
