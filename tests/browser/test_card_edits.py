"""Approve with edits on the card page, in headless chromium, against the local server.

The analyst's report card lets a person change its recipient (the demo policy marks it
editable): the field holds the agent's value, a change is shown beside it before
anything is sent, and the report then goes once, where the person said.
"""

from __future__ import annotations

import re
import time
from typing import Final

import pytest
from playwright.sync_api import expect

from interlock.adapters.factory import Stores
from interlock.records import RequestRecord, RequestState
from tests.browser.pages import ChatPage

pytestmark = pytest.mark.server

REPORT: Final = "Please send the weekly report"
DOWNLOAD: Final = "Please download the reference table"
ASKED_TO: Final = "team@example.org"
FIXED_TO: Final = "ops@example.org"
WIDTHS: Final = ({"width": 1280, "height": 900}, {"width": 360, "height": 740})


def _pointer(stores: Stores, chat: str) -> RequestRecord:
    request = stores.requests.get(chat, int(time.time() * 1000))
    assert request is not None
    return request


def test_a_recipient_changed_before_approving_is_reviewed_then_sent_there_once(
    tab: ChatPage, stores: Stores, chat: str
) -> None:
    # Given the report card, whose recipient the policy lets a person change
    tab.send(REPORT)
    card = tab.card
    recipient = card.get_by_label("recipient")
    expect(recipient).to_have_value(ASKED_TO)

    # When she corrects it and presses Approve
    recipient.fill(FIXED_TO)
    tab.button("Approve").click()

    # Then nothing is sent yet: the change is shown beside the agent's value, at both
    # widths, with nothing axe-core finds wrong
    review = card.get_by_role("group", name="You are approving with these changes:")
    expect(review).to_be_visible()
    expect(review.locator("del")).to_have_text(ASKED_TO)
    expect(review.locator("ins")).to_have_text(FIXED_TO)
    assert tab.resumes == []
    for viewport in WIDTHS:
        tab.page.set_viewport_size(viewport)  # type: ignore[arg-type]
        assert tab.page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        assert tab.accessibility_violations() == [], viewport
    tab.screenshot("card-edit-review")

    # When she goes back, then approves again and confirms
    review.get_by_role("button", name="Back").click()
    expect(review).to_have_count(0)
    tab.button("Approve").click()
    card.get_by_role("button", name="Approve with these changes").click()

    # Then the report went once, to the address she gave, and the trail keeps both
    expect(tab.outcome()).to_have_text(re.compile(r"^Approved at "))
    request = _pointer(stores, chat)
    assert (request.state, request.claim_count) == (RequestState.DONE, 1)
    sent = stores.outbox.get(f"{chat}#{request.card['tool_use_id']}")
    assert sent is not None and sent["recipient"] == FIXED_TO
    (decided,) = [e for e in stores.chats.events(chat) if e.type == "decision"]
    assert decided.detail["edits"] == {"recipient": {"from": ASKED_TO, "to": FIXED_TO}}
    assert len(tab.resumes) == 1
    sent_payload = tab.resumes[0].post_data or ""
    assert FIXED_TO in sent_payload and ASKED_TO not in sent_payload


def test_an_unchanged_approval_goes_at_once_and_a_bad_edit_is_said_at_its_field(
    tab: ChatPage, stores: Stores, chat: str
) -> None:
    # Given the report card, with the recipient emptied (the schema requires one)
    tab.send(REPORT)
    card = tab.card
    recipient = card.get_by_label("recipient")
    recipient.fill("")
    tab.button("Approve").click()

    # Then the field says so and nothing is sent
    expect(recipient).to_have_attribute("aria-invalid", "true")
    assert tab.resumes == []

    # When she puts the agent's value back and approves: no review, one resume
    recipient.fill(ASKED_TO)
    tab.button("Approve").click()
    expect(tab.outcome()).to_have_text(re.compile(r"^Approved at "))
    request = _pointer(stores, chat)
    sent = stores.outbox.get(f"{chat}#{request.card['tool_use_id']}")
    assert sent is not None and sent["recipient"] == ASKED_TO


def test_a_download_url_changed_to_an_internal_host_is_refused_and_nothing_recorded(
    tab: ChatPage, stores: Stores, chat: str
) -> None:
    # Given a download card whose URL list she replaces with an internal address
    tab.send(DOWNLOAD)
    card = tab.card
    urls = card.locator(".list-urls")
    urls.get_by_role("button", name=re.compile("^Remove URL")).click()
    add = card.get_by_label("Add a URL")
    add.fill("http://169.254.169.254/latest/meta-data")
    add.press("Enter")
    tab.button("Approve").click()
    card.get_by_role("button", name="Approve with these changes").click()

    # Then the server refuses it, the page says why, and the request is untouched
    expect(card.locator(".error").filter(has_text="IP addresses")).to_be_visible()
    request = _pointer(stores, chat)
    assert (request.state, request.claim_count) == (RequestState.PENDING, 0)
