"""The card page tells the truth about what happened: a default given by the timeout
policy, which inbox rows are being carried out, an answer in its form's words as typed,
whose answer stands, where an answer failed to go, what a download grants, and when an
answer was given (the server's time, as the history says it).

The server sweeps every second, as `./dev serve` does on its (longer) schedule.
"""

from __future__ import annotations

import datetime
import json
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest
from playwright.sync_api import BrowserContext, Route, ViewportSize, expect

from interlock.adapters.factory import Stores
from interlock.cards import download_card
from interlock.records import RequestState, fresh_secret
from tests.browser.pages import ChatPage
from tests.browser.test_card_page import DOWNLOAD, INFO, QUESTION, REPORT, now_ms, pointer
from tests.e2e.support import wait_for

pytestmark = pytest.mark.server

SERVER_SWEEP_EVERY: Final = 1
# How far ahead of the server this browser's clock runs, where a test needs it to.
SKEW: Final = datetime.timedelta(minutes=7)
PHONE: Final[ViewportSize] = {"width": 360, "height": 740}
DESKTOP: Final[ViewportSize] = {"width": 1280, "height": 900}

SITES_ONLY: Final = "The agent may download from these sites for the rest of this chat."
PACKAGES_ONLY: Final = "The agent may install these packages for the rest of this chat."
BOTH: Final = (
    "The agent may download from these sites and install these packages for the rest of this chat."
)

OpenTab = Callable[..., ChatPage]


@pytest.fixture
def user() -> str:
    return f"tess-{uuid.uuid4().hex[:6]}"  # own limits and inbox, whatever others left


@pytest.fixture
def open_tab(context: BrowserContext, server: str, user: str) -> Iterator[OpenTab]:
    """Open a chat in a new tab (a new chat unless named); no tab may end with a script
    error. `skew` runs the tab's clock that far from the server's."""
    tabs: list[ChatPage] = []

    def opener(chat: str | None = None, skew: datetime.timedelta | None = None) -> ChatPage:
        chat = chat or f"chat-{uuid.uuid4().hex[:12]}"
        tab = ChatPage(context.new_page(), server, chat)
        if skew is not None:
            tab.page.clock.install(time=datetime.datetime.now(datetime.UTC) + skew)
        tab.page.goto(f"{server}/?chat={chat}&user={user}&groups=reporter")
        tab.wait_ready()
        tabs.append(tab)
        return tab

    yield opener
    assert [e for tab in tabs for e in tab.errors] == []


def expire(storage: dict[str, Any], chat: str) -> None:
    """Move the chat's request past its expiry, as time would."""
    storage["dynamodb"].update_item(
        TableName=storage["table"],
        Key={"pk": {"S": f"CHAT#{chat}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(now_ms() // 1000 - 5)}},
    )


def claimed_by_a_live_worker(stores: Stores, chat: str, user: str) -> None:
    """The chat's question as a worker carrying out "A table" leaves it: claimed, its
    lease running."""
    request = pointer(stores, chat)
    secret, secret_hash = fresh_secret()
    stores.requests.rotate_secret(request, "stream", secret_hash, now_ms())
    answer = json.dumps({request.interrupt_id: {"answer": "A table"}}, separators=(",", ":"))
    stores.requests.claim(
        pointer(stores, chat), secret, "alive", now_ms(), ("answered", answer), by=user
    )


def hold(route: Route) -> None:
    """Leave the request unanswered: the tab's inbox never hears of a change."""


def test_a_question_nobody_answered_says_its_default_applies(
    open_tab: OpenTab, stores: Stores, storage: dict[str, Any]
) -> None:
    # Given a question with a default that nobody answers before it expires
    tab = open_tab()
    tab.send(QUESTION)
    expect(tab.button("Send answer")).to_be_visible()
    expire(storage, tab.chat)

    # When the sweeper applies the question's timeout policy: its default
    wait_for(lambda: pointer(stores, tab.chat).state is RequestState.DONE, "the sweeper")
    assert pointer(stores, tab.chat).decision == "defaulted"

    # Then the card says nobody answered and the default applies, never "Answered"
    truth = "Nobody answered in time: the default applies (Bullet points)."
    expect(tab.outcome()).to_have_text(truth)
    expect(tab.card.get_by_role("button")).to_have_count(0)
    # And so it says after a reload, with the history telling the same
    tab.reload()
    expect(tab.outcome()).to_have_text(truth)
    expect(tab.page.locator("#history li").first).to_contain_text("nobody answered in time")
    tab.screenshot("truth-defaulted")


def test_the_being_carried_out_filter_shows_only_rows_being_carried_out(
    open_tab: OpenTab, stores: Stores, user: str
) -> None:
    # Given one question waiting for an answer, and another whose answer is carried out
    carried = open_tab()
    carried.send(QUESTION)
    expect(carried.button("Send answer")).to_be_visible()
    claimed_by_a_live_worker(stores, carried.chat, user)
    tab = open_tab()
    tab.send(QUESTION)
    expect(tab.button("Send answer")).to_be_visible()
    inbox = tab.page.locator("#inbox")
    waiting = inbox.locator("li[data-state=pending]")
    running = inbox.locator("li[data-state=claimed]")
    expect(running).to_contain_text("being carried out")
    expect(waiting).to_be_visible()

    # When the filter asks for what is being carried out
    tab.page.get_by_label("Show").select_option("claimed")

    # Then only that row shows: the one to answer is hidden, and nothing says "empty"
    expect(running).to_be_visible()
    expect(waiting).to_be_hidden()
    expect(inbox.get_by_text("Nothing here with this filter.")).to_have_count(0)
    tab.screenshot("truth-inbox-being-carried-out")

    # And the other way round for what is to answer
    tab.page.get_by_label("Show").select_option("pending")
    expect(waiting).to_be_visible()
    expect(running).to_be_hidden()


def test_the_history_tells_an_answer_in_its_forms_words_as_typed(open_tab: OpenTab) -> None:
    # Given the agent asks for an export's details, and a value has underscores
    tab = open_tab()
    tab.send(INFO)
    tab.card.get_by_label("Destination bucket").fill("reports_2026_archive")
    tab.card.get_by_label("Retention in days").fill("30")

    # When it is sent
    tab.button("Send answer").click()

    # Then the card and the history tell it with the form's labels, as typed: no markup
    expect(tab.outcome()).to_have_text(
        re.compile(
            r"Your answer: Destination bucket: reports_2026_archive; "
            r"Retention in days: 30; Email me when done: no$"
        )
    )
    told = tab.page.locator("#history li .answer").first
    said = "Destination bucket: reports_2026_archive; Email me when done: no; Retention in days: 30"
    expect(told).to_have_text(said)
    expect(tab.page.locator("#history em, .card .outcome em")).to_have_count(0)
    # And so after a reload
    tab.reload()
    expect(tab.page.locator("#history li .answer").first).to_have_text(said)
    tab.screenshot("truth-history-answer")


def test_an_answer_refused_because_another_stands_shows_that_one_at_once(
    open_tab: OpenTab,
) -> None:
    # Given one request open in two tabs, the second not rereading its inbox meanwhile
    first = open_tab()
    first.send(REPORT)
    expect(first.button("Approve")).to_be_visible()
    second = open_tab(first.chat)
    expect(second.button("Deny")).to_be_visible()
    second.page.route("**/inbox", hold)

    # When the first approves, and the second then denies
    first.button("Approve").click()
    expect(first.outcome()).to_have_text(re.compile(r"^Approved at "))
    second.button("Deny").click()

    # Then the second drops its buttons at once and shows the approval that stands
    expect(second.card.get_by_role("button")).to_have_count(0, timeout=3_000)
    expect(second.outcome()).to_have_text(
        re.compile(r"^Not taken: Approved by .+ that decision stands\.$")
    )
    expect(second.page.locator("#status")).not_to_contain_text("Something went wrong")
    expect(second.page.locator("#history li strong")).to_have_text(["Approved"])
    second.screenshot("truth-decision-stands")


def test_an_unreachable_server_is_said_beside_the_card_in_view(
    open_tab: OpenTab, stores: Stores
) -> None:
    # Given a phone, a paused download, and the server gone when it is approved
    tab = open_tab()
    tab.page.set_viewport_size(PHONE)
    tab.send(DOWNLOAD)
    expect(tab.button("Approve")).to_be_visible()
    tab.page.route("**/resume", lambda route: route.abort("connectionrefused"))
    tab.button("Approve").click()

    # Then the card itself says so, in view, and can be pressed again
    said = tab.card.locator(":scope > .error")
    expect(said).to_contain_text("could not be reached")
    expect(said).to_be_in_viewport()
    expect(tab.button("Approve")).to_be_enabled()
    assert pointer(stores, tab.chat).state is RequestState.PENDING
    tab.page.set_viewport_size(DESKTOP)
    tab.screenshot("truth-unreachable")

    # And once the server is back, pressing it again approves, and the line goes
    tab.page.unroute("**/resume")
    tab.button("Approve").click()
    expect(tab.outcome()).to_have_text(re.compile(r"^Approved at "))
    expect(tab.page.locator(".card .error:visible")).to_have_count(0)


def impact_of(urls: list[str], packages: list[str]) -> str:
    """The impact sentence of a download card naming `urls` and `packages`."""
    card = download_card(
        reason="The analysis needs these.",
        urls=urls,
        packages=packages,
        refused=[],
        approved_among=lambda _: frozenset(),
        tool_use_id="tooluse_1",
    )
    assert card is not None
    return str(card["impact"])


def test_a_download_card_grants_only_what_it_names(open_tab: OpenTab) -> None:
    # Given the agent asks to download from a site, naming no package
    tab = open_tab()
    tab.send(DOWNLOAD)

    # Then the card says it grants the site, and promises no install
    impact = tab.card.locator("dt:text-is('Expected impact') + dd")
    expect(impact).to_have_text(SITES_ONLY)
    # And a card naming packages alone grants those alone; one naming both, both
    assert impact_of([], ["pandas"]) == PACKAGES_ONLY
    assert impact_of(["https://data.example.org/t.csv"], ["pandas"]) == BOTH


def test_the_card_tells_the_answer_time_the_history_tells(open_tab: OpenTab) -> None:
    # Given a browser whose clock runs minutes ahead of the server's
    tab = open_tab(skew=SKEW)
    tab.send(DOWNLOAD)

    # When the download is approved
    tab.button("Approve").click()
    expect(tab.outcome()).to_have_text(re.compile(r"^Approved at .+\.$"))

    # Then the card's time is the server's record of the answer, the one the history shows
    history = tab.page.locator("#history li .meta").first
    expect(history).to_contain_text("via the card page")
    recorded = str(history.text_content()).split(" · ")[-1]
    expect(tab.outcome()).to_have_text(f"Approved at {recorded}.")
