"""Changing an argument before approving, from chat (Slack and Telegram played by their
local fakes): Slack opens a form holding the agent's values, whose submission approves
the call once with what was changed, or is refused with nothing changed; Telegram,
which has no forms, links to the card page for it. A card with nothing to change (a
download's) keeps its buttons to Approve and Deny."""

from __future__ import annotations

import json
from typing import Any, Final

from interlock.channels import button_data
from interlock.records import RequestState
from tests.api.support import auth, run_body, stream
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import TG_ALICE, link, settled, tap_slack, tap_telegram
from tests.e2e.support import wait_for

REPORT: Final = "please send the weekly report"
ASKED_TO: Final = "team@example.org"
FIXED_TO: Final = "ops@example.org"
CHANGE: Final = "Change and approve…"
PAGE: Final = "https://cards.example.com/"


def pause(setup: Setup, chat: str, prompt: str = REPORT) -> Any:
    """Alice, a reporter, asks the analyst; the run pauses on one card."""
    events = stream(
        setup.client.post("/runs", data=run_body(chat, prompt), headers=auth(setup.key))
    )
    assert events[-1].outcome.type == "interrupt"
    return setup.stores.requests.get(chat, 0)


def slack_buttons(setup: Setup) -> dict[str, str]:
    """The posted Slack card's buttons: label to the data they carry."""
    (post,) = setup.slack.recorded.of("chat.postMessage")
    (actions,) = [b for b in post["blocks"] if b["type"] == "actions"]
    return {e["text"]["text"]: e["value"] for e in actions["elements"]}


def open_change_form(setup: Setup) -> dict[str, Any]:
    """Alice presses "Change and approve…"; the form Slack was asked to open."""
    press = fakes.slack_tap("U-ALICE", slack_buttons(setup)[CHANGE], setup.slack.url, "e1")
    assert tap_slack(setup, press).status_code == 200
    (opened,) = setup.slack.recorded.of("views.open")
    assert opened["trigger_id"] == "trigger-e1"
    view: dict[str, Any] = opened["view"]
    return view


def submit(setup: Setup, view: dict[str, Any], recipient: dict[str, Any]) -> None:
    """Alice submits the form with the recipient field holding `recipient` (the element's
    state as Slack sends it)."""
    submission = {
        "type": "view_submission",
        "user": {"id": "U-ALICE"},
        "view": {
            "private_metadata": view["private_metadata"],
            "state": {"values": {"recipient": {"value": recipient}}},
        },
    }
    assert tap_slack(setup, submission).status_code == 200


def report_sent(setup: Setup, chat: str, request: Any) -> Any:
    return setup.stores.outbox.get(f"{chat}#{request.card['tool_use_id']}")


def decisions(setup: Setup, chat: str) -> list[Any]:
    return [e for e in setup.stores.chats.events(chat) if e.type == "decision"]


def test_slack_changes_the_recipient_in_a_form_and_the_report_goes_there_once(
    channels: Setup,
) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "e1")
    assert list(slack_buttons(channels)) == [
        "Approve",
        "Deny",
        CHANGE,
        "Deny with feedback…",
        "Dismiss",
    ]

    # The form holds the agent's recipient, labelled, and approves what it holds
    view = open_change_form(channels)
    (field,) = [b for b in view["blocks"] if b["type"] == "input"]
    assert (field["block_id"], field["label"]["text"]) == ("recipient", "Recipient")
    assert field["element"]["initial_value"] == ASKED_TO
    assert field["optional"] is False
    assert view["submit"]["text"] == "Approve"
    assert channels.stores.requests.get("e1", 0).state is RequestState.PENDING

    submit(channels, view, {"type": "plain_text_input", "value": FIXED_TO})
    wait_for(lambda: settled(channels, "e1"), "the changed approval to be applied")

    done = channels.stores.requests.get("e1", 0)
    assert (done.decision, done.claim_count) == ("approved", 1)
    assert report_sent(channels, "e1", request)["recipient"] == FIXED_TO
    (decided,) = decisions(channels, "e1")
    assert decided.detail["edits"] == {"recipient": {"from": ASKED_TO, "to": FIXED_TO}}
    assert decided.detail["source"] == "slack"


def test_a_slack_change_the_tools_schema_refuses_is_told_and_changes_nothing(
    channels: Setup,
) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "e2")
    view = open_change_form(channels)

    # The field sent back holding options ticked (a list) where the tool takes text
    ticked = [{"text": {"type": "plain_text", "text": FIXED_TO}, "value": FIXED_TO}]
    submit(channels, view, {"type": "checkboxes", "selected_options": ticked})

    def told() -> list[str]:
        return [t["text"] for t in channels.slack.recorded.of("chat.postEphemeral")]

    wait_for(lambda: bool(told()), "alice to be told")
    (refusal,) = told()
    assert refusal.startswith("That answer does not fit the card: recipient: ")
    assert "is not of type 'string'" in refusal
    after = channels.stores.requests.get("e2", 0)
    assert (after.state, after.claim_count, after.secret_hash) == (
        RequestState.PENDING,
        0,
        request.secret_hash,
    )
    assert report_sent(channels, "e2", request) is None
    assert decisions(channels, "e2") == []
    assert channels.slack.recorded.of("chat.update") == []


def test_a_download_card_offers_no_change_on_slack_and_a_forged_one_approves_nothing(
    channels: Setup,
) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "e3", "please download the table")
    assert request.card["type"] == "download"

    assert list(slack_buttons(channels)) == ["Approve", "Deny", "Deny with feedback…", "Dismiss"]
    # A change-and-approve form for it (signed by Slack, made by no button of its) is
    # refused, and the downloads wait for Approve
    data = button_data("e3", request.interrupt_id, "e")
    forged = {"private_metadata": json.dumps({"data": data, "channel": "C-cards"})}
    submit(channels, forged, {"type": "plain_text_input", "value": "https://x.example/"})
    wait_for(lambda: bool(channels.slack.recorded.of("chat.postEphemeral")), "the refusal")
    (refusal,) = channels.slack.recorded.of("chat.postEphemeral")
    assert refusal["text"] == (
        "That answer does not fit the card: this card has no arguments to change"
    )
    after = channels.stores.requests.get("e3", 0)
    assert (after.state, after.claim_count) == (RequestState.PENDING, 0)
    assert decisions(channels, "e3") == []


def test_telegram_links_the_change_to_the_card_page_and_approve_keeps_the_agents_call(
    channels: Setup,
) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    request = pause(channels, "e4")

    (sent,) = channels.telegram.recorded.of("sendMessage")
    buttons = [b for row in sent["reply_markup"]["inline_keyboard"] for b in row]
    assert {"text": "Change on the card page", "url": f"{PAGE}?chat=e4"} in buttons
    taps = {b["text"]: b["callback_data"] for b in buttons if "callback_data" in b}
    assert list(taps) == ["Approve", "Deny", "Dismiss"]
    # The change is the page's: a press forged to change the call approves nothing
    forged = button_data("e4", request.interrupt_id, "e")
    tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, forged))
    wait_for(lambda: bool(channels.telegram.recorded.of("answerCallbackQuery")), "the refusal")
    (refusal,) = channels.telegram.recorded.of("answerCallbackQuery")
    assert "does not fit the card" in refusal["text"]
    assert channels.stores.requests.get("e4", 0).state is RequestState.PENDING

    tap_telegram(channels, fakes.telegram_tap(2, TG_ALICE, taps["Approve"]))
    wait_for(lambda: settled(channels, "e4"), "the approval to be applied")

    assert report_sent(channels, "e4", request)["recipient"] == ASKED_TO
    (decided,) = decisions(channels, "e4")
    assert "edits" not in decided.detail
