"""Dismiss from chat: a card's Dismiss sets its request aside on its own user's word,
exactly as the card page's Dismiss does (the request is cancelled, nothing it asked
about is done, the run never resumes), and every post of it says so. Anyone else is told
they cannot, and a tap once the request ended is told the truth."""

from __future__ import annotations

from typing import Any

from interlock.channels import button_data
from interlock.records import RequestState
from tests.api.support import auth
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import (
    TG_ALICE,
    TG_BOB,
    TG_STRANGER,
    link,
    pause,
    reports_sent,
    settled,
    tap_slack,
    tap_telegram,
)
from tests.channels.test_truthful_chat import slack_lines
from tests.e2e.support import wait_for

CANCELLED_BY_USER = "cancelled by the user"


def cancelled(setup: Setup, chat: str) -> bool:
    request = setup.stores.requests.get(chat, 0)
    return request is not None and request.state is RequestState.CANCELLED


def told_on_telegram(setup: Setup, count: int) -> str:
    """What the `count`th Telegram tap was told, once it was."""
    wait_for(
        lambda: len(setup.telegram.recorded.of("answerCallbackQuery")) >= count,
        "the tapper to be told",
    )
    return str(setup.telegram.recorded.of("answerCallbackQuery")[count - 1]["text"])


def told_on_slack(setup: Setup, count: int) -> str:
    """What the `count`th Slack tap was told, once it was."""
    wait_for(lambda: len(setup.slack.recorded.of("response_url")) >= count, "the tapper told")
    return str(setup.slack.recorded.of("response_url")[count - 1]["text"])


def telegram_dismiss(sent: dict[str, Any]) -> str:
    """The data of the Dismiss button of a Telegram card, as a person finds it."""
    buttons = [b for row in sent["reply_markup"]["inline_keyboard"] for b in row]
    (dismiss,) = [b for b in buttons if b["text"] == "Dismiss"]
    return str(dismiss["callback_data"])


def slack_buttons(post: dict[str, Any]) -> dict[str, str]:
    """A Slack card's buttons, by the words on them."""
    return {
        e["text"]["text"]: e["value"]
        for b in post["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
    }


def test_a_telegram_dismiss_by_its_owner_cancels_the_card_as_the_page_does(
    channels: Setup,
) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "dismiss-t")

    # Both cards offer Dismiss beside the answers
    (sent,) = channels.telegram.recorded.of("sendMessage")
    dismiss = telegram_dismiss(sent)
    assert dismiss == button_data("dismiss-t", request.interrupt_id, "x")
    (post,) = channels.slack.recorded.of("chat.postMessage")
    assert list(slack_buttons(post))[:2] == ["Approve", "Deny"]
    assert slack_buttons(post)["Dismiss"] == dismiss

    # Alice taps it on her phone
    assert tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, dismiss)).status_code == 200
    wait_for(lambda: cancelled(channels, "dismiss-t"), "the dismiss to be applied")

    # Cancelled on her word, as the page's Dismiss cancels it: nothing it asked was done
    done = channels.stores.requests.get("dismiss-t", 0)
    assert (done.ended_reason, done.claim_count) == (CANCELLED_BY_USER, 0)
    assert reports_sent(channels, "dismiss-t", request) is None
    assert told_on_telegram(channels, 1) == "Dismissed: nothing it asked about was done."
    view = channels.client.get("/chats/dismiss-t/request", headers=auth(channels.key)).json
    assert view["state"] == "cancelled"
    events = channels.client.get("/chats/dismiss-t/events", headers=auth(channels.key)).json
    (event,) = [e for e in events["events"] if e["type"] == "cancelled"]
    assert event["actor"] == "alice"

    # Both posts say it was dismissed, by whom and where, and offer no buttons any more
    wait_for(lambda: channels.telegram.recorded.of("editMessageText"), "the Telegram edit")
    wait_for(lambda: channels.slack.recorded.of("chat.update"), "the Slack edit")
    (edit,) = channels.telegram.recorded.of("editMessageText")
    lines = edit["text"].split("\n")
    assert lines[0] == f"Asked: {request.card['reason']}"
    assert lines[-2] == "Chosen: Dismiss", lines
    assert lines[-1].startswith("Dismissed by alice at ") and lines[-1].endswith("(Telegram)")
    assert edit["reply_markup"] == {"inline_keyboard": []}
    (update,) = channels.slack.recorded.of("chat.update")
    assert slack_lines(update["blocks"])[-2:] == lines[-2:]
    assert [b for b in update["blocks"] if b["type"] == "actions"] == []

    # The run never resumes: an answer tapped afterwards is told the card ended
    approve = button_data("dismiss-t", request.interrupt_id, "a")
    tap_telegram(channels, fakes.telegram_tap(2, TG_ALICE, approve))
    assert "can no longer be answered" in told_on_telegram(channels, 2)
    after = channels.stores.requests.get("dismiss-t", 0)
    assert (after.state, after.claim_count) == (RequestState.CANCELLED, 0)
    assert reports_sent(channels, "dismiss-t", request) is None


def test_only_the_cards_own_user_may_dismiss_it(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "telegram", str(TG_BOB), "bob", ["reporter"])
    request = pause(channels, "dismiss-o")
    dismiss = button_data("dismiss-o", request.interrupt_id, "x")

    # An account nobody linked is refused, as for any tap
    tap_telegram(channels, fakes.telegram_tap(1, TG_STRANGER, dismiss))
    assert "not linked" in told_on_telegram(channels, 1)
    # bob is linked, but the card is alice's: he is told he cannot dismiss it
    tap_telegram(channels, fakes.telegram_tap(2, TG_BOB, dismiss))
    assert told_on_telegram(channels, 2) == "Only the person who asked can dismiss this card."
    still = channels.stores.requests.get("dismiss-o", 0)
    assert (still.state, still.claim_count) == (RequestState.PENDING, 0)
    assert channels.telegram.recorded.of("editMessageText") == []


def test_a_slack_dismiss_and_the_taps_after_it_are_told_the_truth(channels: Setup) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    link(channels, "slack", "U-BOB", "bob", ["reporter"])
    pause(channels, "dismiss-s")
    (post,) = channels.slack.recorded.of("chat.postMessage")
    dismiss = slack_buttons(post)["Dismiss"]

    # bob's press is refused; alice's sets the card aside
    tap_slack(channels, fakes.slack_tap("U-BOB", dismiss, channels.slack.url, "b1"))
    assert told_on_slack(channels, 1) == "Only the person who asked can dismiss this card."
    assert channels.stores.requests.get("dismiss-s", 0).state is RequestState.PENDING
    tap_slack(channels, fakes.slack_tap("U-ALICE", dismiss, channels.slack.url, "a1"))
    wait_for(lambda: cancelled(channels, "dismiss-s"), "the dismiss to be applied")
    assert told_on_slack(channels, 2) == "Dismissed: nothing it asked about was done."
    wait_for(lambda: channels.slack.recorded.of("chat.update"), "the Slack edit")
    (update,) = channels.slack.recorded.of("chat.update")
    outcome = slack_lines(update["blocks"])[-1]
    assert outcome.startswith("Dismissed by alice at ") and outcome.endswith("(Slack)")

    # Pressed again (another copy of the card, say): told it was already dismissed
    tap_slack(channels, fakes.slack_tap("U-ALICE", dismiss, channels.slack.url, "a2"))
    assert told_on_slack(channels, 3) == "Already dismissed: nothing it asked about was done."
    assert len(channels.slack.recorded.of("chat.update")) == 1


def test_a_dismiss_after_the_card_was_answered_is_told_the_answer(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    request = pause(channels, "dismiss-late")
    approve = button_data("dismiss-late", request.interrupt_id, "a")
    tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, approve))
    wait_for(lambda: settled(channels, "dismiss-late"), "the approval to be applied")
    told_on_telegram(channels, 1)

    (sent,) = channels.telegram.recorded.of("sendMessage")
    dismiss = telegram_dismiss(sent)
    tap_telegram(channels, fakes.telegram_tap(2, TG_ALICE, dismiss))
    assert told_on_telegram(channels, 2).startswith("Already answered: Approved")
    done = channels.stores.requests.get("dismiss-late", 0)
    assert (done.state, done.decision, done.claim_count) == (RequestState.DONE, "approved", 1)
    assert reports_sent(channels, "dismiss-late", request) is not None
