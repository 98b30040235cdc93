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
from interlock.notify import ATTEMPT_MS, FIRST_BACKOFF_MS, Notifier
from interlock.pause import persist_pause
from interlock.records import RequestRecord
from interlock.timing import ManualClock

CHAT = "chat-n"


@dataclass
class Platform:
    """A channel that records what it was asked, refusing the next `refuse` calls."""

    name: str = "slack"
    posts: list[str] = field(default_factory=list)
    edits: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    refuse: int = 0
    during_post: Any = None

    def post(self, link: Link, request: RequestRecord, page_url: str | None) -> dict[str, Any]:
        self._maybe_refuse()
        if self.during_post is not None:
            self.during_post()
        self.posts.append(request.interrupt_id)
        return {"ts": f"m{len(self.posts)}"}

    def settle(self, ref: dict[str, Any], text: str) -> None:
        self._maybe_refuse()
        self.edits.append((ref, text))

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
    assert notice.ref == {"ts": "m1"} and notice.due_ms == request.expires_at * 1000
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

    assert due(stores, request.expires_at * 1000 - 1) == []
    clock.advance(ms=request.expires_at * 1000 - clock.now_ms())
    assert due(stores, clock.now_ms()) == [CHAT]
    notifier.retry(CHAT)
    ((_, text),) = platform.edits
    assert text.startswith("send the report\nCancelled")
