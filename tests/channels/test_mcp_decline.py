"""Declining the bank's questions from Slack and Telegram: each MCP card (or the group of
them) has a Decline of its own, one press reaches the server as MCP's `decline`, the
bank says the transfer was declined, and nothing moves. A Decline forged onto a card
that is not the server's is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlock.channels import DECLINE, DECLINE_ALL, button_data
from tests.api.support import auth, run_body, stream
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import (
    TG_ALICE,
    link,
    pause,
    settled,
    tap_slack,
    tap_telegram,
)
from tests.channels.test_groups import serving
from tests.channels.test_truthful_chat import slack_lines
from tests.e2e.support import wait_for
from tests.e2e.test_mcp_input import Bank, running_bank

DECLINED = "The transfer was declined and no money moved."


@pytest.fixture
def bank(
    channels: Setup, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[Setup, Bank]]:
    with running_bank(tmp_path) as running:
        monkeypatch.setenv("BANK_MCP_URL", running.url)
        yield serving(channels, monkeypatch, "examples.mcp:build"), running


def ask(setup: Setup, chat: str, prompt: str) -> Any:
    """The agent asks the bank, which asks the account holder: the run pauses."""
    events = stream(
        setup.client.post("/runs", data=run_body(chat, prompt), headers=auth(setup.key))
    )
    assert events[-1].outcome.type == "interrupt"
    return setup.stores.requests.get(chat, 0)


def slack_buttons(setup: Setup) -> list[tuple[str, str]]:
    (post,) = setup.slack.recorded.of("chat.postMessage")
    (actions,) = [b for b in post["blocks"] if b["type"] == "actions"]
    return [(e["text"]["text"], e["value"]) for e in actions["elements"]]


def telegram_buttons(setup: Setup) -> list[tuple[str, str]]:
    (sent,) = setup.telegram.recorded.of("sendMessage")
    rows = sent["reply_markup"]["inline_keyboard"]
    return [(b["text"], b["callback_data"]) for row in rows for b in row if "callback_data" in b]


def declined_once(setup: Setup, bank: Bank, chat: str, keys: set[str]) -> None:
    """The bank was retried once, with MCP's decline for each of `keys` and no content;
    it moved nothing, and the agent's reply says the transfer was declined."""
    wait_for(lambda: settled(setup, chat), "the decline to be applied")
    (retried,) = bank.rounds(2)
    assert {k: v["action"] for k, v in retried["answers"].items()} == dict.fromkeys(keys, "decline")
    assert all(v.get("content") is None for v in retried["answers"].values())
    assert bank.transfers() == []
    done = setup.stores.requests.get(chat, 0)
    assert done.claim_count == 1
    assert DECLINED in (done.final_text or "") and "chose accept" not in (done.final_text or "")


def test_a_slack_decline_on_the_money_card_declines_the_transfer(
    bank: tuple[Setup, Bank],
) -> None:
    setup, ledger = bank
    link(setup, "slack", "U-ALICE", "alice", [])
    (asked,) = ask(setup, "pay-1", "settle the invoice by its reference").asked

    # The card offers Decline beside the form, as its own button
    buttons = slack_buttons(setup)
    assert [label for label, _ in buttons] == ["Fill in…", "Decline"]
    assert buttons[1][1] == button_data("pay-1", asked.interrupt_id, DECLINE)

    # One press declines: no form opens, and the bank hears decline
    pressed = tap_slack(setup, fakes.slack_tap("U-ALICE", buttons[1][1], setup.slack.url, "d1"))
    assert pressed.status_code == 200
    declined_once(setup, ledger, "pay-1", {"confirm"})
    assert setup.slack.recorded.of("views.open") == []
    # The settled card says what was chosen: the decline, not a form sent empty
    wait_for(lambda: setup.slack.recorded.of("chat.update"), "the Slack edit")
    (update,) = setup.slack.recorded.of("chat.update")
    assert slack_lines(update["blocks"])[-2] == "Chosen: Decline"


def test_a_slack_decline_all_declines_every_question_of_the_group(
    bank: tuple[Setup, Bank],
) -> None:
    setup, ledger = bank
    link(setup, "slack", "U-ALICE", "alice", [])
    request = ask(setup, "pay-2", "please transfer the money")
    assert [a.card["input_key"] for a in request.asked] == ["confirm", "reference"]

    buttons = slack_buttons(setup)
    assert [label for label, _ in buttons] == ["Answer each…", "Decline all"]
    assert buttons[1][1] == button_data("pay-2", request.asked[0].interrupt_id, DECLINE_ALL)

    tap_slack(setup, fakes.slack_tap("U-ALICE", buttons[1][1], setup.slack.url, "d2"))
    declined_once(setup, ledger, "pay-2", {"confirm", "reference"})


def test_a_telegram_decline_answers_with_one_tap(bank: tuple[Setup, Bank]) -> None:
    setup, ledger = bank
    link(setup, "telegram", str(TG_ALICE), "alice", [])
    (asked,) = ask(setup, "pay-3", "settle the invoice by its reference").asked

    # Typed answers need the page; the decline does not
    (decline,) = telegram_buttons(setup)
    assert decline == ("Decline", button_data("pay-3", asked.interrupt_id, DECLINE))

    tap_telegram(setup, fakes.telegram_tap(7, TG_ALICE, decline[1]))
    declined_once(setup, ledger, "pay-3", {"confirm"})
    wait_for(
        lambda: bool(setup.telegram.recorded.of("answerCallbackQuery")), "the tapper to be told"
    )


def test_a_telegram_decline_all_settles_the_group(bank: tuple[Setup, Bank]) -> None:
    setup, ledger = bank
    link(setup, "telegram", str(TG_ALICE), "alice", [])
    request = ask(setup, "pay-4", "please transfer the money")

    (decline_all,) = telegram_buttons(setup)
    assert decline_all == (
        "Decline all",
        button_data("pay-4", request.asked[0].interrupt_id, DECLINE_ALL),
    )
    tap_telegram(setup, fakes.telegram_tap(8, TG_ALICE, decline_all[1]))
    declined_once(setup, ledger, "pay-4", {"confirm", "reference"})


def test_a_decline_forged_onto_an_approval_is_refused_and_changes_nothing(
    channels: Setup,
) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "report-1")
    # The approval card keeps its own buttons: Deny is its decline
    assert [label for label, _ in slack_buttons(channels)] == [
        "Approve",
        "Deny",
        "Change and approve…",
        "Deny with feedback…",
        "Dismiss",
    ]

    forged = button_data("report-1", request.asked[0].interrupt_id, DECLINE)
    tap_slack(channels, fakes.slack_tap("U-ALICE", forged, channels.slack.url, "f1"))

    wait_for(lambda: bool(channels.slack.recorded.of("response_url")), "the tapper to be told")
    (told,) = channels.slack.recorded.of("response_url")
    assert "does not fit the card" in json.dumps(told)
    after = channels.stores.requests.get("report-1", 0)
    assert (after.state, after.claim_count) == (request.state, request.claim_count)
