"""An MCP server's two questions on the card page: one group, each card drawn from the
server's own schema, sent together once; the server then sees exactly one retry."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, Final

import pytest
from playwright.sync_api import BrowserContext, expect

from interlock.adapters.factory import Stores
from interlock.records import RequestState
from tests.browser.pages import ChatPage
from tests.browser.test_card_page import pointer
from tests.e2e.support import wait_for
from tests.e2e.test_mcp_input import Bank, running_bank

pytestmark = pytest.mark.server

SERVER_AGENT: Final = "examples.mcp:build"
# Filled by the `bank` fixture before the server starts: where the agent's bank is.
SERVER_ENV: dict[str, str] = {}


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bank]:
    with running_bank(tmp_path_factory.mktemp("bank")) as running:
        SERVER_ENV["BANK_MCP_URL"] = running.url
        yield running


@pytest.fixture
def tab(context: BrowserContext, bank: Bank, server: str) -> Iterator[ChatPage]:
    opened = ChatPage.open(context, server, f"chat-{uuid.uuid4().hex[:12]}", "rita")
    yield opened
    assert opened.errors == []


def test_the_banks_questions_are_answered_on_the_page_and_retried_once(
    tab: ChatPage, bank: Bank, stores: Stores
) -> None:
    # Given the bank asked two things before moving money
    tab.send("please transfer the money")
    group = tab.page.locator(".card-group")
    cards = group.locator(".card")
    expect(cards).to_have_count(2)
    confirm, reference = cards.nth(0), cards.nth(1)
    expect(confirm).to_contain_text("Send 120.00 EUR to Ada Lovelace?")
    expect(reference).to_contain_text("Which payment reference should the transfer carry?")

    # When the person ticks the confirmation and types the reference, card by card
    confirm.get_by_label("Yes, send 120.00 EUR to Ada Lovelace").check()
    confirm.get_by_role("button", name="Send answer").click()
    assert tab.resumes == []
    reference.get_by_label("Reference").fill("PAGE-1")
    reference.get_by_role("button", name="Send answer").click()

    # Then both answers went in one resume, and the bank says it sent the money
    expect(tab.agent_says()).to_contain_text("Sent 120.00 EUR to Ada Lovelace (reference PAGE-1).")
    assert len(tab.resumes) == 1
    entries: list[dict[str, Any]] = tab.resumes[0].post_data_json["resume"]
    assert [e["payload"] for e in entries] == [{"ok": True}, {"reference": "PAGE-1"}]
    wait_for(lambda: pointer(stores, tab.chat).state is RequestState.DONE, "the run's end")
    assert pointer(stores, tab.chat).claim_count == 1
    # And the bank saw one retry, carrying the state of the first round it answered
    (retried,) = [
        r for r in bank.rounds(2) if r["answers"]["reference"]["content"] == {"reference": "PAGE-1"}
    ]
    assert retried["state_id"] in {r["state_id"] for r in bank.rounds(1)}
    tab.screenshot("card-mcp-questions")
