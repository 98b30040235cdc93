"""Two cards of one pause on the page: each answered on its own, sent together once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Final

import pytest
from playwright.sync_api import BrowserContext, expect

from interlock.adapters.factory import Stores
from interlock.records import RequestState
from tests.browser.pages import ChatPage
from tests.browser.test_card_page import pointer
from tests.e2e.support import wait_for

pytestmark = pytest.mark.server

# The server runs a user's agent whose batch holds two refunds, each confirmed.
SERVER_AGENT: Final = "tests.api.twin_agent:build"


@pytest.fixture
def tab(context: BrowserContext, server: str) -> Iterator[ChatPage]:
    opened = ChatPage.open(context, server, f"chat-{uuid.uuid4().hex[:12]}", "rita")
    yield opened
    assert opened.errors == []


def test_both_cards_are_answered_and_sent_in_one_resume(tab: ChatPage, stores: Stores) -> None:
    # Given the agent paused on two confirmations at once
    tab.send("refund both orders")
    group = tab.page.locator(".card-group")
    cards = group.locator(".card")
    expect(cards).to_have_count(2)
    expect(group.locator(".group-note")).to_contain_text("2 still to answer")
    first, second = cards.nth(0), cards.nth(1)
    expect(first).to_contain_text("A-1")
    expect(second).to_contain_text("B-2")
    # The exact call is one fold away, for whoever checks the values before deciding
    raw = second.locator(".raw-call")
    expect(raw.locator("pre")).not_to_be_visible()
    raw.get_by_text("The call as the agent made it").click()
    expect(raw.locator("pre")).to_contain_text('"order": "B-2"')
    expect(raw.locator("pre")).to_contain_text('"tool": "refund"')

    # When the person approves the first, nothing is sent yet
    first.get_by_role("button", name="Approve", exact=True).click()
    expect(group.locator(".group-note")).to_contain_text("1 still to answer")
    assert tab.resumes == []

    # And when they deny the second, both answers go in one resume
    second.get_by_role("button", name="Deny", exact=True).click()
    expect(tab.agent_says()).to_contain_text("Refunded A-1.")
    assert len(tab.resumes) == 1
    entries = tab.resumes[0].post_data_json["resume"]
    assert [e["payload"]["decision"] for e in entries] == ["approve", "reject"]

    # Then the run went on once: A-1 refunded, B-2 never ran (the text streams before
    # the run has stored its end: wait for the end)
    wait_for(lambda: pointer(stores, tab.chat).state is RequestState.DONE, "the run's end")
    request = pointer(stores, tab.chat)
    assert (request.state, request.claim_count) == (RequestState.DONE, 1)
    keys = [f"{tab.chat}#{a.card['tool_use_id']}" for a in request.asked]
    assert [stores.outbox.get(k) for k in keys] == [{"refund": "A-1", "amount": 40}, None]
    # And each card says its own outcome, not the last answer's
    thread = tab.page.locator(".card .outcome")
    expect(thread.nth(0)).to_contain_text("Approved")
    expect(thread.nth(1)).to_contain_text("Denied")
    tab.screenshot("card-group-approve-deny")


def test_a_question_without_a_schema_is_answered_in_words(tab: ChatPage) -> None:
    # Given a tool asked inside its body and declared no answer schema
    tab.send("add a note to the order")
    expect(tab.card.get_by_role("heading")).to_have_text("Add note asks")
    expect(tab.card).to_contain_text("What should the note on A-1 say?")

    # When the person writes the answer and sends it
    tab.card.get_by_label("Your answer").fill("Customer called twice.")
    tab.button("Send answer").click()

    # Then the tool received their words as they wrote them
    expect(tab.agent_says()).to_contain_text("Noted on A-1: Customer called twice.")
    assert tab.resumes[0].post_data_json["resume"][0]["payload"] == "Customer called twice."


def test_approve_all_records_one_approve_per_card_in_one_resume(
    tab: ChatPage, stores: Stores
) -> None:
    # Given the two confirmations at once
    tab.send("refund both orders")
    group = tab.page.locator(".card-group")
    expect(group.locator(".card")).to_have_count(2)

    # When the person approves them all with one press
    group.get_by_role("button", name="Approve all").click()

    # Then one resume carries one approve per card, both run, and each card says so
    expect(tab.agent_says()).to_contain_text("Refunded A-1.")
    assert len(tab.resumes) == 1
    entries = tab.resumes[0].post_data_json["resume"]
    assert [e["payload"]["decision"] for e in entries] == ["approve", "approve"]
    outcomes = tab.page.locator(".card .outcome")
    expect(outcomes.nth(0)).to_contain_text("Approved")
    expect(outcomes.nth(1)).to_contain_text("Approved")
    expect(group.get_by_role("button", name="Approve all")).to_have_count(0)
    wait_for(lambda: pointer(stores, tab.chat).state is RequestState.DONE, "the run's end")
    request = pointer(stores, tab.chat)
    keys = [f"{tab.chat}#{a.card['tool_use_id']}" for a in request.asked]
    assert all(stores.outbox.get(k) is not None for k in keys)
    tab.screenshot("card-group-approved-all")


def test_markdown_in_a_question_is_drawn_and_nothing_in_it_runs(tab: ChatPage) -> None:
    # Given a question written in markdown, with an image tag and a script link in it
    tab.send("check the wording")
    reason = tab.card.locator(".reason")
    expect(reason.locator("strong")).to_have_text("Heads up:")
    expect(reason.locator("code")).to_have_text("A-1")
    expect(reason.locator("li")).to_have_text(["keep it short", "see the guide"])
    guide = reason.get_by_role("link", name="the guide")
    expect(guide).to_have_attribute("href", "https://docs.example.org/notes")
    expect(guide).to_have_attribute("rel", "noopener noreferrer nofollow")

    # Then the tag shows as the words it is and the script link as its words alone
    expect(reason).to_contain_text('<img src=x onerror="document.title=1">')
    assert reason.locator("img").count() == 0
    expect(reason.get_by_role("link")).to_have_count(1)
    expect(reason).to_contain_text("and this")
    assert tab.page.title() != "1"

    # And an answer in markdown is shown as typed, and reaches the tool as written
    tab.card.get_by_label("Your answer").fill("Sorry for the **delay**.")
    tab.button("Send answer").click()
    expect(tab.outcome()).to_contain_text("Your answer: Sorry for the **delay**.")
    expect(tab.outcome().locator("strong")).to_have_count(0)
    expect(tab.agent_says()).to_contain_text("Worded for A-1: Sorry for the **delay**.")
    tab.screenshot("card-markdown")
