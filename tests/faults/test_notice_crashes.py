"""Crash cells for channel notices: a real process posting a card (or editing it once its
request ended) is SIGKILLed before or after each of its AWS calls, or has that call
fail, or is killed on either side of the platform's own call. Then nobody clicks: only
the finder's pass (the notice index, then `Notifier.retry`) carries the card on.

Every cell must end with the card posted once and, once its request ended, edited to
the truth, with nothing left due: an edit whose process died is made by the finder's
first pass after the ending's hold (`timing.EDIT_HOLD_MS`), not at the request's expiry.
The one window an attempt cannot tell apart by itself, a kill while the platform's post
is in flight and after it landed (or before its record was written), leaves a message
Slack finds again by its metadata: it is adopted, never posted a second time.
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

from interlock.adapters.factory import Stores, build_stores
from interlock.adapters.slack import SlackChannel
from interlock.adapters.webclient import JsonHttp
from interlock.channels import Link
from interlock.fanout import overdue_chats
from interlock.keys import SWEEP_SHARDS
from interlock.notify import NOTIFY_HOLD_MS, Notifier
from interlock.timing import CLOCK_SKEW_MS, EDIT_HOLD_MS
from tests.adapters.test_notices import open_request
from tests.channels import fakes
from tests.conftest import fresh_storage
from tests.faults.zygote import Zygote

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
NOW_MS = 1_800_000_000_000


@dataclass(frozen=True)
class Cell:
    action: str  # open: post the card; settle: edit it once its request was cancelled
    at: int  # the AWS call under fault (-1: none; the platform call is)
    mode: str  # kill_before, kill_after, fail (of the AWS call), or none
    platform: str = ""  # kill_before / kill_after around the platform's call

    @property
    def name(self) -> str:
        where = f"platform/{self.platform}" if self.platform else f"{self.at}/{self.mode}"
        return f"{self.action}/{where}"


# The AWS calls of each path, in order:
#   open:   read the user's links, reserve the notice, record the post, clear the
#           request's mark that its posts are owed
#   settle: read the notices, record the edit, clear the request's mark that its edit is
#           owed, take the edit's attempt, finish it
CALLS = {"open": 4, "settle": 5}
CELLS = [
    *[
        Cell(action, at, mode)
        for action, calls in CALLS.items()
        for at in range(calls)
        for mode in ("kill_before", "kill_after", "fail")
    ],
    *[
        Cell(action, -1, "none", platform)
        for action in CALLS
        for platform in ("kill_before", "kill_after")
    ],
]


@pytest.fixture(scope="module")
def lab(emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    aws = fresh_storage(emulator.endpoint, "notices")
    stores = build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"])
    stores.channels.link(Link("slack", "U-ALICE", "alice"), "root", NOW_MS)
    # Two cells at a time, each child forked from a process that imported it once
    log = tmp_path_factory.mktemp("notice-zygote") / "children.log"
    forks = [Zygote("tests.faults.notice_child", log) for _ in range(2)]
    idle: queue.Queue[Zygote] = queue.Queue()
    for fork in forks:
        idle.put(fork)
    yield {**aws, "stores": stores, "zygotes": idle}
    for fork in forks:
        fork.close()


def _notifier(stores: Stores, slack: fakes.Platform, now_ms: int) -> Notifier:
    http = JsonHttp(slack.url, {"Authorization": f"Bearer {fakes.SLACK_TOKEN}"})
    return Notifier(
        stores.channels, {"slack": SlackChannel(http)}, lambda: now_ms, requests=stores.requests
    )


def _run_child(lab: dict[str, Any], cell: Cell, chat: str, slack: fakes.Platform) -> int:
    spec = {
        "endpoint": lab["endpoint"],
        "table": lab["table"],
        "bucket": lab["bucket"],
        "slack": slack.url,
        "token": fakes.SLACK_TOKEN,
        "chat": chat,
        "interrupt": "v1:tool_call:t1:a",
        "action": cell.action,
        "at": cell.at,
        "mode": cell.mode,
        "platform": cell.platform,
        "now_ms": NOW_MS + 1000,
    }
    forks: queue.Queue[Zygote] = lab["zygotes"]
    zygote = forks.get()
    try:
        code = zygote.run(spec)
    finally:
        forks.put(zygote)
    if code not in (0, -9):
        sys.stderr.write(zygote.log.read_text(errors="replace")[-3000:])
    return code


def _system_pass(stores: Stores, slack: fakes.Platform, chat: str, now_ms: int) -> None:
    """What the deployed finder and settle consumer do for the chat, nobody clicking."""
    found = list(overdue_chats(stores.requests, now_ms, 100, notices=stores.channels))
    if chat in found:
        _notifier(stores, slack, now_ms).retry(chat)


def _check(lab: dict[str, Any], cell: Cell) -> dict[str, Any]:
    stores: Stores = lab["stores"]
    chat = f"n-{uuid.uuid4().hex[:10]}"
    # Slack's clock agrees with the cells' (its messages' timestamps are when they came)
    with fakes.serve(fakes.FakeSlack, clock=lambda: NOW_MS / 1000 + 1) as slack:
        request = open_request(stores, NOW_MS, chat, notify_due_ms=NOW_MS + NOTIFY_HOLD_MS)
        if cell.action == "settle":
            _notifier(stores, slack, NOW_MS).opened(request)
            stores.requests.cancel(request, "cancelled by alice", NOW_MS)
        code = _run_child(lab, cell, chat, slack)
        # Nobody clicks: the finder's first pass once the ending's hold is over (the card
        # must be edited by then), then passes past any attempt's hold and backoff, and
        # past its request's expiry.
        _system_pass(stores, slack, chat, NOW_MS + EDIT_HOLD_MS)
        edited_within_a_sweep = slack.recorded.of("chat.update") != []
        for later in (NOW_MS + 3_600_000, request.expires_at * 1000 + 1):
            _system_pass(stores, slack, chat, later)
        posts = slack.recorded.of("chat.postMessage")
        edits = slack.recorded.of("chat.update")
        lookups = slack.recorded.of("conversations.history")
    (notice,) = stores.channels.notices(chat)
    far = request.expires_at * 1000 + 10 * 3_600_000
    left = [
        found
        for shard in range(SWEEP_SHARDS)
        for found in stores.channels.due_notices(f"OPEN#{shard}", far, 10_000)
    ]
    return {
        "cell": cell.name,
        "exit": code,
        "posts": len(posts),
        "edits": [(e["ts"], e["text"].split(" at ")[0]) for e in edits],
        "titles": {e["text"].split("\n")[0] for e in edits},
        "ref": notice.ref,
        "done": notice.done,
        "due": notice.due_ms,
        "expires_ms": request.expires_at * 1000,
        "edited_within_a_sweep": edited_within_a_sweep,
        "lookups": len(lookups),
        "left_due": chat in left,
    }


@pytest.fixture(scope="module")
def outcomes(lab: dict[str, Any]) -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda cell: _check(lab, cell), CELLS))
    return {r["cell"]: r for r in results}


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.name)
def test_each_notice_crash_ends_posted_once_and_told_the_truth(
    outcomes: dict[str, dict[str, Any]], cell: Cell
) -> None:
    got = outcomes[cell.name]
    if cell.mode.startswith("kill") or cell.platform:
        assert got["exit"] == -9, "the fault must have killed the process"
    # The post landed and its record did not: the platform's call killed after it
    # answered, or the record's own write killed before it left, or failing. Found
    # again by its metadata, it is adopted: the card is never posted twice.
    in_doubt_post = cell.action == "open" and (
        cell.platform == "kill_after" or (cell.at == 2 and cell.mode != "kill_after")
    )
    assert got["posts"] == 1
    assert got["ref"] is not None
    if in_doubt_post:
        assert got["lookups"] >= 1, "the lost post was looked for before posting again"
    if cell.action == "open":
        # Posted, and watched until its request expires (then it is edited, if need be)
        assert not got["done"]
        assert got["expires_ms"] <= got["due"] <= got["expires_ms"] + CLOCK_SKEW_MS
        assert got["edits"] == []
        return
    # The cancelled card says so, on the one post, within one finder pass after the
    # ending's hold, and nothing is left due: neither the notice nor the request's mark
    assert got["edited_within_a_sweep"], "edited within one sweep, not at the expiry"
    assert got["done"] and got["due"] is None and not got["left_due"]
    outcomes = {text.split("\n")[-1] for _, text in got["edits"]}
    assert outcomes in ({"Cancelled by alice"}, {"Cancelled"})
    assert {ts for ts, _ in got["edits"]} == {got["ref"]["ts"]}
    assert got["titles"] == {"send the report"}, "the question stays in the chat"
    # An edit is sent again only when the process died between sending it and recording
    # it: the same text on the same message, which changes nothing anyone sees.
    resent = cell.platform == "kill_after" or (cell.at == 4 and cell.mode != "kill_after")
    assert len(got["edits"]) == (2 if resent else 1)
