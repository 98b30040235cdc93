"""Injected-error cells: every AWS call of a cancel, a claim (a person's approve and the
run it starts, to its finish), a takeover (a person's Deny over a worker gone quiet), the
sweeper's settling of an overdue request and its recovery of a stranded claim, each in
turn answering unclearly or refusing:

- `ambiguous`: the call is served, then answers 500 (AWS's own retries spent);
- `timeout`: the call is served, then the read of its answer times out;
- `throttle`: the call is refused before it is served (nothing landed).

The person (or the sweeper's next pass) then does what they would: told an error, they
try once more. Every cell must end as decided and told truthfully: the request ended the
way the person (or the timeout) decided, the effect ran exactly as often as that allows,
every recorded decision has exactly one event, nothing granted outlives a decision that
withdrew it, no slot is held, and nobody is told `in_progress` about their own recorded
answer.

A cell's calls are the ones a fault-free run of its phase makes, found by tracing that
run first; each cell faults the n-th call of its kind, wherever it falls. The results
are written to `artifacts/unclear_answers.json`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from interlock import errors, keys, manage
from interlock.adapters.factory import Stores, build_stores
from interlock.keys import ASK_POOL
from interlock.records import RequestState
from interlock.resume import resume_turn
from interlock.sweeper import sweep
from interlock.timing import ManualClock, StorePolicy
from interlock.turns import Caller, Runtime, TurnLimits, run_turn
from tests.agent.support import Models, Transport
from tests.faults.injector import FaultPlan
from tests.faults.wrapper import Faulty

ROOT = Path(__file__).resolve().parents[2]
REPORT_FILE = ROOT / "artifacts" / "unclear_answers.json"
MODES = ("ambiguous", "timeout", "throttle")
APPROVE = {"decision": "approve"}
DENY = {"decision": "reject", "reason": "not that one"}
SITE = "data.example.org"
# Past a lease and any margin a taker waits for: the quiet worker's claim has lapsed.
LAPSED_MS = StorePolicy().lease_ms + 20_000
# Past that and the recovery grace: the sweeper's to continue.
STRANDED_MS = LAPSED_MS + StorePolicy().recovery_grace_ms + 20_000
# Past the request's expiry and any margin: the sweeper's to settle.
OVERDUE_MS = StorePolicy().request_ttl_s * 1000 + 20_000
RESULTS: dict[str, Any] = {}
# Errors that tell the person to try again (a 503 or a 500 on the wire).
TRY_AGAIN = (errors.StoreError, errors.RunFailed)


@dataclass
class Lab:
    """One cell's world: its own chat and user on the shared in-process table."""

    aws: dict[str, Any]
    stores: Stores
    clock: ManualClock
    name: str
    transport: Transport = field(default_factory=Transport)
    told: list[str] = field(default_factory=list)
    quiet: Faulty | None = None
    quiet_told: list[str] = field(default_factory=list)
    quiet_thread: threading.Thread | None = None

    @property
    def chat(self) -> str:
        return f"c-{self.name}"

    @property
    def user(self) -> Caller:
        return Caller(f"u-{self.name}", frozenset({"reporter"}), trace_id=f"t-{self.name}")

    def runtime(self, stores: Stores | None = None, worker: str = "w") -> Runtime:
        return Runtime(
            stores or self.stores,
            Models(),
            clock=self.clock,
            fetch=self.transport,
            # A slot held no longer than a lease: the quiet worker's has lapsed when its
            # claim has, so a takeover takes the first slot it tries, whatever its
            # (random) order, and every cell makes the calls its trace made.
            limits=TurnLimits(heartbeat_s=600, slot_hold_ms=StorePolicy().lease_ms),
            worker_id=worker,
        )

    def pause(self) -> tuple[str, str]:
        result = run_turn(self.runtime(), self.user, self.chat, "please download the table")
        assert result.offer is not None
        return result.offer.request.interrupt_id, result.offer.secret

    def answer(self, offer: tuple[str, str], payload: Any, rt: Runtime | None = None) -> Any:
        return resume_turn(
            rt or self.runtime(),
            self.user,
            self.chat,
            interrupt_id=offer[0],
            secret=offer[1],
            status="resolved",
            payload=payload,
        )

    def go_quiet(self, offer: tuple[str, str]) -> None:
        """A worker approves, claims and then stops before its run reads the snapshot
        (frozen: its lease runs out while it holds still)."""
        self.quiet = Faulty(self.stores.blobs, stall={"read_snapshot"})
        quiet_rt = self.runtime(replace(self.stores, blobs=self.quiet), worker="quiet")

        def approve() -> None:
            try:
                self.answer(offer, APPROVE, quiet_rt)
            except errors.InterlockError as lost:
                # Its caller gave up long ago (a gateway answers in 29 s): kept apart.
                self.quiet_told.append(lost.code)

        self.quiet_thread = threading.Thread(target=approve, daemon=True)
        self.quiet_thread.start()
        assert self.quiet.reached["read_snapshot"].wait(10)

    def wake(self) -> None:
        """The quiet worker goes on, long after: it holds nothing any more."""
        if self.quiet is not None and self.quiet_thread is not None:
            self.quiet.release()
            self.quiet_thread.join(30)


@dataclass(frozen=True)
class Flow:
    """A story: what comes before the faulted phase, the phase, the retry a person or
    the sweeper's next pass makes when the phase failed, and what must hold at the end."""

    setup: Callable[[Lab], Any]
    phase: Callable[[Lab, Any], Any]
    again: Callable[[Lab, Any], Any]
    state: RequestState
    decision: str | None
    downloads: int
    events: dict[str, int]


def _cancel(lab: Lab, offer: Any) -> Any:
    return manage.cancel_request(lab.stores, lab.user, lab.chat, lab.clock.now_ms())


def _lapsed_claim(lab: Lab) -> Any:
    offer = lab.pause()
    lab.go_quiet(offer)
    lab.clock.advance(ms=LAPSED_MS)
    return offer


def _stranded_claim(lab: Lab) -> Any:
    offer = lab.pause()
    lab.go_quiet(offer)
    lab.clock.advance(ms=STRANDED_MS)
    return offer


def _overdue(lab: Lab) -> Any:
    offer = lab.pause()
    lab.clock.advance(ms=OVERDUE_MS)
    return offer


def _sweep(lab: Lab, offer: Any) -> Any:
    report = sweep(lab.runtime(worker="sweeper"), lab.clock.now_ms())
    if report.failed:
        raise errors.StoreError("the sweep left a request unsettled")
    return report


def _sweep_later(lab: Lab, offer: Any) -> Any:
    # The next pass comes after the failed one's claim (if it landed) lapsed.
    lab.clock.advance(ms=STRANDED_MS)
    return sweep(lab.runtime(worker="sweeper-2"), lab.clock.now_ms())


FLOWS: dict[str, Flow] = {
    "cancel": Flow(
        setup=lambda lab: lab.pause(),
        phase=_cancel,
        again=_cancel,
        state=RequestState.CANCELLED,
        decision=None,
        downloads=0,
        events={"cancelled": 1, "decision": 0},
    ),
    "cancel-lapsed-claim": Flow(
        setup=_lapsed_claim,
        phase=_cancel,
        again=_cancel,
        state=RequestState.CANCELLED,
        decision=None,
        downloads=0,
        events={"cancelled": 1, "decision": 1},
    ),
    "approve": Flow(
        setup=lambda lab: lab.pause(),
        phase=lambda lab, offer: lab.answer(offer, APPROVE),
        again=lambda lab, offer: lab.answer(offer, APPROVE),
        state=RequestState.DONE,
        decision="approved",
        downloads=1,
        events={"decision": 1},
    ),
    "takeover-deny": Flow(
        setup=_lapsed_claim,
        phase=lambda lab, offer: lab.answer(offer, DENY),
        again=lambda lab, offer: lab.answer(offer, DENY),
        state=RequestState.DONE,
        decision="rejected",
        downloads=0,
        # The quiet worker's approve, then the Deny that replaced it.
        events={"decision": 2},
    ),
    "settle-overdue": Flow(
        setup=_overdue,
        phase=_sweep,
        again=_sweep_later,
        state=RequestState.DONE,
        decision="timed_out",
        downloads=0,
        events={"timed_out": 1, "decision": 0},
    ),
    "recover-stranded": Flow(
        setup=_stranded_claim,
        phase=_sweep,
        again=_sweep_later,
        state=RequestState.DONE,
        decision="approved",
        downloads=1,
        events={"decision": 1},
    ),
}


def _traced(aws: dict[str, Any], flow: Flow, trace: Path) -> list[str]:
    """The calls a fault-free run of the flow's phase makes, described."""
    lab = _lab(aws, "trace")
    started = flow.setup(lab)
    plan = FaultPlan(trace=trace)
    plan.attach(aws["dynamodb"])
    try:
        flow.phase(lab, started)
    finally:
        _detach(aws, plan)
        lab.wake()
    return [json.loads(line)["op"] for line in trace.read_text().splitlines()]


def _target(op: str) -> str:
    """The kind of call `op` is, as a fault plan names it: a user's slots item is
    described with the slot or day it writes, which differ from one user to another."""
    if op.startswith("UpdateItem SLOTS"):
        return " ".join(op.split(" ")[:3]) + "*"  # a slot taken (SET) or budget spent (ADD)
    return op


def _detach(aws: dict[str, Any], plan: FaultPlan) -> None:
    events = aws["dynamodb"].meta.events
    events.unregister("before-parameter-build", plan._before)
    events.unregister("after-call", plan._after)


_COUNTER = iter(range(1_000_000))


def _lab(aws: dict[str, Any], name: str) -> Lab:
    stores = build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"])
    return Lab(aws, stores, ManualClock(), f"{name}-{next(_COUNTER)}")


def _verdict(lab: Lab, flow: Flow) -> list[str]:
    stores, now = lab.stores, lab.clock.now_ms()
    broken: list[str] = []
    request = stores.requests.get(lab.chat, now)
    if request is None or request.state is not flow.state:
        broken.append(f"ended {request.state if request else None}, not {flow.state}")
    elif flow.decision is not None and request.decision != flow.decision:
        broken.append(f"decided {request.decision}, not {flow.decision}")
    if len(lab.transport.urls) != flow.downloads:
        broken.append(f"{len(lab.transport.urls)} downloads, not {flow.downloads}")
    trail = stores.chats.events(lab.chat, limit=1000)
    # A run that failed before it acted on anything is answerable afresh (its answer
    # dropped): the person's next answer is recorded anew, with its own event.
    resets = sum(1 for e in trail if e.type == "run_failed" and e.detail.get("reset"))
    for kind, wanted in flow.events.items():
        wanted += resets if kind == "decision" else 0
        found = sum(1 for event in trail if event.type == kind)
        if found != wanted:
            broken.append(f"{found} {kind} events, not {wanted}")
    granted = stores.approvals.for_user(lab.chat, lab.user.user_id, now)
    if bool(granted) != (flow.decision == "approved"):
        broken.append(f"approvals {[a.subject.name for a in granted]} for {flow.decision}")
    slots = (
        lab.aws["dynamodb"]
        .get_item(
            TableName=lab.aws["table"],
            Key={"pk": {"S": keys.user_pk(lab.user.user_id)}, "sk": {"S": keys.SLOTS_SK}},
            ConsistentRead=True,
        )
        .get("Item", {})
    )
    if any(name.startswith(ASK_POOL) for name in slots):
        broken.append("the open-request slot is still held")
    if any("in_progress" in told for told in lab.told):
        broken.append(f"told {lab.told}")
    return broken


def _cell(aws: dict[str, Any], flow: Flow, op: str, nth: int, mode: str) -> dict[str, Any]:
    lab = _lab(aws, "cell")
    started = flow.setup(lab)
    plan = FaultPlan(mode=mode, op=op, nth=nth)  # type: ignore[arg-type]
    plan.attach(aws["dynamodb"])
    try:
        flow.phase(lab, started)
        lab.told.append("ok")
    except errors.ResumeInProgress as busy:
        lab.told.append(f"in_progress: {busy}")
    except TRY_AGAIN as failed:
        lab.told.append(f"try again: {failed.code}")
    finally:
        _detach(aws, plan)
    if lab.told[-1] != "ok":
        flow.again(lab, started)
    lab.wake()
    # Whatever the quiet worker did once woken is part of the story: it must not act.
    if flow.phase is _sweep:
        _sweep_later(lab, started)
    return {"told": lab.told, "fired": plan._seen.get(op, 0) > nth, "broken": _verdict(lab, flow)}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(FLOWS))
def test_every_call_of_a_transition_answering_unclearly_ends_as_decided(
    aws: dict[str, Any], name: str, mode: str, tmp_path: Path
) -> None:
    flow = FLOWS[name]
    ops = _traced(aws, flow, tmp_path / "trace.jsonl")
    assert ops, "the phase made no AWS call"
    cells = {}
    for index, op in enumerate(ops):
        target = _target(op)
        nth = sum(1 for earlier in ops[:index] if _target(earlier) == target)
        cells[f"{index}:{op}"] = _cell(aws, flow, target, nth, mode)
    RESULTS[f"{name}/{mode}"] = cells
    broken = {where: cell for where, cell in cells.items() if cell["broken"]}
    assert not broken, json.dumps(broken, indent=1)
    unfired = [where for where, cell in cells.items() if not cell["fired"]]
    assert not unfired, f"never injected: {unfired}"


def teardown_module() -> None:
    REPORT_FILE.parent.mkdir(exist_ok=True)
    REPORT_FILE.write_text(json.dumps(RESULTS, indent=1, sort_keys=True))
