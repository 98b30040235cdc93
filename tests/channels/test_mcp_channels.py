"""An MCP server's questions answered from Slack: the bank's two questions are one
card group, answered in one Slack form, and the answer retries the call once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.channels import ANSWER_ALL, FORM, button_data
from tests.api.support import auth, run_body, stream
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import link, pause, settled, tap_slack
from tests.channels.test_groups import chosen, serving, submission, typed
from tests.e2e.support import wait_for
from tests.e2e.test_mcp_input import Bank, running_bank


@pytest.fixture
def bank(
    channels: Setup, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[Setup, Bank]]:
    with running_bank(tmp_path) as running:
        monkeypatch.setenv("BANK_MCP_URL", running.url)
        yield serving(channels, monkeypatch, "examples.mcp:build"), running


def test_the_banks_questions_are_answered_in_one_slack_form_and_retried_once(
    bank: tuple[Setup, Bank],
) -> None:
    setup, ledger = bank
    link(setup, "slack", "U-ALICE", "alice", [])
    request = pause(setup, "pay-1")
    assert [a.card["input_key"] for a in request.asked] == ["confirm", "reference"]

    # The message carries the bank's own words and one button for the group
    (post,) = setup.slack.recorded.of("chat.postMessage")
    sections = " ".join(b["text"]["text"] for b in post["blocks"] if b["type"] == "section")
    assert "Send 120.00 EUR to Ada Lovelace?" in sections
    (actions,) = [b for b in post["blocks"] if b["type"] == "actions"]
    answer_each = actions["elements"][0]["value"]
    assert answer_each == button_data("pay-1", request.asked[0].interrupt_id, ANSWER_ALL)

    # The form has a field per question, drawn from the bank's schemas
    tap_slack(setup, fakes.slack_tap("U-ALICE", answer_each, setup.slack.url, "p1"))
    (opened,) = setup.slack.recorded.of("views.open")
    view = opened["view"]
    inputs = [b["block_id"] for b in view["blocks"] if b["type"] == "input"]
    assert inputs == ["0.ok", "1.reference"]

    accepted = tap_slack(
        setup,
        submission(
            view, {"0.ok": chosen("yes"), "1.reference": typed("plain_text_input", "INV-9")}
        ),
    )
    assert (accepted.status_code, accepted.json) == (200, {})
    wait_for(lambda: settled(setup, "pay-1"), "the form's answers to be applied")

    # The bank was retried once, with the state of its one first round, and moved money once
    (asked,), (retried,) = ledger.rounds(1), ledger.rounds(2)
    assert retried["state_id"] == asked["state_id"]
    assert retried["answers"]["confirm"] == {
        "action": "accept",
        "content": {"ok": True},
        "meta": None,
    }
    assert ledger.transfers() == [{"amount": 120.0, "payee": "Ada Lovelace", "reference": "INV-9"}]
    done = setup.stores.requests.get("pay-1", 0)
    assert done.claim_count == 1 and "Sent 120.00 EUR" in (done.final_text or "")


def test_a_single_question_draws_its_yes_or_no_as_a_select_and_is_retried_once(
    bank: tuple[Setup, Bank],
) -> None:
    setup, ledger = bank
    link(setup, "slack", "U-ALICE", "alice", [])
    prompt = "settle the invoice by its reference"
    events = stream(
        setup.client.post("/runs", data=run_body("pay-2", prompt), headers=auth(setup.key))
    )
    assert events[-1].outcome.type == "interrupt"
    (asked,) = setup.stores.requests.get("pay-2", 0).asked
    assert asked.card["input_key"] == "confirm"

    tap_slack(
        setup,
        fakes.slack_tap(
            "U-ALICE", button_data("pay-2", asked.interrupt_id, FORM), setup.slack.url, "p2"
        ),
    )
    (opened,) = setup.slack.recorded.of("views.open")
    (field,) = [b for b in opened["view"]["blocks"] if b["type"] == "input"]
    assert (field["block_id"], field["element"]["type"]) == ("ok", "static_select")
    assert [o["value"] for o in field["element"]["options"]] == ["yes", "no"]

    accepted = tap_slack(setup, submission(opened["view"], {"ok": chosen("yes")}))
    assert (accepted.status_code, accepted.json) == (200, {})
    wait_for(lambda: settled(setup, "pay-2"), "the form's answer to be applied")
    assert len(ledger.rounds(2)) == 1
    assert ledger.transfers() == [{"amount": 80.0, "payee": "Ada Lovelace", "reference": "INV-1"}]
