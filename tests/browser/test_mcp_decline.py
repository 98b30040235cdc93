"""Declining the bank's money card on the page: one press of Decline reaches the MCP
server as `decline`, the bank and the agent say the transfer was declined, and no answer
anywhere on the page reads as a raw object. An unticked box sent as an answer is not
told as the holder having accepted."""

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
RAW_OBJECT: Final = "[object Object]"


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


def retried(bank: Bank, state_ids: set[str]) -> dict[str, Any]:
    """The bank's one retry of the first rounds named by `state_ids`."""
    (found,) = [r for r in bank.rounds(2) if r["state_id"] in state_ids]
    return found


def new_rounds(bank: Bank, before: int) -> set[str]:
    return {r["state_id"] for r in bank.rounds(1)[before:]}


def resume_entries(tab: ChatPage, index: int = 0) -> list[dict[str, Any]]:
    """The resume entries the page sent in its `index`th resume."""
    body = tab.resumes[index].post_data_json
    assert isinstance(body, dict)
    entries: list[dict[str, Any]] = body["resume"]
    return entries


def page_text(tab: ChatPage) -> str:
    return str(tab.page.locator("body").inner_text())


def test_one_press_of_decline_on_the_money_card_declines_the_transfer(
    tab: ChatPage, bank: Bank, stores: Stores
) -> None:
    # Given the bank asked to confirm the transfer and for a reference (one group)
    before = len(bank.rounds(1))
    transfers = len(bank.transfers())
    tab.send("please transfer the money")
    cards = tab.page.locator(".card-group .card")
    expect(cards).to_have_count(2)
    money = cards.nth(0)
    expect(money).to_contain_text("Send 120.00 EUR to Ada Lovelace?")

    # When the person presses Decline on the money card, and nothing else
    money.get_by_role("button", name="Decline", exact=True).click()

    # Then the bank and the agent both say the transfer was declined
    expect(tab.agent_says()).to_contain_text("The transfer was declined and no money moved.")
    expect(tab.agent_says()).not_to_contain_text("chose accept")
    # And one resume carried a decline for each question of the call, with no fields
    assert len(tab.resumes) == 1
    entries = resume_entries(tab)
    assert [(e["status"], e.get("payload")) for e in entries] == [("cancelled", None)] * 2
    # And the server saw MCP's decline, never an accept with a false box, and moved nothing
    actions = {
        k: v["action"] for k, v in retried(bank, new_rounds(bank, before))["answers"].items()
    }
    assert actions == {"confirm": "decline", "reference": "decline"}
    assert len(bank.transfers()) == transfers
    wait_for(lambda: pointer(stores, tab.chat).state is RequestState.DONE, "the run's end")
    # And the card says it was declined; nothing on the page is a raw object
    expect(money.locator(".outcome")).to_have_text("Declined: the tool was told you said no.")
    declined = tab.page.locator("#history li")
    expect(declined).to_have_count(2)
    for row in declined.all():
        expect(row.locator("strong")).to_have_text("Declined")
        expect(row).to_contain_text("by rita via the card page")
    assert RAW_OBJECT not in page_text(tab)
    tab.screenshot("card-mcp-declined")


def test_a_single_money_card_declines_with_one_press(tab: ChatPage, bank: Bank) -> None:
    before = len(bank.rounds(1))
    tab.send("settle the invoice by its reference")
    expect(tab.card).to_contain_text("Send 80.00 EUR to Ada Lovelace?")
    # Decline sits beside Send, in the card's own actions
    actions = tab.card.locator(".actions button")
    expect(actions).to_have_text(["Send answer", "Decline"])
    tab.screenshot("card-mcp-decline-offered")

    tab.button("Decline").click()

    expect(tab.agent_says()).to_contain_text("the account holder chose decline")
    expect(tab.agent_says()).to_contain_text("The transfer was declined and no money moved.")
    (entry,) = resume_entries(tab)
    assert entry["status"] == "cancelled"
    confirm = retried(bank, new_rounds(bank, before))["answers"]["confirm"]
    assert confirm["action"] == "decline" and confirm.get("content") is None
    expect(tab.page.locator("#history li strong")).to_have_text(["Declined"])
    assert RAW_OBJECT not in page_text(tab)


def test_an_unticked_box_sent_is_not_told_as_acceptance_and_reads_as_words(
    tab: ChatPage, bank: Bank
) -> None:
    # Given the single money card, its box left unticked
    tab.send("settle the invoice by its reference")
    expect(tab.card).to_contain_text("Send 80.00 EUR to Ada Lovelace?")

    # When the person sends the form as it is
    tab.button("Send answer").click()

    # Then the bank does not call it acceptance: it was not confirmed, so declined
    said = tab.agent_says()
    expect(said).to_contain_text("the account holder did not confirm it")
    expect(said).to_contain_text("The transfer was declined and no money moved.")
    expect(said).not_to_contain_text("chose accept")
    # And the history shows the answer as words: the field as the form labels it, and no
    # for a false box
    entry = tab.page.locator("#history li").first
    expect(entry).to_contain_text("Answered")
    expect(entry.locator(".answer")).to_have_text("Yes, send 80.00 EUR to Ada Lovelace: no")
    assert RAW_OBJECT not in page_text(tab)
