"""Channel posts and edits as kept deliveries: each at most once per notice, a failed or
interrupted one retried by the finder's pass, until done or the notice's retention ends.

The notices live in the real table (moto); the platform is a recording stand-in of the
`Channel` port that can refuse calls (the HTTP clients are tested against the platform
fakes in `tests/channels`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from interlock.adapters.factory import Stores
from interlock.adapters.schema import SWEEP_SHARDS
from interlock.channels import Link, Notice, Tap
from interlock.fanout import overdue_chats
from interlock.notify import ATTEMPT_MS, FIRST_BACKOFF_MS, NOTIFY_HOLD_MS, Notifier
from interlock.pause import persist_pause
from interlock.records import RequestRecord, StoredSnapshot, new_request
from interlock.timing import CLOCK_SKEW_MS, EDIT_HOLD_MS, ManualClock

CHAT = "chat-n"


@dataclass
class Platform:
    """A channel that records what it was asked, refusing the next `refuse` calls."""

    name: str = "slack"
    posts: list[str] = field(default_factory=list)
    edits: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    refuse: int = 0
    during_post: Any = None
    # What `find` answers (a post an earlier attempt sent, found again), and who asked.
    findable: dict[str, Any] | None = None
    lookups: list[str] = field(default_factory=list)

    def post(self, link: Link, request: RequestRecord, page_url: str | None) -> dict[str, Any]:
        self._maybe_refuse()
        if self.during_post is not None:
            self.during_post()
        self.posts.append(request.interrupt_id)
        return {"ts": f"m{len(self.posts)}"}

    def settle(self, ref: dict[str, Any], text: str) -> None:
        self._maybe_refuse()
        self.edits.append((ref, text))

    def find(self, link: Link, chat_id: str, notice: Notice) -> dict[str, Any] | None:
        self.lookups.append(notice.interrupt_id)
        return self.findable

    def tell(self, tap: Tap, text: str) -> None:
        return None

    def _maybe_refuse(self) -> None:
        if self.refuse:
            self.refuse -= 1
            raise ConnectionError("the platform is down")


@pytest.fixture
def platform() -> Platform:
    return Platform()


@pytest.fixture
def notifier(stores: Stores, clock: ManualClock, platform: Platform) -> Notifier:
    stores.channels.link(Link("slack", "U-ALICE", "alice"), "root", clock.now_ms())
    return Notifier(
        stores.channels,
        {"slack": platform},  # type: ignore[dict-item]
        clock.now_ms,
        requests=stores.requests,
    )


def open_request(
    stores: Stores, now_ms: int, chat: str = CHAT, notify_due_ms: int | None = None
) -> RequestRecord:
    """A report approval waiting in `chat` (its posts owed from `notify_due_ms`, if set)."""
    offer = persist_pause(
        stores,
        chat_id=chat,
        user_id="alice",
        interrupt_id="v1:tool_call:t1:a",
        kind="approval",
        card={"reason": "send the report"},
        turn_seq=1,
        now_ms=now_ms,
        snapshot={"messages": ["hello"]},
        notify_due_ms=notify_due_ms,
    )
    return offer.request


def due(stores: Stores, now_ms: int) -> list[str]:
    """The chats the notice index shows with a delivery due by `now_ms`."""
    shards = [f"OPEN#{shard}" for shard in range(SWEEP_SHARDS)]
    return [chat for shard in shards for chat in stores.channels.due_notices(shard, now_ms, 100)]


def test_a_post_is_sent_once_and_then_watched_until_its_request_expires(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    request = open_request(stores, clock.now_ms())

    notifier.opened(request)
    notifier.opened(request)  # a retried or taken-over run opens it again

    assert platform.posts == [request.interrupt_id]
    (notice,) = stores.channels.notices(CHAT)
    # (watched until its request is past its expiry by every clock, when it is settled)
    assert notice.ref == {"ts": "m1"} and notice.due_ms == request.expires_at * 1000 + CLOCK_SKEW_MS
    assert due(stores, clock.now_ms() + FIRST_BACKOFF_MS) == []


def test_a_failed_post_is_due_after_its_backoff_and_the_finders_pass_posts_it_once(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    request = open_request(stores, clock.now_ms())
    platform.refuse = 1

    notifier.opened(request)

    assert platform.posts == []
    assert due(stores, clock.now_ms() + FIRST_BACKOFF_MS - 1) == []
    clock.advance(ms=FIRST_BACKOFF_MS)
    # The finder's pass lists the chat for its notice alone (the request is not overdue)
    assert list(overdue_chats(stores.requests, clock.now_ms(), 100)) == []
    assert list(overdue_chats(stores.requests, clock.now_ms(), 100, notices=stores.channels)) == [
        CHAT
    ]
    report = notifier.retry(CHAT)
    assert (report.delivered, report.failed) == (1, 0)
    notifier.retry(CHAT)
    assert platform.posts == [request.interrupt_id]


def test_each_failure_doubles_the_wait_and_the_retention_ends_the_retries(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    open_request(stores, clock.now_ms())
    platform.refuse = 100
    notifier.opened(stores.requests.get(CHAT, clock.now_ms()))  # type: ignore[arg-type]
    waits = []
    for _ in range(3):
        (notice,) = stores.channels.notices(CHAT)
        assert notice.due_ms is not None
        waits.append(notice.due_ms - clock.now_ms())
        clock.advance(ms=notice.due_ms - clock.now_ms())
        assert notifier.retry(CHAT).failed == 1
    assert waits == [FIRST_BACKOFF_MS, 2 * FIRST_BACKOFF_MS, 4 * FIRST_BACKOFF_MS]

    clock.advance(ms=stores.channels.notices(CHAT)[0].give_up_ms - clock.now_ms())
    assert notifier.retry(CHAT).abandoned == 1
    assert due(stores, clock.now_ms() + 10 * 3_600_000) == []
    assert platform.posts == []


def test_a_failed_edit_is_retried_with_its_text_and_sent_once(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    request = open_request(stores, clock.now_ms())
    notifier.opened(request)
    platform.refuse = 1

    notifier.settled(CHAT, request.interrupt_ids, "rejected", "bob", "api")

    assert platform.edits == []
    (notice,) = stores.channels.notices(CHAT)
    assert notice.edit_text is not None and notice.due_ms is not None
    assert due(stores, notice.due_ms - 1) == []
    clock.advance(ms=notice.due_ms - clock.now_ms())
    assert due(stores, clock.now_ms()) == [CHAT]
    notifier.retry(CHAT)
    notifier.retry(CHAT)
    ((ref, text),) = platform.edits
    assert ref == {"ts": "m1"} and text.startswith("send the report\nDenied by bob at ")
    assert due(stores, clock.now_ms() + 10 * 3_600_000) == []


def test_a_request_that_settles_while_its_post_is_in_flight_is_edited_after_it(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    request = open_request(stores, clock.now_ms())
    platform.during_post = lambda: notifier.settled(
        CHAT, request.interrupt_ids, "approved", "alice", "slack"
    )

    notifier.opened(request)

    assert platform.posts == [request.interrupt_id]
    ((ref, text),) = platform.edits
    assert ref == {"ts": "m1"} and text.startswith("send the report\nApproved by alice")


def test_a_post_whose_process_died_is_retried_once_its_hold_lapses_unless_it_ended(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    request = open_request(stores, clock.now_ms())
    now = clock.now_ms()

    # A process reserved the post and died before sending it
    notice = Notice("slack", request.interrupt_id, user_id="alice", give_up_ms=now + 3_600_000)
    assert stores.channels.reserve_notice(CHAT, notice, now, now + ATTEMPT_MS)

    assert notifier.retry(CHAT).delivered == 0, "held by the attempt until it lapses"
    clock.advance(ms=ATTEMPT_MS + 1)
    assert due(stores, clock.now_ms()) == [CHAT]
    notifier.retry(CHAT)
    assert platform.posts == [request.interrupt_id]


def test_a_post_never_sent_is_dropped_once_its_request_ended(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    request = open_request(stores, clock.now_ms())
    platform.refuse = 1
    notifier.opened(request)

    stores.requests.cancel(request, "cancelled by alice", clock.now_ms())
    notifier.settled(CHAT, request.interrupt_ids, "cancelled", "alice", "api")

    clock.advance(ms=10 * FIRST_BACKOFF_MS)
    notifier.retry(CHAT)
    assert (platform.posts, platform.edits) == ([], [])
    assert due(stores, clock.now_ms() + 10 * 3_600_000) == []


def test_a_card_whose_request_ended_without_its_edit_is_edited_at_the_expiry(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    request = open_request(stores, clock.now_ms())
    notifier.opened(request)
    # The request is cancelled and its process dies before it edits the card
    stores.requests.cancel(request, "cancelled by alice", clock.now_ms())

    watch_ms = request.expires_at * 1000 + CLOCK_SKEW_MS  # as the finder settles it
    assert due(stores, watch_ms - 1) == []
    clock.advance(ms=watch_ms - clock.now_ms())
    assert due(stores, clock.now_ms()) == [CHAT]
    notifier.retry(CHAT)
    ((_, text),) = platform.edits
    assert text.startswith("send the report\nCancelled")


# -- the edit owed by the write that ends a request ------------------------------------

# Every write that ends a request: the answer's finish, a cancel, an expiry (the
# sweeper's, a given-up one), a chain to the run's next request, and the end of a claimed
# run whose snapshot is gone.
ENDINGS = ["finish", "cancel", "expire", "chain", "end_claimed"]


def _posted(stores: Stores, clock: ManualClock, notifier: Notifier) -> Any:
    """A request opened as a pause with channels opens it (its posts owed from the
    start), and its card posted."""
    offer = persist_pause(
        stores,
        chat_id=CHAT,
        user_id="alice",
        interrupt_id="v1:tool_call:t1:a",
        kind="approval",
        card={"reason": "send the report"},
        turn_seq=1,
        now_ms=clock.now_ms(),
        snapshot={"messages": ["hello"]},
        notify_due_ms=clock.now_ms() + NOTIFY_HOLD_MS,
    )
    notifier.opened(offer.request)
    return offer


def _end(stores: Stores, clock: ManualClock, offer: Any, how: str) -> RequestRecord:
    """End the request of `offer` by `how`, as its process does right before it edits
    the card (and then dies); the request as it was read before."""
    now = clock.now_ms()
    read = stores.requests.get(CHAT, now)
    assert read is not None and read.posted, "the pointer knows it has posts"
    if how == "cancel":
        stores.requests.cancel(read, "cancelled by alice", now)
        return read
    if how == "expire":
        stores.requests.expire(read, "expired unanswered", now)
        return read
    claim = stores.requests.claim_with(
        read, offer.secret, "w1", now, ("approved", "{}"), lambda claimed: [], by="alice"
    )
    if how == "finish":
        stores.requests.finish(claim, answer_key="answers/a", decision="approved", now_ms=now)
    elif how == "end_claimed":
        stores.requests.end_claimed(claim, "its snapshot is gone")
    else:
        successor, _ = new_request(
            stores.policy,
            chat_id=CHAT,
            interrupt_id="v1:tool_call:t2:b",
            kind="approval",
            card={"reason": "send it again"},
            user_id="alice",
            turn_seq=1,
            now_ms=now,
            snapshot=StoredSnapshot("snapshots/next", 1, "d"),
            notify_due_ms=now + NOTIFY_HOLD_MS,
        )
        stores.requests.chain(claim, successor)
    return read


@pytest.mark.parametrize("how", ENDINGS)
def test_a_card_whose_request_ended_without_its_edit_is_edited_within_one_sweep(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform, how: str
) -> None:
    # Given a posted card whose request ends, its process dying before it edits the card
    offer = _posted(stores, clock, notifier)
    ended_at = clock.now_ms()
    _end(stores, clock, offer, how)

    # Then the ending itself left the edit due: once its hold is over (none for a run
    # whose snapshot is gone: no process of its own edits it), not at the expiry
    hold = 0 if how == "end_claimed" else EDIT_HOLD_MS
    if hold:
        assert due(stores, ended_at + hold - 1) == [], "the ending process's chance first"
    clock.advance(ms=hold)
    assert due(stores, clock.now_ms()) == [CHAT]
    notifier.retry(CHAT)

    # The card says it ended, on its one post, and nothing is left due, ever
    ((ref, text),) = platform.edits
    assert ref == {"ts": "m1"} and text.startswith("send the report\n")
    first = offer.request.interrupt_id
    assert next(n for n in stores.channels.notices(CHAT) if n.interrupt_id == first).done
    if how == "chain":
        # The run's next card was posted by the same pass (its own posts were owed)
        assert platform.posts == [offer.request.interrupt_id, "v1:tool_call:t2:b"]
        assert due(stores, clock.now_ms() + FIRST_BACKOFF_MS) == []
        return
    assert platform.posts == [offer.request.interrupt_id]
    assert due(stores, offer.request.expires_at * 1000 + 10 * 3_600_000) == []
    pointer = stores.requests.get(CHAT, clock.now_ms())
    assert pointer is not None and pointer.notify_due_ms is None


@pytest.mark.parametrize("how", ["finish", "cancel", "expire"])
def test_a_card_edited_by_the_process_that_ended_it_leaves_nothing_for_the_finder(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform, how: str
) -> None:
    offer = _posted(stores, clock, notifier)

    _end(stores, clock, offer, how)
    notifier.settled(CHAT, offer.request.interrupt_ids, "cancelled", "alice", "api")

    assert len(platform.edits) == 1
    # The mark the ending wrote went with the recorded edit: the finder never looks
    assert due(stores, offer.request.expires_at * 1000 + 10 * 3_600_000) == []
    pointer = stores.requests.get(CHAT, clock.now_ms())
    assert pointer is not None and pointer.notify_due_ms is None


def test_a_request_without_posts_ends_without_a_mark(
    stores: Stores, clock: ManualClock, platform: Platform
) -> None:
    # Given channels but nobody linked: its posts were owed, and there were none
    notifier = Notifier(
        stores.channels,
        {"slack": platform},  # type: ignore[dict-item]
        clock.now_ms,
        requests=stores.requests,
    )
    offer = _posted(stores, clock, notifier)
    read = stores.requests.get(CHAT, clock.now_ms())
    assert read is not None and not read.posted and read.notify_due_ms is None

    stores.requests.cancel(read, "cancelled by alice", clock.now_ms())

    # Then nothing is owed: no mark, nothing for the finder
    ended = stores.requests.get(CHAT, clock.now_ms())
    assert ended is not None and ended.notify_due_ms is None
    assert due(stores, offer.request.expires_at * 1000 + 10 * 3_600_000) == []
    assert (platform.posts, platform.edits) == ([], [])


def test_posts_reserved_after_their_request_ended_are_owed_their_edit(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    # Given a request ended by a write that knew of no post (read before any), and its
    # card posted afterwards by a process that had not seen it end
    request = open_request(stores, clock.now_ms())
    stores.requests.cancel(request, "cancelled by alice", clock.now_ms())
    notifier.opened(request)
    assert platform.posts == [request.interrupt_id]

    # Then saying it has posts owes their edit, as an ending would have
    ended = stores.requests.get(CHAT, clock.now_ms())
    assert ended is not None and ended.posted and ended.notify_due_ms is not None
    clock.advance(ms=EDIT_HOLD_MS)
    assert due(stores, clock.now_ms()) == [CHAT]
    notifier.retry(CHAT)
    ((_, text),) = platform.edits
    assert text.startswith("send the report\nCancelled")
    assert due(stores, request.expires_at * 1000 + 10 * 3_600_000) == []


def test_a_post_an_earlier_attempt_sent_is_found_and_adopted_not_posted_twice(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    # Given a post whose attempt sent it and died before its record (the platform has it)
    request = open_request(stores, clock.now_ms())
    now = clock.now_ms()
    notice = Notice("slack", request.interrupt_id, user_id="alice", give_up_ms=now + 3_600_000)
    assert stores.channels.reserve_notice(CHAT, notice, now, now + ATTEMPT_MS)
    platform.findable = {"ts": "m-lost"}

    # When the finder's pass carries it on once the attempt's hold lapsed
    clock.advance(ms=ATTEMPT_MS + 1)
    notifier.retry(CHAT)

    # Then it was looked for and adopted: never posted a second time, and watched
    assert (platform.lookups, platform.posts) == ([request.interrupt_id], [])
    (kept,) = stores.channels.notices(CHAT)
    assert kept.ref == {"ts": "m-lost"} and not kept.done
    assert kept.due_ms is not None and kept.due_ms >= request.expires_at * 1000


def test_a_lost_post_of_a_request_that_ended_is_found_and_edited(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    # Given a post whose attempt sent it and died before its record (the platform has it)
    request = open_request(stores, clock.now_ms(), notify_due_ms=clock.now_ms() + NOTIFY_HOLD_MS)
    now = clock.now_ms()
    notice = Notice("slack", request.interrupt_id, user_id="alice", give_up_ms=now + 3_600_000)
    assert stores.channels.reserve_notice(CHAT, notice, now, now + ATTEMPT_MS)
    platform.findable = {"ts": "m-lost"}
    clock.advance(ms=ATTEMPT_MS + 1)

    # When its request is cancelled, and the process that cancelled it edits its posts
    stores.requests.cancel(request, "cancelled by alice", clock.now_ms())
    notifier.settled(CHAT, request.interrupt_ids, "cancelled", "alice", "api")

    # Then the lost message was found and edited, not closed as never posted
    assert platform.lookups == [request.interrupt_id] and platform.posts == []
    ((ref, text),) = platform.edits
    assert ref == {"ts": "m-lost"} and text.startswith("Cancelled by alice")
    (kept,) = stores.channels.notices(CHAT)
    assert kept.done and kept.ref == {"ts": "m-lost"}
    assert due(stores, request.expires_at * 1000 + 10 * 3_600_000) == []


def test_a_lookup_that_fails_is_tried_again_later_and_nothing_is_posted_meanwhile(
    stores: Stores, clock: ManualClock, notifier: Notifier, platform: Platform
) -> None:
    request = open_request(stores, clock.now_ms())
    now = clock.now_ms()
    notice = Notice("slack", request.interrupt_id, user_id="alice", give_up_ms=now + 3_600_000)
    assert stores.channels.reserve_notice(CHAT, notice, now, now + ATTEMPT_MS)
    clock.advance(ms=ATTEMPT_MS + 1)

    def unreachable(link: Link, chat_id: str, notice: Notice) -> None:
        raise ConnectionError("the platform is down")

    platform.find = unreachable  # type: ignore[method-assign]
    assert notifier.retry(CHAT).failed == 1
    assert platform.posts == []
    (kept,) = stores.channels.notices(CHAT)
    assert kept.ref is None and kept.due_ms is not None and kept.due_ms > clock.now_ms()
