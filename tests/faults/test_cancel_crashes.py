"""Crash cells for a cancel: a real process cancelling a chat's request is SIGKILLed
before or after each of its AWS calls (or that call answers 500 after it landed), with
the request pending, or claimed by a worker that died right after its approve's claim
(its grant written). The person is told nothing, so they cancel again.

Every cell must end whole: the request cancelled, one `cancelled` event in the trail,
nothing granted (the next turn asks again instead of downloading), no slot held, and
nothing downloaded by anyone. A cancel used to write the pointer first and clean up
after: a kill in between left the grant, and the next turn downloaded without asking.
"""

from __future__ import annotations

import queue
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interlock import keys, manage
from interlock.adapters.factory import Stores, build_stores
from interlock.keys import ASK_POOL
from interlock.records import RequestState
from interlock.timing import ManualClock, StorePolicy
from interlock.turns import Caller, Runtime, TurnLimits, run_turn
from tests.agent.support import Models
from tests.conftest import fresh_storage
from tests.faults.zygote import Zygote

pytestmark = pytest.mark.server

START_MS = 1_800_000_000_000
# Past the dead worker's lease and any margin a taker waits: its claim has lapsed.
LAPSED_MS = StorePolicy().lease_ms + 20_000
# The cancel's calls: read the pointer, list the card's approval rows, the transaction.
CANCEL_CALLS = 3
MODES = ("kill_before", "kill_after", "ambiguous")


@dataclass(frozen=True)
class Cell:
    start: str  # pending, or claimed (its worker died after the approve's claim)
    at: int
    mode: str

    @property
    def name(self) -> str:
        return f"{self.start}/{self.at}/{self.mode}"


CELLS = [
    Cell(start, at, mode)
    for start in ("pending", "claimed")
    for at in range(CANCEL_CALLS)
    for mode in MODES
]


@pytest.fixture(scope="module")
def lab(emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    aws = fresh_storage(emulator.endpoint, "cancels")
    root = tmp_path_factory.mktemp("cancel-cells")
    forks = [Zygote("tests.faults.cancel_child", root / "children.log") for _ in range(2)]
    idle: queue.Queue[Zygote] = queue.Queue()
    for fork in forks:
        idle.put(fork)
    yield {**aws, "zygotes": idle, "root": root}
    for fork in forks:
        fork.close()


def _child(lab: dict[str, Any], spec: dict[str, Any]) -> int:
    forks: queue.Queue[Zygote] = lab["zygotes"]
    zygote = forks.get()
    try:
        code = zygote.run(
            {"endpoint": lab["endpoint"], "table": lab["table"], "bucket": lab["bucket"], **spec}
        )
    finally:
        forks.put(zygote)
    if code not in (0, -9):
        sys.stderr.write(zygote.log.read_text(errors="replace")[-3000:])
    return code


def _runtime(stores: Stores, clock: ManualClock, downloads: Path) -> Runtime:
    def fetch(url: str) -> str:
        with downloads.open("a") as log:
            log.write(url + "\n")
        return "id,value\n1,42"

    return Runtime(stores, Models(), clock=clock, fetch=fetch, limits=TurnLimits(heartbeat_s=600))


def _check(lab: dict[str, Any], cell: Cell) -> dict[str, Any]:
    stores = build_stores(lab["dynamodb"], lab["s3"], lab["table"], lab["bucket"])
    name = uuid.uuid4().hex[:10]
    chat, user = f"x-{name}", f"u-{name}"
    caller = Caller(user, frozenset({"reporter"}), trace_id="cancel-cell")
    downloads = lab["root"] / f"{name}.downloads"
    downloads.touch()
    clock = ManualClock(START_MS)
    rt = _runtime(stores, clock, downloads)
    paused = run_turn(rt, caller, chat, "please download the table")
    assert paused.offer is not None
    common = {"chat": chat, "user": user, "downloads": str(downloads)}
    died = None
    if cell.start == "claimed":
        # The approve's worker dies once its claim (and the grant with it) landed.
        died = _child(
            lab,
            {
                **common,
                "action": "approve",
                "interrupt_id": paused.offer.request.interrupt_id,
                "secret": paused.offer.secret,
                "now_ms": clock.now_ms(),
                "at": -1,
                "op": "GetObject snapshots",
                "mode": "kill_before",
            },
        )
        clock.advance(ms=LAPSED_MS)
    granted = [a.subject.name for a in stores.approvals.for_user(chat, user, clock.now_ms())]
    code = _child(
        lab,
        {**common, "action": "cancel", "now_ms": clock.now_ms(), "at": cell.at, "mode": cell.mode},
    )
    # Told nothing (or a 500), the person cancels again.
    retried = manage.cancel_request(stores, caller, chat, clock.now_ms())
    # The next turn asks again: nothing of the cancelled approve is left to act on.
    clock.advance(seconds=1)
    after = run_turn(rt, caller, chat, "please download the table")
    slots = (
        lab["dynamodb"]
        .get_item(
            TableName=lab["table"],
            Key={"pk": {"S": keys.user_pk(user)}, "sk": {"S": keys.SLOTS_SK}},
            ConsistentRead=True,
        )
        .get("Item", {})
    )
    trail = stores.chats.events(chat, limit=1000)
    return {
        "died": died,
        "exit": code,
        "granted_before": granted,
        "retried": retried.state,
        "cancelled_events": sum(1 for e in trail if e.type == "cancelled"),
        "asked_again": after.offer is not None,
        "downloads": downloads.read_text().splitlines(),
        # The new request holds one open-request slot; the cancelled one none.
        "ask_slots": sorted(k for k in slots if k.startswith(ASK_POOL)),
    }


@pytest.fixture(scope="module")
def outcomes(lab: dict[str, Any]) -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda cell: (cell.name, _check(lab, cell)), CELLS))
    return dict(results)


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.name)
def test_a_cancel_killed_anywhere_ends_whole_once_cancelled_again(
    outcomes: dict[str, dict[str, Any]], cell: Cell
) -> None:
    got = outcomes[cell.name]
    if cell.start == "claimed":
        assert got["died"] == -9 and got["granted_before"], "the approve's claim granted"
    if cell.mode.startswith("kill"):
        assert got["exit"] == -9, "the fault must have killed the process"
    assert got["retried"] is RequestState.CANCELLED
    assert got["cancelled_events"] == 1
    assert got["asked_again"], "the next turn asks instead of using a cancelled grant"
    assert got["downloads"] == []
    assert len(got["ask_slots"]) == 1, f"slots held: {got['ask_slots']}"
