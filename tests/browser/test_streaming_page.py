"""The page shows the agent's text as the model writes it, over the real stream.

The server runs a deliberately slow scripted model (1 s of silence, then a word every
80 ms). A MutationObserver in the page records every text the agent's message showed,
so the test judges what the person saw, not when.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Final

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.browser.pages import ChatPage

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
