"""A worker that lost its lease must not act.

Worker A claims a request and then stalls just before its effect (the outbox record;
approval rows are written with the claim itself, so for those it stalls right after the
claim), while its renewals fail, until its lease lapses. Meanwhile the
request is taken over, answered again with a rejection, cancelled or swept. When A
wakes it performs no side effect and grants nothing: every such write is fenced by the
claim A no longer holds.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import pytest

from examples.analyst.script import DEMO_SCENARIOS
from interlock import errors
from interlock.harness.model import ScriptedModel
from interlock.manage import cancel_request
from interlock.ports import Stores
from interlock.records import RequestState, Subject
from interlock.resume import resume_turn
from interlock.sweeper import sweep
from interlock.timing import CLOCK_SKEW_MS, ManualClock
from interlock.turns import Caller, Runtime, TurnLimits, run_turn
from tests.e2e.support import finished_by, outbox_records
from tests.faults.wrapper import Faulty

pytestmark = pytest.mark.server

ALICE = Caller("alice", frozenset({"reporter"}))
SITE = Subject("site", "data.example.org")
APPROVE = {"decision": "approve"}


def _runtime(stores: Stores, clock: ManualClock, worker: str) -> Runtime:
    return Runtime(
        stores,
        lambda: ScriptedModel(DEMO_SCENARIOS),
        clock=clock,
        fetch=lambda url: "a,b\n1,2",
        # Beats every 20 ms; renewals that fail keep failing, so the lease runs out.
        limits=TurnLimits(heartbeat_s=0.02, max_concurrent=16),
        worker_id=worker,
    )


class Stalled:
    """Worker A: answers, then freezes before `method` of `port` until released."""

    def __init__(
        self, stores: Stores, clock: ManualClock, chat: str, port: str, method: str
    ) -> None:
        self.stall = Faulty(getattr(stores, port), stall={method})
        self.method = method
        renewals = Faulty(stores.requests, fail={"renew"})
        faulty = dataclasses.replace(stores, requests=renewals, **{port: self.stall})
        self.rt = _runtime(faulty, clock, "A")
        self.chat = chat
        self.error: BaseException | None = None
        self.result: Any = None
        self._thread: threading.Thread | None = None

    def start(self, interrupt_id: str, secret: str) -> Stalled:
        def run() -> None:
            try:
                self.result = answer(self.rt, self.chat, interrupt_id, secret, APPROVE)
            except BaseException as exc:  # the test reads it
                self.error = exc

        self._thread = threading.Thread(target=run)
        self._thread.start()
        assert self.stall.reached[self.method].wait(30), "A never reached its effect"
        return self

    def wake(self) -> None:
        self.stall.release()
        assert self._thread is not None
        self._thread.join(30)


def answer(rt: Runtime, chat: str, interrupt_id: str, secret: str, payload: Any) -> Any:
    return resume_turn(
        rt,
        ALICE,
        chat,
        interrupt_id=interrupt_id,
        secret=secret,
        status="resolved",
        payload=payload,
    )


def _paused(stores: Stores, clock: ManualClock, chat: str, prompt: str) -> tuple[str, str]:
    result = run_turn(_runtime(stores, clock, "pauser"), ALICE, chat, prompt)
    assert result.offer is not None
    return result.offer.request.interrupt_id, result.offer.secret


Intervention = Callable[[Stores, ManualClock, str, str, str], None]


def _taken_over(
    stores: Stores, clock: ManualClock, chat: str, interrupt_id: str, secret: str
) -> None:
    assert (
        answer(_runtime(stores, clock, "B"), chat, interrupt_id, secret, APPROVE).outcome
        == "completed"
    )


def _rejected(
    stores: Stores, clock: ManualClock, chat: str, interrupt_id: str, secret: str
) -> None:
    # A rejection once A started the report's body does not undo the approval: it binds
    # (refused, naming it), and B carries the approval out.
    with pytest.raises(errors.DecisionBinding, match="Approved by alice"):
        answer(_runtime(stores, clock, "B"), chat, interrupt_id, secret, {"decision": "reject"})
    _taken_over(stores, clock, chat, interrupt_id, secret)


def _cancel_refused(
    stores: Stores, clock: ManualClock, chat: str, interrupt_id: str, secret: str
) -> None:
    # Likewise a cancel: refused once the body started, then the approval is carried out.
    with pytest.raises(errors.DecisionBinding):
        cancel_request(stores, ALICE, chat, clock.now_ms())
    _taken_over(stores, clock, chat, interrupt_id, secret)


def _cancelled(
    stores: Stores, clock: ManualClock, chat: str, interrupt_id: str, secret: str
) -> None:
    cancel_request(stores, ALICE, chat, clock.now_ms())


def _swept(stores: Stores, clock: ManualClock, chat: str, interrupt_id: str, secret: str) -> None:
    clock.advance(seconds=stores.policy.request_ttl_s)
    report = sweep(_runtime(stores, clock, "sweeper"), clock.now_ms())
    assert report.continued == 1  # the recorded approval, not a timeout


INTERVENTIONS: dict[str, tuple[Intervention, RequestState, int]] = {
    # what happens while A is stalled: (intervention, final state, reports sent)
    "taken over": (_taken_over, RequestState.DONE, 1),
    "rejected": (_rejected, RequestState.DONE, 1),
    "cancelled": (_cancelled, RequestState.CANCELLED, 0),
    "cancel refused": (_cancel_refused, RequestState.DONE, 1),
    "swept": (_swept, RequestState.DONE, 1),
}
# A stalled inside the report's body, which it started (marked acted) while it still held
# its lease: a cancel comes too late for it.
WHILE_SENDING = [case for case in INTERVENTIONS if case != "cancelled"]


@pytest.mark.parametrize("case", WHILE_SENDING)
def test_a_stalled_worker_sends_nothing_after_losing_its_lease(
    server_stores: Stores, server_aws: dict[str, Any], clock: ManualClock, case: str
) -> None:
    intervene, final_state, reports = INTERVENTIONS[case]
    chat = f"stalled-report-{case.replace(' ', '-')}"
    # Given A approved the report and froze right before recording it, renewals failing
    interrupt_id, secret = _paused(server_stores, clock, chat, "send the weekly report")
    a = Stalled(server_stores, clock, chat, "outbox", "put_once").start(interrupt_id, secret)
    clock.advance(ms=server_stores.policy.lease_ms + CLOCK_SKEW_MS + 1)

    # When the request is dealt with by someone else, and only then A wakes up
    intervene(server_stores, clock, chat, interrupt_id, secret)
    a.wake()

    # Then A stopped with a lost lease, and what was sent matches the recorded decision
    assert isinstance(a.error, errors.LeaseLost), a.error or a.result
    request = server_stores.requests.get(chat, clock.now_ms())
    assert request is not None and request.state is final_state
    assert len(outbox_records(server_aws)) == reports
    if final_state is RequestState.DONE:
        assert request.decision == "approved"
        assert finished_by(server_stores, chat) in {"B", "sweeper"}, "not A, which lost its lease"


@pytest.mark.parametrize("case", ["taken over", "cancelled"])
def test_a_stalled_worker_grants_nothing_after_losing_its_lease(
    server_stores: Stores, clock: ManualClock, case: str
) -> None:
    intervene, final_state, _ = INTERVENTIONS[case]
    chat = f"stalled-grant-{case.replace(' ', '-')}"
    # Given A approved a download, its claim wrote the rows, and A froze right after
    interrupt_id, secret = _paused(server_stores, clock, chat, "download the table")
    a = Stalled(server_stores, clock, chat, "blobs", "read_snapshot").start(interrupt_id, secret)
    assert {r.subject for r in server_stores.approvals.for_user(chat, "alice", clock.now_ms())} == {
        SITE
    }
    clock.advance(ms=server_stores.policy.lease_ms + CLOCK_SKEW_MS + 1)

    # When the request is taken over or cancelled, and A wakes up
    intervene(server_stores, clock, chat, interrupt_id, secret)
    a.wake()

    # Then A wrote no row: the rows are exactly the ones the final decision allows
    assert isinstance(a.error, errors.LeaseLost), a.error or a.result
    rows = server_stores.approvals.for_user(chat, "alice", clock.now_ms())
    granted = {row.subject for row in rows}
    assert granted == ({SITE} if final_state is RequestState.DONE else set())
    assert all(row.granted_by == "alice" for row in rows)
