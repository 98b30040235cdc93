"""Exactly once across real processes: pause in one, resume in another, crash, take over.

Each process is its own interpreter running `half.py`, sharing nothing with the others
but a moto server on 127.0.0.1 and a work dir: whatever survives a process is in the
store. The test process reads the store to judge what happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interlock import errors
from interlock.adapters.factory import Stores
from interlock.records import RequestState
from interlock.timing import CLOCK_SKEW_MS, SystemClock
from tests.e2e.support import (
    DOWNLOAD_IN_TOOL,
    REPORT_AT_GATE,
    TIMEOUT_S,
    Placement,
    answer,
    assert_outbox_records,
    finished_by,
    pointer,
    runtime,
    wait_for,
)
from tests.forks import Forked, fork_server

pytestmark = pytest.mark.server

HALF = Path(__file__).with_name("half.py")
# The same short lease in every process of a crash: a dead claim lapses in 3 s while a
# live worker's heartbeat renews it ten times over (on a loaded two-core machine a 1.5 s
# lease was seen to lapse under a live worker, which then rightly started no tool).
CRASH_LEASE = ("--lease-ms", "3000", "--heartbeat-s", "0.3")


@dataclass(frozen=True)
class Crash:
    """Where the first resuming worker stops dead, and what its successor must see."""

    placement: Placement
    hang: str  # "outbox": right after the report is recorded; "fetch": inside the download
    answer: str
    fetched_by: tuple[str, ...]


CRASHES = [
    Crash(REPORT_AT_GATE, "outbox", "was already sent; not sending it twice", ()),
    # A download is a read, not a side effect: the successor fetches again, by design.
    Crash(DOWNLOAD_IN_TOOL, "fetch", "The reference table begins: a,b", ("B", "C")),
]


class Lab:
    """Child interpreters sharing one table, bucket and work dir."""

    def __init__(self, aws: dict[str, Any], work: Path, chat: str) -> None:
        self.aws = aws
        self.work = work
        self.chat = chat
        self._children: list[Forked] = []

    def start(self, role: str, name: str, *extra: str) -> Forked:
        argv = [sys.executable, str(HALF), role, "--name", name, "--chat", self.chat]
        argv += ["--endpoint", self.aws["endpoint"], "--work", str(self.work)]
        argv += ["--table", self.aws["table"], "--bucket", self.aws["bucket"], *extra]
        with (self.work / f"{name}.log").open("wb") as log:
            child = fork_server().spawn(argv, stdout=log, stderr=subprocess.STDOUT)
        self._children.append(child)
        return child

    def run(self, role: str, name: str, *extra: str) -> None:
        code = self.start(role, name, *extra).wait(timeout=TIMEOUT_S)
        assert code == 0, f"{name} exited with {code}:\n{self.log(name)}"

    def pause(self, placement: Placement, *extra: str) -> dict[str, Any]:
        self.run("pause", "A", "--prompt", placement.prompt, *extra)
        return self._json("offer.json")

    def resume(self, name: str, *extra: str) -> dict[str, Any]:
        self.run("resume", name, *extra)
        return self._json(f"{name}.json")

    def wait_until_hung(self, child: Forked, name: str) -> None:
        marker = self.work / f"{name}.hung"
        wait_for(lambda: marker.exists() or child.poll() is not None, f"{name} to hang")
        assert child.poll() is None, f"{name} exited before hanging:\n{self.log(name)}"

    def fetched_by(self) -> tuple[str, ...]:
        """Which process called the fetch transport, once per call."""
        log = self.work / "fetch.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return tuple(line.split()[0] for line in lines)

    def log(self, name: str) -> str:
        return (self.work / f"{name}.log").read_text()

    def kill_all(self) -> None:
        for child in self._children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=TIMEOUT_S)

    def _json(self, name: str) -> dict[str, Any]:
        return json.loads((self.work / name).read_text())  # type: ignore[no-any-return]


@pytest.fixture
def lab(server_aws: dict[str, Any], tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(server_aws, tmp_path, chat="e2e-chat")
    try:
        yield lab
    finally:
        lab.kill_all()


def wait_for_lapse(stores: Stores, chat: str) -> None:
    """Until the pointer's lease is over by every clock, as a taker judges it (a dead
    holder renews no more): the clock margin behind the wall clock."""
    lease = pointer(stores, chat).lease_expires_at_ms
    assert lease is not None
    lapsed = lease + CLOCK_SKEW_MS
    wait_for(
        lambda: SystemClock().now_ms() > lapsed,
        "the lease to lapse",
        timeout_s=10 + CLOCK_SKEW_MS / 1000,
    )


@pytest.mark.parametrize("placement", [DOWNLOAD_IN_TOOL, REPORT_AT_GATE], ids=lambda p: p.name)
def test_a_pause_in_one_process_is_answered_once_in_another(
    lab: Lab, server_stores: Stores, server_aws: dict[str, Any], placement: Placement
) -> None:
    # Given process A ran the turn until it paused, and exited
    offer = lab.pause(placement)
    assert (offer["outcome"], offer["model_calls"]) == ("interrupted", placement.before_pause)

    # When process B, holding nothing but the store, approves, then answers again
    b = lab.resume("B")

    # Then B completed the turn, and its second answer replayed the first
    first, again = b["first"], b["again"]
    assert (first["outcome"], first["decision"]) == ("completed", "approved")
    assert placement.answer in first["text"]
    assert (again["outcome"], again["text"]) == ("replayed", first["text"])
    assert again["decision"] == "approved" and again["answered_at"] is not None
    assert b["models_built_by_replay"] == 0
    # And B's model played only what was left of the script, not the steps before the pause
    assert b["model_calls"] == len(placement.scenario.steps) - placement.before_pause
    request = pointer(server_stores, lab.chat)
    assert (request.state, request.claim_count, finished_by(server_stores, lab.chat)) == (
        RequestState.DONE,
        1,
        "B",
    )
    assert_outbox_records(server_stores, server_aws, lab.chat, placement)
    assert lab.fetched_by() == placement.fetched_by


@pytest.mark.parametrize("crash", CRASHES, ids=lambda c: c.placement.name)
def test_a_worker_killed_mid_resume_is_taken_over_without_repeating_its_side_effect(
    lab: Lab, server_stores: Stores, server_aws: dict[str, Any], crash: Crash
) -> None:
    # Given A paused the turn, and B claimed it and stopped dead at its point of no return
    offer = lab.pause(crash.placement, *CRASH_LEASE)
    b = lab.start("resume", "B", "--hang", crash.hang, *CRASH_LEASE)
    lab.wait_until_hung(b, "B")
    held = pointer(server_stores, lab.chat)
    assert (held.state, held.worker, held.claim_count) == (RequestState.CLAIMED, "B", 1)
    # And while B lives, its heartbeat keeps the claim: another answer is "in progress"
    with pytest.raises(errors.ResumeInProgress):
        answer(runtime(server_stores, "probe"), lab.chat, offer["interrupt_id"], offer["secret"])

    # When B is killed, its lease lapses, and C answers with the same secret
    b.kill()
    b.wait(timeout=TIMEOUT_S)
    wait_for_lapse(server_stores, lab.chat)
    c = lab.resume("C", *CRASH_LEASE)

    # Then C finished on a second claim, and the side effect happened once
    first, again = c["first"], c["again"]
    assert first["outcome"] == "completed" and crash.answer in first["text"]
    assert (again["outcome"], again["text"]) == ("replayed", first["text"])
    request = pointer(server_stores, lab.chat)
    assert (request.state, request.claim_count, finished_by(server_stores, lab.chat)) == (
        RequestState.DONE,
        2,
        "C",
    )
    assert_outbox_records(server_stores, server_aws, lab.chat, crash.placement)
    assert lab.fetched_by() == crash.fetched_by
