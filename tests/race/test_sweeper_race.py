"""Two sweepers racing over the same overdue requests settle each exactly once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from interlock.adapters.factory import Stores
from interlock.runtime.model import ScriptedModel
from interlock.runtime.scenarios import DEMO_SCENARIOS
from interlock.sweeper import SweepReport, sweep
from interlock.timing import ManualClock
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
    clock.advance(seconds=server_stores.policy.request_ttl_s)

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
