"""The page shows the agent's text as the model writes it, over the real stream.

The server runs a deliberately slow scripted model (1 s of silence, then a word every
80 ms). A MutationObserver in the page records every text the agent's message showed,
so the test judges what the person saw, not when.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Final

import pytest
from playwright.sync_api import BrowserContext, Route, expect

from interlock.adapters.factory import Stores
from interlock.records import RequestState
from tests.browser.pages import ChatPage
from tests.browser.test_card_page import REPORT, claimed_by_a_dead_worker, pointer
from tests.e2e.support import wait_for

pytestmark = pytest.mark.server

SERVER_ENV: Final = {"INTERLOCK_MODEL": "scripted:1000/80", "INTERLOCK_HEARTBEAT_S": "0.3"}

RECORD_TEXTS: Final = """() => {
  window.seenTexts = [];
  new MutationObserver(() => {
    const last = [...document.querySelectorAll(".msg.agent p")].pop();
    if (last) window.seenTexts.push(last.textContent);
  }).observe(document.getElementById("thread"), {
    subtree: true, childList: true, characterData: true,
  });
}"""


@pytest.fixture
def tab(context: BrowserContext, server: str) -> Iterator[ChatPage]:
    opened = ChatPage.open(context, server, f"chat-{uuid.uuid4().hex[:12]}", "alice")
    yield opened
    assert opened.errors == []


def test_the_agents_text_appears_word_by_word(tab: ChatPage) -> None:
    tab.page.evaluate(RECORD_TEXTS)
    tab.send("hello")

    expect(tab.agent_says()).to_contain_text("or run the export.")
    final = tab.agent_says().locator("p").text_content()
    seen = [t for t in tab.page.evaluate("window.seenTexts") if t]
    # Every text shown was a beginning of the answer, and it grew in many steps
    assert final and all(final.startswith(text) for text in seen)
    assert len(set(seen)) > 5 and min(map(len, seen)) < len(final) / 2
    # One message, not a streamed copy and a final copy
    expect(tab.page.locator(".msg.agent")).to_have_count(1)
    tab.screenshot("streaming-answer")


def test_while_a_resumed_run_streams_the_card_says_the_answer_was_taken(tab: ChatPage) -> None:
    # Given a card, and a slow model behind it
    tab.send("Please download the reference table")
    expect(tab.button("Approve")).to_be_visible(timeout=20_000)

    # When alice approves, and the run goes on (a silence before each model answer)
    tab.button("Approve").click()

    # Then while it streams the card no longer says "Sending": it says the answer was taken
    expect(tab.outcome()).to_have_text("Answer taken: the agent continues…")
    tab.screenshot("card-answer-taken")
    # And once the run ends it says what was decided
    expect(tab.outcome()).to_contain_text("Approved at", timeout=30_000)


def test_a_poll_answered_after_the_cards_own_answer_leaves_its_record_as_it_is(
    context: BrowserContext, server: str, stores: Stores, chat: str
) -> None:
    # Given alice's approve, recorded by a worker that died before it did anything: her
    # page shows the interrupted card and polls it every second
    user = f"alice-{uuid.uuid4().hex[:6]}"
    tab = ChatPage.open(context, server, chat, user)
    tab.send(REPORT)
    expect(tab.button("Approve")).to_be_visible(timeout=20_000)
    claimed_by_a_dead_worker(stores, chat, user, acted=False)
    tab.reload()
    expect(tab.card).to_contain_text("was interrupted before anything was done with it")

    # And every poll sent once she denies is held until her own resume has finished
    denied = threading.Event()

    def held(route: Route) -> None:
        if denied.is_set() and route.request.method == "GET":
            wait_for(lambda: pointer(stores, chat).state is RequestState.DONE, "the run's end")
            time.sleep(1)  # and the end of its stream has reached the page
        route.continue_()

    tab.page.route(f"**/chats/{chat}/request", held)

    # When she denies, and the slow run goes on for a while
    denied.set()
    tab.button("Deny").click()

    # Then the card says what was decided, and a late poll changes nothing of it
    expect(tab.outcome()).to_contain_text("Denied at", timeout=30_000)
    tab.page.wait_for_timeout(2_500)
    expect(tab.outcome()).to_contain_text("Denied at")
    expect(tab.page.locator("#thread .msg.record")).to_have_count(1)
    assert tab.errors == []
