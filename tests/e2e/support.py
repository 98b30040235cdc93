"""Helpers for the end-to-end tier: placements, a runtime, and reading the store."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from examples.analyst.script import DEMO_SCENARIOS, DOWNLOAD, REPORT
from interlock.adapters.factory import Stores
from interlock.harness.model import Scenario, ScriptedModel
from interlock.outcomes import TurnResult
from interlock.records import RequestRecord
from interlock.resume import resume_turn
from interlock.timing import SystemClock
from interlock.turns import Caller, Runtime, TurnLimits

TIMEOUT_S: Final = 30.0
ALICE: Final = Caller("alice", frozenset({"reporter"}))


@dataclass(frozen=True)
class Placement:
    """Where the run pauses, and what a correct single run leaves behind."""

    name: str
    prompt: str
    scenario: Scenario
    before_pause: int  # model calls made before the pause
    answer: str  # in the final text
    outbox_records: int
    fetched_by: tuple[str, ...]  # who called the fetch transport, once per call


# The fetch refused before the pause never reaches the transport; the one after it does.
DOWNLOAD_IN_TOOL = Placement(
    "download", "please download the table", DOWNLOAD, 2, "The reference table begins", 0, ("B",)
)
REPORT_AT_GATE = Placement(
    "report", "please send the weekly report", REPORT, 1, "Report sent to team@example.org", 1, ()
)


def wait_for(done: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def pointer(stores: Stores, chat: str) -> RequestRecord:
    request = stores.requests.get(chat, SystemClock().now_ms())
    assert request is not None, f"chat {chat} has no request"
    return request


def finished_by(stores: Stores, chat: str) -> str | None:
    """The worker the chat's last finished run names in its `turn_completed` event."""
    done = [e for e in stores.chats.events(chat, limit=1000) if e.type == "turn_completed"]
    return done[-1].detail.get("worker") if done else None


def outbox_records(aws: dict[str, Any]) -> list[dict[str, Any]]:
    pages = (
        aws["dynamodb"]
        .get_paginator("scan")
        .paginate(
            TableName=aws["table"],
            FilterExpression="begins_with(pk, :outbox)",
            ExpressionAttributeValues={":outbox": {"S": "OUTBOX#"}},
        )
    )
    return [item for page in pages for item in page["Items"]]


def assert_outbox_records(
    stores: Stores, aws: dict[str, Any], chat: str, placement: Placement
) -> None:
    """The outbox holds the placement's records, under the paused call's key."""
    # The key the tool writes under is the chat and the paused call's toolUseId.
    key = f"{chat}#{pointer(stores, chat).card['tool_use_id']}"
    assert len(outbox_records(aws)) == placement.outbox_records
    assert (stores.outbox.get(key) is not None) == bool(placement.outbox_records)


def runtime(stores: Stores, worker: str, limits: TurnLimits | None = None) -> Runtime:
    return Runtime(
        stores,
        lambda: ScriptedModel(DEMO_SCENARIOS),
        fetch=lambda url: "a,b\n1,2",
        limits=limits or TurnLimits(),
        worker_id=worker,
    )


def answer(rt: Runtime, chat: str, interrupt_id: str, secret: str) -> TurnResult:
    return resume_turn(
        rt,
        ALICE,
        chat,
        interrupt_id=interrupt_id,
        secret=secret,
        status="resolved",
        payload={"decision": "approve"},
    )
