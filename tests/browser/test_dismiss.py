"""Setting a card aside on the page, unanswered: the request is cancelled, nothing it
asked about runs, and the page says so (before, only `DELETE …/request` could)."""

from __future__ import annotations

import re
import time
from typing import Final

import pytest
from playwright.sync_api import expect

from interlock.adapters.factory import Stores
from interlock.records import RequestState
from tests.browser.pages import ChatPage

pytestmark = pytest.mark.server

REPORT: Final = "Please send the weekly report"
QUESTION: Final = "Please write a summary"
WIDTHS: Final = ({"width": 1280, "height": 900}, {"width": 360, "height": 740})


@pytest.mark.parametrize("prompt", [REPORT, QUESTION], ids=["approval", "question"])
def test_a_card_dismissed_on_the_page_is_cancelled_and_nothing_runs(
    tab: ChatPage, stores: Stores, chat: str, prompt: str
) -> None:
    # Given an open card (an approval, or a question)
    tab.send(prompt)
    card = tab.card
    dismiss = card.get_by_role("button", name="Dismiss")
    for viewport in WIDTHS:
        tab.page.set_viewport_size(viewport)  # type: ignore[arg-type]
        expect(dismiss).to_be_visible()
        assert tab.accessibility_violations() == [], viewport

    # When she dismisses it
    dismiss.click()

    # Then the card says it was set aside, offers nothing, and the chat takes a message
    expect(tab.outcome()).to_have_text(re.compile(r"^Dismissed: nothing it asked about"))
    expect(card.get_by_role("button")).to_have_count(0)
    expect(tab.page.get_by_label("Message to the agent")).to_be_enabled()
    assert tab.accessibility_violations() == []
    tab.screenshot(f"card-dismissed-{'question' if prompt == QUESTION else 'approval'}")

    # And the request was cancelled with no answer: nothing was sent, nothing decided
    request = stores.requests.get(chat, int(time.time() * 1000))
    assert request is not None and request.state is RequestState.CANCELLED
    assert request.claim_count == 0 and tab.resumes == []
    assert stores.outbox.get(f"{chat}#{request.card['tool_use_id']}") is None
    kinds = [e.type for e in stores.chats.events(chat)]
    assert "cancelled" in kinds and "decision" not in kinds
