"""What reaches the page from outside it: the local sweeper settling a card nobody
answered, and a Telegram message's link opening the chat whose cards it carries."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import pytest
from playwright.sync_api import BrowserContext, expect

from interlock.adapters.factory import Stores
from interlock.adapters.schema import EXPIRY_INDEX_PARTITION
from interlock.adapters.telegram import TelegramChannel
from interlock.adapters.webclient import JsonHttp
from interlock.channels import Link
from interlock.records import RequestState
from tests.browser.pages import ChatPage
from tests.browser.test_card_page import now_ms, pointer
from tests.channels import fakes
from tests.e2e.support import wait_for

pytestmark = pytest.mark.server

# The twins' batch pauses on two confirmations at once; the server sweeps every second,
# as `./dev serve` does on its (longer) schedule.
SERVER_AGENT: Final = "tests.api.twin_agent:build"
SERVER_SWEEP_EVERY: Final = 1


def expire(storage: dict[str, Any], chat: str) -> None:
    """Move the chat's request past its expiry, as time would."""
    storage["dynamodb"].update_item(
        TableName=storage["table"],
        Key=_request_key(chat),
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(now_ms() // 1000 - 5)}},
    )


@contextmanager
def out_of_the_sweepers_sight(storage: dict[str, Any], chat: str) -> Iterator[None]:
    """The chat's request out of the sweeper's index inside the block (as if its next
    pass were still minutes away), back in it after."""
    dynamodb, table, key = storage["dynamodb"], storage["table"], _request_key(chat)
    shard = dynamodb.get_item(TableName=table, Key=key)["Item"][EXPIRY_INDEX_PARTITION]
    dynamodb.update_item(
        TableName=table, Key=key, UpdateExpression=f"REMOVE {EXPIRY_INDEX_PARTITION}"
    )
    yield
    dynamodb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression=f"SET {EXPIRY_INDEX_PARTITION} = :shard",
        ExpressionAttributeValues={":shard": shard},
    )


def two_refund_cards(context: BrowserContext, server: str) -> tuple[str, ChatPage]:
    """A new chat whose page shows the twins' two refund cards; the chat and its page."""
    chat = f"chat-{uuid.uuid4().hex[:12]}"
    tab = ChatPage.open(context, server, chat, "rita")
    tab.send("refund both orders")
    expect(tab.page.locator(".card-group .card")).to_have_count(2)
    return chat, tab


def _request_key(chat: str) -> dict[str, Any]:
    return {"pk": {"S": f"CHAT#{chat}"}, "sk": {"S": "REQUEST"}}


def test_the_local_sweeper_settles_an_unanswered_card_and_the_run_goes_on(
    context: BrowserContext, server: str, stores: Stores, storage: dict[str, Any]
) -> None:
    # Given two cards on screen that nobody answers before their request expires
    chat, tab = two_refund_cards(context, server)
    expire(storage, chat)

    # Then the server's own sweeper settles it, and the page says so without a click:
    # each card timed out, the agent went on without either refund
    wait_for(lambda: pointer(stores, chat).state is RequestState.DONE, "the sweeper's settle")
    done = pointer(stores, chat)
    assert (done.decision, done.claim_count) == ("timed_out", 1)
    cards = tab.page.locator(".card-group .card")
    for n in range(2):
        expect(cards.nth(n).locator(".outcome")).to_have_text(
            re.compile(r"^This request has expired \(at .+\): nobody answered it in time\.$")
        )
        expect(cards.nth(n).get_by_role("button")).to_have_count(0)
    # and the group offers nothing more to press
    expect(tab.page.locator(".card-group").get_by_role("button")).to_have_count(0)
    expect(tab.page.locator(".group-note")).to_have_text("")
    expect(tab.agent_says()).to_contain_text("Refunds:")
    expect(tab.page.get_by_label("Message to the agent")).to_be_enabled()
    tab.screenshot("card-expired-by-sweeper")
    keys = [f"{chat}#{a.card['tool_use_id']}" for a in done.asked]
    assert [stores.outbox.get(k) for k in keys] == [None, None]
    assert tab.errors == []


def test_a_card_the_page_found_expired_follows_the_sweep_that_comes_after(
    context: BrowserContext, server: str, stores: Stores, storage: dict[str, Any]
) -> None:
    # Given two cards on screen whose request expires where the sweeper cannot see it yet
    chat, tab = two_refund_cards(context, server)
    cards = tab.page.locator(".card-group .card")
    with out_of_the_sweepers_sight(storage, chat):
        expire(storage, chat)

        # When the page has found it expired, and only then the sweeper settles it
        for n in range(2):
            expect(cards.nth(n).locator(".outcome")).to_have_text(
                re.compile(r"^This request has expired \(at .+\)\. It can no longer be answered\.$")
            )
    wait_for(lambda: pointer(stores, chat).state is RequestState.DONE, "the sweeper's settle")

    # Then the page follows without a click: each card timed out, and the agent went on
    for n in range(2):
        expect(cards.nth(n).locator(".outcome")).to_have_text(
            re.compile(r"^This request has expired \(at .+\): nobody answered it in time\.$")
        )
    expect(tab.agent_says()).to_contain_text("Refunds:")
    expect(tab.page.get_by_label("Message to the agent")).to_be_enabled()
    assert tab.errors == []


def test_a_telegram_messages_link_opens_the_chat_it_carries(
    context: BrowserContext, server: str, stores: Stores
) -> None:
    # Given a pause on two cards in one chat, and another chat the person was last on
    chat = f"chat-{uuid.uuid4().hex[:12]}"
    desk = ChatPage.open(context, server, chat, "rita")
    desk.send("refund both orders")
    expect(desk.page.locator(".card-group .card")).to_have_count(2)
    other = f"chat-{uuid.uuid4().hex[:12]}"
    ChatPage.open(context, server, other, "rita").page.close()

    # When its card goes to Telegram through the channel's own client (the card page
    # configured as the server, signed in locally as rita)
    with fakes.serve(fakes.FakeTelegram) as telegram:
        channel = TelegramChannel(JsonHttp(telegram.url, timeout_s=5), fakes.TELEGRAM_TOKEN)
        page_url = f"{server}/?user=rita&groups=reporter"
        channel.post(Link("telegram", "1001", "rita"), pointer(stores, chat), page_url)
        (sent,) = telegram.recorded.of("sendMessage")
    (link,) = [
        b["url"] for row in sent["reply_markup"]["inline_keyboard"] for b in row if "url" in b
    ]
    assert re.search(rf"[?&]chat={chat}(&|$)", link)

    # Then the link, opened on the phone, shows that chat and both its cards
    phone = ChatPage(context.new_page(), server, chat)
    phone.page.set_viewport_size({"width": 360, "height": 740})
    phone.page.goto(link)
    phone.wait_ready()
    cards = phone.page.locator(".card-group .card")
    expect(cards).to_have_count(2)
    expect(cards.nth(0)).to_contain_text("A-1")
    expect(cards.nth(1)).to_contain_text("B-2")
    expect(cards.nth(0).get_by_role("button", name="Approve", exact=True)).to_be_in_viewport()
    phone.screenshot("telegram-link-opens-chat")
    assert phone.errors == []
