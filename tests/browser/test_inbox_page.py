"""The inbox across chats and the history of a chat, in the browser: a card answered in
another tab leaves every tab's inbox within a few seconds (the title counts what
waits), and the history says who answered, from where, and what."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, expect

from interlock.manage import INBOX_PAGE
from tests.browser.pages import ChatPage
from tests.e2e.http_client import run_body

pytestmark = pytest.mark.server

# The inbox is read every 3 s: allow a few reads.
UPDATES_WITHIN_MS = 10_000


@pytest.fixture
def user() -> str:
    return f"u{uuid.uuid4().hex[:8]}"  # an inbox of its own, whatever other tests left


@pytest.fixture
def tabs(context: BrowserContext, server: str, user: str) -> Iterator[list[ChatPage]]:
    opened: list[ChatPage] = []
    yield opened
    for tab in opened:
        assert tab.errors == []


def open_chat(context: BrowserContext, server: str, user: str, tabs: list[ChatPage]) -> ChatPage:
    tab = ChatPage.open(context, server, f"chat-{uuid.uuid4().hex[:12]}", user)
    tabs.append(tab)
    return tab


def test_the_inbox_follows_answers_given_in_other_tabs(
    context: BrowserContext, server: str, user: str, tabs: list[ChatPage]
) -> None:
    # Given two chats, each waiting for the user
    report = open_chat(context, server, user, tabs)
    report.send("send the report")
    expect(report.card).to_be_visible()
    summary = open_chat(context, server, user, tabs)
    summary.send("Please write a summary")
    expect(summary.card).to_be_visible()

    # Both tabs list both, newest first, and count them in the title
    for tab in (report, summary):
        rows = tab.page.locator("#inbox li")
        expect(rows).to_have_count(2, timeout=UPDATES_WITHIN_MS)
        expect(rows.nth(0)).to_contain_text("Which format should the summary use?")
        expect(rows.nth(1)).to_contain_text("high risk")
        expect(tab.page).to_have_title("(2) Interlock", timeout=UPDATES_WITHIN_MS)
    # Each row tells its request apart: the tool and its arguments, the chat, the age
    reporting = report.page.locator("#inbox li").nth(1)
    expect(reporting).to_contain_text("Tool: Send report")
    expect(reporting).to_contain_text("Recipient: team@example.org")
    expect(reporting).to_contain_text(f"asked just now in {report.chat}")
    report.screenshot("inbox-two-waiting")

    # The status filter shows those to answer, or those being carried out (none here)
    report.page.get_by_label("Show").select_option("claimed")
    expect(report.page.locator("#inbox li:not([hidden])")).to_have_text(
        ["Nothing here with this filter."], timeout=UPDATES_WITHIN_MS
    )
    report.page.get_by_label("Show").select_option("pending")
    expect(report.page.locator("#inbox li:not([hidden])")).to_have_count(
        2, timeout=UPDATES_WITHIN_MS
    )
    report.screenshot("inbox-filtered-to-answer")
    report.page.get_by_label("Show").select_option("all")

    # When the question is answered in its tab
    summary.card.get_by_label("A table").check()
    summary.button("Send answer").click()
    expect(summary.outcome()).to_have_text(re.compile(r"^Answered at "))

    # Then the other tab's inbox drops it within a few seconds, without a reload
    expect(report.page.locator("#inbox li")).to_have_count(1, timeout=UPDATES_WITHIN_MS)
    expect(report.page).to_have_title("(1) Interlock", timeout=UPDATES_WITHIN_MS)
    # And the answering tab's history says what was answered, by whom, from where
    entry = summary.page.locator("#history li").first
    expect(entry).to_contain_text("Answered")
    expect(entry).to_contain_text(f"by {user} via the card page")
    expect(entry).to_contain_text("A table")
    summary.screenshot("history-answered")


def test_a_card_answered_in_another_tab_settles_here_too(
    context: BrowserContext, server: str, user: str, tabs: list[ChatPage]
) -> None:
    # Given one chat's card open in two tabs
    first = open_chat(context, server, user, tabs)
    first.send("send the report")
    expect(first.card).to_be_visible()
    second = ChatPage.open(context, server, first.chat, user)
    tabs.append(second)
    expect(second.button("Approve")).to_be_visible()

    # When it is approved in the second
    second.button("Approve").click()
    expect(second.outcome()).to_have_text(re.compile(r"^Approved at "))

    # Then the first shows it answered, within a few seconds, and nothing waits
    expect(first.page.locator("#inbox li.empty")).to_be_visible(timeout=UPDATES_WITHIN_MS)
    expect(first.page).to_have_title("Interlock")
    expect(first.page.locator(".card .outcome").last).to_contain_text(
        "Approved", timeout=UPDATES_WITHIN_MS
    )
    first.screenshot("inbox-answered-elsewhere")


def test_the_inbox_shows_a_page_at_a_time_and_more_on_request(
    context: BrowserContext, server: str, user: str, tabs: list[ChatPage]
) -> None:
    # Given more requests waiting than one page of the inbox lists (opened through the API)
    token = context.request.get(f"{server}/local/session?user={user}").json()["token"]
    chats = [f"paged-{uuid.uuid4().hex[:8]}" for _ in range(INBOX_PAGE + 2)]
    for chat in chats:
        opened = context.request.post(
            f"{server}/runs",
            data=run_body(chat, f"r-{chat}", "send the report"),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        assert opened.ok, opened.text()
    tab = open_chat(context, server, user, tabs)

    # The first page is listed, the title says more wait, and a button offers them
    rows = tab.page.locator("#inbox li:not(.more)")
    expect(rows).to_have_count(INBOX_PAGE, timeout=UPDATES_WITHIN_MS)
    expect(tab.page).to_have_title(f"({INBOX_PAGE}+) Interlock")
    more = tab.page.get_by_role("button", name="Show more waiting for you")
    tab.screenshot("inbox-first-page")

    more.click()

    # Every one is listed once, the focus is on the first new row, and no button is left
    expect(rows).to_have_count(len(chats))
    expect(more).to_have_count(0)
    expect(tab.page).to_have_title(f"({len(chats)}) Interlock")
    listed = [text.split(" in ")[-1] for text in rows.locator(".meta").all_inner_texts()]
    assert sorted(listed) == sorted(chats)
    expect(rows.nth(INBOX_PAGE).locator("a")).to_be_focused()
    # The next reads keep both pages
    tab.page.wait_for_timeout(4_000)
    expect(rows).to_have_count(len(chats))
    tab.screenshot("inbox-every-page")
