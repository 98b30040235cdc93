"""Crash cells for the edit of a posted card: a real process (forked by a zygote, against
the moto server and the platform's fake on 127.0.0.1) is SIGKILLed, or has an AWS call
fail, where a card's post or edit could be lost, and then nobody clicks: only the
finder's passes (the notice index, then `Notifier.retry` or the settle step) carry the
card on.

- **lost post**: killed once the platform took the post and before its record. On Slack
  the message is found again by its metadata and adopted (and edited once its request
  ended): the card is posted once. Telegram cannot list a chat's messages: the card is
  posted once more, at most, and a tap on either copy is told the truth.
- **ended, not edited**: killed between the write that ends the request (its finish, a
  cancel, an expiry, a chain to the run's next card) and the edit, or at any call of the
  edit. The ending owed the edit: it is made by the finder's first pass once the
  ending's hold is over (`timing.EDIT_HOLD_MS`), not at the request's expiry a day later.
- **snapshot gone**: the settle step's recovery of a claim whose worker died finds the
  run's snapshot gone and ends the request, killed on either side of that ending: the
  card is edited by the next pass (at once when the ending landed).
"""

from __future__ import annotations

import queue
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from interlock.adapters.factory import Stores, build_stores
from interlock.adapters.slack import SlackChannel
from interlock.adapters.telegram import TelegramChannel, read_update
from interlock.adapters.webclient import JsonHttp
from interlock.channels import Channel, Link
from interlock.deps import Runtime, TurnLimits
from interlock.fanout import overdue_chats
from interlock.keys import SWEEP_SHARDS
from interlock.notify import NOTIFY_HOLD_MS, Notifier
from interlock.pause import persist_pause
from interlock.records import RequestRecord
from interlock.respond import Screened, TapResult, screen_tap
from interlock.sweeper import SweepReport, settle_counted
from interlock.timing import CLOCK_SKEW_MS, EDIT_HOLD_MS, ManualClock
from tests.channels import fakes
from tests.conftest import fresh_storage
from tests.faults.zygote import Zygote

pytestmark = pytest.mark.server

NOW_MS = 1_800_000_000_000
CHILD_MS = NOW_MS + 1000  # when the child acts
INTERRUPT = "v1:tool_call:t1:a"
NEXT = "v1:tool_call:t2:b"
TG_ALICE = 1001


@dataclass(frozen=True)
class Cell:
    family: str  # lost_post, ended, snapshot_gone
    channel: str = "slack"
    then: str = ""  # lost_post: what became of the request (open, cancelled, answered)
    how: str = ""  # ended: the ending (finish, cancel, expire, chain)
    at: int = -1  # ended: the AWS call under fault, from the ending's own write (0)
    mode: str = "none"  # kill_before, kill_after, fail (of that call), or none

    @property
    def name(self) -> str:
        if self.family == "lost_post":
            return f"lost_post/{self.channel}/{self.then}"
        if self.family == "ended":
            return f"ended/{self.how}/{self.at}/{self.mode}"
        return f"snapshot_gone/{self.mode}"


# The AWS calls of an ending and its edit, in order: the ending's own write; then the
# edit's (`Notifier.settled`): read the notices, record the edit, clear the request's
# mark that it is owed, take the edit's attempt, finish it.
EDIT_CALLS = 6
CELLS = [
    *[
        Cell("lost_post", channel, then)
        for channel in ("slack", "telegram")
        for then in ("open", "cancelled", "answered")
    ],
    # Killed between the ending and the edit, for every ending
    *[Cell("ended", how=how, at=0, mode="kill_after") for how in ("cancel", "expire", "chain")],
    # And at every call of a finish and its edit
    *[
        Cell("ended", how="finish", at=at, mode=mode)
        for at in range(EDIT_CALLS)
        for mode in ("kill_before", "kill_after", "fail")
    ],
    *[Cell("ended", how=how) for how in ("finish", "cancel", "expire", "chain")],
    *[Cell("snapshot_gone", mode=mode) for mode in ("kill_before", "kill_after", "none")],
]


@pytest.fixture(scope="module")
def lab(emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    aws = fresh_storage(emulator.endpoint, "edits")
    stores = build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"])
    stores.channels.link(Link("slack", "U-ALICE", "alice"), "root", NOW_MS)
    stores.channels.link(Link("telegram", str(TG_ALICE), "alice"), "root", NOW_MS)
    log = tmp_path_factory.mktemp("edit-zygote") / "children.log"
    forks = [Zygote("tests.faults.edit_child", log) for _ in range(2)]
    idle: queue.Queue[Zygote] = queue.Queue()
    for fork in forks:
        idle.put(fork)
    yield {**aws, "stores": stores, "zygotes": idle}
    for fork in forks:
        fork.close()


def _channel(cell: Cell, platform: fakes.Platform) -> Channel:
    if cell.channel == "telegram":
        return TelegramChannel(JsonHttp(platform.url), fakes.TELEGRAM_TOKEN)
    return SlackChannel(JsonHttp(platform.url, {"Authorization": f"Bearer {fakes.SLACK_TOKEN}"}))


def _notifier(stores: Stores, cell: Cell, platform: fakes.Platform, now_ms: int) -> Notifier:
    return Notifier(
        stores.channels,
        {cell.channel: _channel(cell, platform)},  # type: ignore[dict-item]
        lambda: now_ms,
        requests=stores.requests,
    )


def _runtime(stores: Stores, notifier: Notifier, now_ms: int) -> Runtime:
    """The settle step's runtime: its runs never get as far as an agent here."""
    return Runtime(
        stores,
        lambda: None,  # type: ignore[arg-type,return-value]
        clock=ManualClock(now_ms),
        limits=TurnLimits(heartbeat_s=60),
        worker_id="settle-2",
        agent=lambda inputs: None,  # type: ignore[arg-type,return-value]
        notifier=notifier,
    )


def _system_pass(
    stores: Stores, cell: Cell, platform: fakes.Platform, chat: str, now_ms: int
) -> None:
    """What the deployed finder and settle consumer do for the chat, nobody clicking."""
    found = list(overdue_chats(stores.requests, now_ms, 1000, notices=stores.channels))
    if chat not in found:
        return
    notifier = _notifier(stores, cell, platform, now_ms)
    if cell.family == "snapshot_gone":
        settle_counted(_runtime(stores, notifier, now_ms), chat, SweepReport())
    else:
        notifier.retry(chat)


def _run_child(lab: dict[str, Any], spec: dict[str, Any]) -> int:
    forks: queue.Queue[Zygote] = lab["zygotes"]
    zygote = forks.get()
    try:
        code = zygote.run(spec)
    finally:
        forks.put(zygote)
    if code not in (0, -9):
        sys.stderr.write(zygote.log.read_text(errors="replace")[-3000:])
    return code


def _opened(stores: Stores, chat: str) -> Any:
    """A request opened as a pause with channels opens it: its posts owed from the start."""
    return persist_pause(
        stores,
        chat_id=chat,
        user_id="alice",
        interrupt_id=INTERRUPT,
        kind="approval",
        card={"reason": "send the report"},
        turn_seq=1,
        now_ms=NOW_MS,
        snapshot={"messages": ["hello"]},
        notify_due_ms=NOW_MS + NOTIFY_HOLD_MS,
    )


def _taps(stores: Stores, chat: str, sent: list[dict[str, Any]], now_ms: int) -> list[Any]:
    """What a tap on Approve on each Telegram copy of the card is told."""
    told = []
    for n, message in enumerate(sent):
        data = next(
            b["callback_data"]
            for row in message["reply_markup"]["inline_keyboard"]
            for b in row
            if b.get("text") == "Approve"
        )
        _, tap = read_update(fakes.telegram_tap(100 + n, TG_ALICE, data))
        assert tap is not None
        told.append(screen_tap(stores, tap, now_ms))
    return told


def _spec(lab: dict[str, Any], cell: Cell, chat: str, platform: fakes.Platform) -> dict[str, Any]:
    return {
        "endpoint": lab["endpoint"],
        "table": lab["table"],
        "bucket": lab["bucket"],
        "channel": cell.channel,
        "url": platform.url,
        "token": fakes.TELEGRAM_TOKEN if cell.channel == "telegram" else fakes.SLACK_TOKEN,
        "chat": chat,
        "now_ms": CHILD_MS,
    }


def _check(lab: dict[str, Any], cell: Cell) -> dict[str, Any]:
    stores: Stores = lab["stores"]
    chat = f"e-{uuid.uuid4().hex[:10]}"
    kind = fakes.FakeTelegram if cell.channel == "telegram" else fakes.FakeSlack
    # The platform's clock agrees with the cells' (Slack's messages' timestamps)
    with fakes.serve(kind, clock=lambda: NOW_MS / 1000 + 1) as platform:
        offer = _opened(stores, chat)
        got: dict[str, Any] = {"cell": cell.name}
        if cell.family == "lost_post":
            _lost_post(lab, cell, chat, platform, offer, got)
        elif cell.family == "ended":
            _ended(lab, cell, chat, platform, offer, got)
        else:
            _snapshot_gone(lab, cell, chat, platform, offer, got)
        sent = "sendMessage" if cell.channel == "telegram" else "chat.postMessage"
        edit = "editMessageText" if cell.channel == "telegram" else "chat.update"
        got["posts"] = platform.recorded.of(sent)
        got["edits"] = platform.recorded.of(edit)
        got["lookups"] = len(platform.recorded.of("conversations.history"))
    got["notices"] = {n.interrupt_id: n for n in stores.channels.notices(chat)}
    far = offer.request.expires_at * 1000 + 10 * 3_600_000
    due = [
        found
        for shard in range(SWEEP_SHARDS)
        for found in stores.channels.due_notices(f"OPEN#{shard}", far, 10_000)
    ]
    got["left_due"] = chat in due
    got["request"] = stores.requests.get(chat, NOW_MS)
    return got


def _lost_post(
    lab: dict[str, Any],
    cell: Cell,
    chat: str,
    platform: fakes.Platform,
    offer: Any,
    got: dict[str, Any],
) -> None:
    # The post's process is killed once the platform took the post, before its record
    spec = {**_spec(lab, cell, chat, platform), "action": "open", "platform": "kill_after"}
    got["exit"] = _run_child(lab, spec)
    stores: Stores = lab["stores"]
    ended_at = CHILD_MS + 1000
    if cell.then != "open":
        # The person answers or cancels on the card page; the process that did it edits
        # the posts it knows of (the lost one's attempt still holds it)
        read = stores.requests.get(chat, ended_at)
        assert read is not None
        if cell.then == "cancelled":
            stores.requests.cancel(read, "cancelled by alice", ended_at)
            decision = "cancelled"
        else:
            claim = stores.requests.claim_with(
                read, offer.secret, "w1", ended_at, ("approved", "{}"), lambda c: [], by="alice"
            )
            stores.requests.finish(
                claim, answer_key="answers/a", decision="approved", now_ms=ended_at
            )
            decision = "approved"
        notifier = _notifier(stores, cell, platform, ended_at)
        notifier.settled(chat, offer.request.interrupt_ids, decision, "alice", "api")
    # The finder's first pass once the ending's hold (and the lost attempt's) is over,
    # then one past any backoff
    _system_pass(stores, cell, platform, chat, ended_at + EDIT_HOLD_MS)
    got["edited_within_a_sweep"] = bool(
        platform.recorded.of("editMessageText" if cell.channel == "telegram" else "chat.update")
    )
    later = NOW_MS + 3_600_000
    _system_pass(stores, cell, platform, chat, later)
    if cell.channel != "telegram":
        return
    sent = platform.recorded.of("sendMessage")
    if cell.then == "open":
        # While it is open, a tap on either copy would answer it (one claim decides)
        got["told_open"] = _taps(stores, chat, sent, later)
        # Then it is cancelled on the card page, which edits the copy it knows of
        read = stores.requests.get(chat, later)
        assert read is not None
        stores.requests.cancel(read, "cancelled by alice", later)
        notifier = _notifier(stores, cell, platform, later)
        notifier.settled(chat, offer.request.interrupt_ids, "cancelled", "alice", "api")
    got["told"] = _taps(stores, chat, sent, later)


def _ended(
    lab: dict[str, Any],
    cell: Cell,
    chat: str,
    platform: fakes.Platform,
    offer: Any,
    got: dict[str, Any],
) -> None:
    stores: Stores = lab["stores"]
    _notifier(stores, cell, platform, NOW_MS).opened(offer.request)
    if cell.how in ("finish", "chain"):
        # Answered: the claim's run is about to store its end
        read = stores.requests.get(chat, NOW_MS)
        assert read is not None
        stores.requests.claim_with(
            read, offer.secret, "w1", NOW_MS, ("approved", "{}"), lambda c: [], by="alice"
        )
    spec = {
        **_spec(lab, cell, chat, platform),
        "action": "end",
        "how": cell.how,
        "next": NEXT,
        "at": cell.at,
        "mode": cell.mode,
    }
    got["exit"] = _run_child(lab, spec)
    # Edited by the process that ended it, or else by the finder's first pass once the
    # ending's hold is over; then passes past any backoff, and past the expiry
    got["edited_by_itself"] = bool(platform.recorded.of("chat.update"))
    _system_pass(stores, cell, platform, chat, CHILD_MS + EDIT_HOLD_MS)
    got["edited_within_a_sweep"] = bool(platform.recorded.of("chat.update"))
    for later in (NOW_MS + 3_600_000, offer.request.expires_at * 1000 + CLOCK_SKEW_MS + 1):
        _system_pass(stores, cell, platform, chat, later)


def _snapshot_gone(
    lab: dict[str, Any],
    cell: Cell,
    chat: str,
    platform: fakes.Platform,
    offer: Any,
    got: dict[str, Any],
) -> None:
    stores: Stores = lab["stores"]
    _notifier(stores, cell, platform, NOW_MS).opened(offer.request)
    # Answered, its worker died after the claim, and the run's snapshot is gone
    read = stores.requests.get(chat, NOW_MS)
    assert read is not None
    claim = stores.requests.claim_with(
        read, offer.secret, "w1", NOW_MS, ("approved", "{}"), lambda c: [], by="alice"
    )
    assert claim.snapshot_key is not None
    lab["s3"].delete_object(Bucket=lab["bucket"], Key=claim.snapshot_key)
    policy = stores.policy
    recover_at = (claim.lease_expires_at_ms or 0) + policy.recovery_grace_ms + CLOCK_SKEW_MS + 1
    spec = {
        **_spec(lab, cell, chat, platform),
        "action": "recover",
        "now_ms": recover_at,
        # The recovery's ending: the claimed request expired, saying why
        "op": "UpdateItem REQUEST SET #state",
        "mode": cell.mode,
    }
    got["exit"] = _run_child(lab, spec)
    got["edited_by_itself"] = bool(platform.recorded.of("chat.update"))
    # The next pass: at once (the ending owes the edit from when it happened), or, for a
    # recovery killed before its ending, the next recovery once its own lease lapsed
    _system_pass(stores, cell, platform, chat, recover_at)
    got["edited_at_once"] = bool(platform.recorded.of("chat.update"))
    again = recover_at + policy.lease_ms + policy.recovery_grace_ms + CLOCK_SKEW_MS + 1
    _system_pass(stores, cell, platform, chat, again)
    got["edited_by_next_recovery"] = bool(platform.recorded.of("chat.update"))


@pytest.fixture(scope="module")
def outcomes(lab: dict[str, Any]) -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda cell: _check(lab, cell), CELLS))
    return {r["cell"]: r for r in results}


def _only(notices: dict[str, Any], interrupt_id: str = INTERRUPT) -> Any:
    notice = notices[interrupt_id]
    assert notice.ref is not None
    return notice


@pytest.mark.parametrize(
    "cell", [c for c in CELLS if c.family == "lost_post"], ids=lambda c: c.name
)
def test_a_lost_post_is_found_again_on_slack_and_told_the_truth_on_telegram(
    outcomes: dict[str, dict[str, Any]], cell: Cell
) -> None:
    got = outcomes[cell.name]
    assert got["exit"] == -9, "the process was killed once the platform took the post"
    notice = got["notices"][INTERRUPT]
    request: RequestRecord = got["request"]
    edits = got["edits"]
    if cell.channel == "slack":
        # Found again by its metadata and adopted: posted once, never twice
        assert len(got["posts"]) == 1 and got["lookups"] >= 1
        assert notice.ref is not None and notice.ref["channel"] == "D-ALICE"
        if cell.then == "open":
            assert not notice.done and edits == []
            return
        # Ended: that one post edited within one sweep, to the truth; nothing left due
        assert got["edited_within_a_sweep"], "edited within one sweep, not at the expiry"
        assert notice.done and not got["left_due"]
        word = "Cancelled" if cell.then == "cancelled" else "Approved"
        assert [e["ts"] for e in edits] == [notice.ref["ts"]]
        assert edits[0]["text"].split("\n")[-1].startswith(word)
        return
    # Telegram cannot find the lost copy. Open, the card is posted once more (one copy
    # too many, no more); ended first, it is not posted again. Either way the copy
    # Interlock knows of (if any) is edited, the lost one keeps its buttons, and a tap
    # on any copy is told the truth and changes nothing.
    assert notice.done and not got["left_due"]
    if cell.then == "open":
        first, second = got["posts"]
        assert first["text"] == second["text"]
        assert notice.ref is not None
        assert [e["message_id"] for e in edits] == [notice.ref["message_id"]]
        assert edits[0]["text"].split("\n")[-1].startswith("Cancelled")
        assert all(isinstance(told, Screened) for told in got["told_open"])
    else:
        assert len(got["posts"]) == 1 and notice.ref is None and edits == []
    told = got["told"]
    assert len(told) == len(got["posts"]) and all(isinstance(t, TapResult) for t in told)
    if cell.then == "answered":
        assert request.state.value == "done"
        assert {t.outcome for t in told} == {"already_answered"}
        assert all(t.text.startswith("Already answered: Approved") for t in told)
    else:
        assert request.state.value == "cancelled"
        assert {t.outcome for t in told} == {"ended"}
        assert all("no longer be answered" in t.text and "cancel" in t.text for t in told)


@pytest.mark.parametrize("cell", [c for c in CELLS if c.family == "ended"], ids=lambda c: c.name)
def test_a_card_whose_request_ended_is_edited_within_one_sweep_whatever_died(
    outcomes: dict[str, dict[str, Any]], cell: Cell
) -> None:
    got = outcomes[cell.name]
    if cell.mode.startswith("kill"):
        assert got["exit"] == -9, "the fault must have killed the process"
    else:
        assert got["exit"] == 0
    if cell.mode == "none":
        assert got["edited_by_itself"], "the process that ended it edited it"
    # The ending's own write died before it left: nothing ended, nothing to edit
    # (a failed one is sent again, as any unclear pointer write is, and lands)
    never_ended = cell.at == 0 and cell.mode == "kill_before"
    notice = _only(got["notices"])
    request: RequestRecord = got["request"]
    if never_ended:
        assert request.state.value == "claimed" and got["edits"] == []
        assert not notice.done
        return
    # Edited by the finder's first pass after the ending's hold at the latest, on the
    # one post, to the truth; and nothing of it is left due
    assert got["edited_within_a_sweep"], "edited within one sweep, not at the expiry"
    assert notice.done
    # (a chained card's pointer asks the next card now: the finder's pass, which only
    # knows that, says it was settled)
    words = {
        "finish": ("Approved",),
        "chain": ("Approved", "Settled"),
        "cancel": ("Cancelled",),
        "expire": ("Expired",),
    }[cell.how]
    edits = got["edits"]
    assert {e["ts"] for e in edits} == {notice.ref["ts"]}
    assert all(e["text"].split("\n")[-1].startswith(words) for e in edits), edits
    # An edit is sent twice only when its process died between sending it and its record
    resent = cell.how == "finish" and cell.at == 5 and cell.mode != "kill_after"
    assert len(edits) == (2 if resent else 1)
    if cell.how == "chain":
        # The run's next card was posted once, and is watched (its own request is open)
        posts = got["posts"]
        assert len(posts) == 2 and posts[1]["metadata"]["event_payload"]["interrupt_id"] == NEXT
        assert not _only(got["notices"], NEXT).done
        return
    (_,) = got["posts"]
    assert not got["left_due"], "neither the notice nor the request's mark is left due"


@pytest.mark.parametrize(
    "cell", [c for c in CELLS if c.family == "snapshot_gone"], ids=lambda c: c.name
)
def test_a_recovery_that_finds_the_snapshot_gone_edits_the_card_within_one_sweep(
    outcomes: dict[str, dict[str, Any]], cell: Cell
) -> None:
    got = outcomes[cell.name]
    assert got["exit"] == (0 if cell.mode == "none" else -9)
    request: RequestRecord = got["request"]
    assert request.state.value == "expired"
    notice = _only(got["notices"])
    if cell.mode == "none":
        assert got["edited_by_itself"], "the settle step edits what its recovery ended"
    elif cell.mode == "kill_after":
        assert got["edited_at_once"], "owed from the ending on: the next pass edits it"
    else:
        assert got["edited_by_next_recovery"]
    (edit,) = got["edits"]
    assert edit["ts"] == notice.ref["ts"] and edit["text"].split("\n")[-1].startswith("Expired")
    assert notice.done and not got["left_due"]
