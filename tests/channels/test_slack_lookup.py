"""Finding a Slack card again whose reference was lost (`SlackChannel.find`), against
the local Slack fake: by the metadata the card was posted with (its chat and interrupt,
nothing else), in the conversation's history since its post was reserved, a bounded
number of pages at most."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from interlock.adapters import slack
from interlock.adapters.slack import SlackChannel
from interlock.adapters.webclient import ChannelError, JsonHttp
from interlock.channels import Link, Notice
from interlock.records import RequestRecord, StoredSnapshot, new_request
from interlock.timing import StorePolicy
from tests.channels import fakes

NOW_S = 1_800_000_000
CHAT = "chat-lookup"
ALICE = Link("slack", "U-ALICE", "alice")


class Clock:
    """Slack's clock in the fake: moved by the test."""

    def __init__(self) -> None:
        self.now_s = float(NOW_S)

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake(clock: Clock) -> Iterator[fakes.Platform]:
    with fakes.serve(fakes.FakeSlack, clock=clock) as platform:
        yield platform


@pytest.fixture
def channel(fake: fakes.Platform) -> SlackChannel:
    return SlackChannel(JsonHttp(fake.url, {"Authorization": f"Bearer {fakes.SLACK_TOKEN}"}))


def card(interrupt_id: str = "v1:tool_call:t1:a", chat: str = CHAT) -> RequestRecord:
    request, _ = new_request(
        StorePolicy(),
        chat_id=chat,
        interrupt_id=interrupt_id,
        kind="approval",
        card={"reason": "send the report"},
        user_id="alice",
        turn_seq=1,
        now_ms=NOW_S * 1000,
        snapshot=StoredSnapshot("snapshots/s", 1, "d"),
    )
    return request


def notice(request: RequestRecord, reserved_s: float = NOW_S) -> Notice:
    return Notice(
        "slack", request.interrupt_id, user_id="alice", reserved_ms=int(reserved_s * 1000)
    )


def chatter(fake: fakes.Platform, count: int, metadata: Any = None, to: str = "U-ALICE") -> None:
    """`count` other messages in the conversation (another app's, a person's)."""
    http = JsonHttp(fake.url, {"Authorization": f"Bearer {fakes.SLACK_TOKEN}"})
    for n in range(count):
        body: dict[str, Any] = {"channel": to, "text": f"chatter {n}"}
        if metadata is not None:
            body["metadata"] = metadata
        assert http.post("/chat.postMessage", body)["ok"]


def test_a_card_is_posted_with_metadata_naming_its_chat_and_interrupt(
    channel: SlackChannel, fake: fakes.Platform
) -> None:
    request = card()
    channel.post(ALICE, request, None)

    (post,) = fake.recorded.of("chat.postMessage")
    assert post["metadata"] == {
        "event_type": "interlock_card",
        "event_payload": {"chat_id": CHAT, "interrupt_id": request.interrupt_id},
    }


def test_a_lost_post_is_found_in_the_direct_message_by_its_metadata(
    channel: SlackChannel, fake: fakes.Platform, clock: Clock
) -> None:
    request = card()
    ref = channel.post(ALICE, request, None)
    clock.now_s += 5
    chatter(fake, 3)

    assert channel.find(ALICE, CHAT, notice(request)) == ref
    # The user's id was turned into the app's direct message with them, whose history
    # was read since the post was reserved, with every message's metadata
    (opened,) = fake.recorded.of("conversations.open")
    assert opened == {"users": "U-ALICE"}
    (read,) = fake.recorded.of("conversations.history")
    assert read["channel"] == ref["channel"] and read["include_all_metadata"] is True
    assert float(read["oldest"]) == NOW_S - slack.CLOCK_MARGIN_S


def test_a_card_posted_to_a_channel_is_looked_for_there(
    channel: SlackChannel, fake: fakes.Platform
) -> None:
    in_channel = Link("slack", "U-ALICE", "alice", address="C-cards")
    request = card()
    ref = channel.post(in_channel, request, None)

    assert ref["channel"] == "C-cards"
    assert channel.find(in_channel, CHAT, notice(request)) == ref
    assert fake.recorded.of("conversations.open") == []


def test_the_history_is_paged_until_the_card_is_found(
    channel: SlackChannel, fake: fakes.Platform, clock: Clock
) -> None:
    request = card()
    ref = channel.post(ALICE, request, None)
    clock.now_s += 1
    chatter(fake, 2 * slack.HISTORY_PAGE + 10)  # newest first: the card is on page 3

    assert channel.find(ALICE, CHAT, notice(request)) == ref
    pages = fake.recorded.of("conversations.history")
    assert len(pages) == 3
    assert "cursor" not in pages[0] and pages[1]["cursor"] and pages[2]["cursor"]
    assert {p["limit"] for p in pages} == {slack.HISTORY_PAGE}


def test_the_history_read_is_bounded(
    channel: SlackChannel, fake: fakes.Platform, clock: Clock
) -> None:
    request = card()
    channel.post(ALICE, request, None)
    clock.now_s += 1
    chatter(fake, slack.HISTORY_PAGES * slack.HISTORY_PAGE + 1)

    # Past its pages it stops: the card is posted again rather than reading on and on
    assert channel.find(ALICE, CHAT, notice(request)) is None
    assert len(fake.recorded.of("conversations.history")) == slack.HISTORY_PAGES


def test_nothing_posted_before_the_post_was_reserved_is_read(
    channel: SlackChannel, fake: fakes.Platform, clock: Clock
) -> None:
    # An older message carrying the same card (Slack's clock is trusted to the margin)
    request = card()
    channel.post(ALICE, request, None)
    clock.now_s += 10 * slack.CLOCK_MARGIN_S

    later = notice(request, reserved_s=clock.now_s)
    assert channel.find(ALICE, CHAT, later) is None
    (read,) = fake.recorded.of("conversations.history")
    assert float(read["oldest"]) == int(clock.now_s) - slack.CLOCK_MARGIN_S


def test_only_a_message_naming_both_the_chat_and_the_interrupt_matches(
    channel: SlackChannel, fake: fakes.Platform, clock: Clock
) -> None:
    request = card()
    ref = channel.post(ALICE, request, None)
    clock.now_s += 1
    near_misses = [
        {"event_type": "interlock_card", "event_payload": {"chat_id": CHAT}},
        {"event_type": "interlock_card", "event_payload": {"interrupt_id": request.interrupt_id}},
        {
            "event_type": "interlock_card",
            "event_payload": {"chat_id": CHAT, "interrupt_id": "v1:tool_call:t2:b"},
        },
        {
            "event_type": "interlock_card",
            "event_payload": {"chat_id": "other", "interrupt_id": request.interrupt_id},
        },
        {
            "event_type": "another_apps_event",
            "event_payload": {"chat_id": CHAT, "interrupt_id": request.interrupt_id},
        },
    ]
    for metadata in near_misses:
        chatter(fake, 1, metadata)
    chatter(fake, 1)  # and a message with none

    # None of them is taken for the card: the card itself is
    assert channel.find(ALICE, CHAT, notice(request)) == ref
    # Nor, without the card, is any of them
    other = card("v1:tool_call:t3:c")
    assert channel.find(ALICE, CHAT, notice(other)) is None
    # Whatever else a payload holds, the chat and the interrupt are what match
    extra = {
        "event_type": "interlock_card",
        "event_payload": {"chat_id": CHAT, "interrupt_id": other.interrupt_id, "n": 1},
    }
    chatter(fake, 1, extra)
    found = channel.find(ALICE, CHAT, notice(other))
    assert found is not None and found != ref


def test_a_refused_lookup_finds_nothing_and_an_unreachable_slack_raises(
    fake: fakes.Platform,
) -> None:
    request = card()
    # Refused (here: a conversation Slack does not know; an app without the history
    # scopes hears `missing_scope` the same way): nothing is found, the card is posted
    bad_token = SlackChannel(JsonHttp(fake.url, {"Authorization": "Bearer wrong"}))
    assert bad_token.find(ALICE, CHAT, notice(request)) is None
    authorized = SlackChannel(JsonHttp(fake.url, {"Authorization": f"Bearer {fakes.SLACK_TOKEN}"}))
    nowhere = Link("slack", "U-ALICE", "alice", address="C-unknown")
    assert authorized.find(nowhere, CHAT, notice(request)) is None
    # Unreachable: raised, so the notifier tries again later instead of posting blind
    gone = SlackChannel(JsonHttp("http://127.0.0.1:9", {}))
    with pytest.raises(ChannelError):
        gone.find(nowhere, CHAT, notice(request))
