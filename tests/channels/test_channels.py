"""Slack and Telegram against local fakes: a pause posts the card, a tap answers it
exactly once and the message is edited, and every refusal changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from interlock.channels import button_data
from interlock.records import RequestState
from tests.api.support import auth, run_body, stream
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.e2e.support import wait_for

ADMIN = ("admin",)
TG_ALICE, TG_BOB, TG_STRANGER = 1001, 1002, 1999


def link(setup: Setup, channel: str, external: str, user: str, roles: list[str]) -> None:
    response = setup.client.put(
        f"/admin/links/{channel}/{external}",
        headers=auth(setup.key, "root", ADMIN),
        data=json.dumps({"userId": user, "roles": roles}),
    )
    assert response.status_code == 200, response.get_data(as_text=True)


def pause(setup: Setup, chat: str) -> Any:
    """Alice asks to send the report: the run pauses on its approval card."""
    events = stream(
        setup.client.post("/runs", data=run_body(chat, "send the report"), headers=auth(setup.key))
    )
    assert events[-1].outcome.type == "interrupt"
    return setup.stores.requests.get(chat, 0)


def tap_telegram(
    setup: Setup, update: dict[str, Any], secret: str = fakes.TELEGRAM_WEBHOOK_SECRET
) -> Any:
    return setup.client.post(
        "/channels/telegram/webhook",
        data=json.dumps(update),
        headers=fakes.telegram_headers(secret),
    )


def tap_slack(setup: Setup, payload: dict[str, Any], **signing: Any) -> Any:
    body, headers = fakes.slack_delivery(payload, **signing)
    return setup.client.post("/channels/slack/interactions", data=body, headers=headers)


def settled(setup: Setup, chat: str) -> bool:
    request = setup.stores.requests.get(chat, 0)
    return request is not None and request.state is RequestState.DONE


def reports_sent(setup: Setup, chat: str, request: Any) -> Any:
    return setup.stores.outbox.get(f"{chat}#{request.card['tool_use_id']}")


def test_a_pause_posts_the_card_and_a_tap_answers_it_once_and_edits_it(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "c1")

    # The card went to both of alice's accounts, with buttons that carry the chat
    (posted,) = channels.telegram.recorded.of("sendMessage")
    assert posted["chat_id"] == str(TG_ALICE)
    buttons = [b for row in posted["reply_markup"]["inline_keyboard"] for b in row]
    approve = next(b["callback_data"] for b in buttons if b["text"] == "Approve")
    assert approve == button_data("c1", request.interrupt_id, "a")
    assert len(approve.encode()) <= 64
    (slack_post,) = channels.slack.recorded.of("chat.postMessage")
    assert slack_post["channel"] == "U-ALICE"
    # Each offers the card page opened on this chat, not a new one
    page = "https://cards.example.com/?chat=c1"
    assert {"text": "Open the card page", "url": page} in [
        b for row in posted["reply_markup"]["inline_keyboard"] for b in row
    ]
    assert any(page in json.dumps(block) for block in slack_post["blocks"])
    # And says what would be approved under Interlock's own header: the tool, its
    # arguments, the risk, who asked
    text = posted["text"]
    assert text.split("\n")[0] == "Approval needed: Send report"
    assert slack_post["text"] == "Approval needed: Send report"
    for line in ("Tool: Send report", "Recipient: team@example.org", "Risk: high"):
        assert line in text, text
    assert "Asked by alice · answer by " in text
    slack_text = json.dumps(slack_post["blocks"])
    assert "Recipient: team@example.org" in slack_text and "Asked by alice" in slack_text

    # Alice taps Approve on her phone
    reply = tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, approve))
    assert reply.status_code == 200
    wait_for(lambda: settled(channels, "c1"), "the tap to be applied")

    done = channels.stores.requests.get("c1", 0)
    assert (done.decision, done.claim_count) == ("approved", 1)
    assert reports_sent(channels, "c1", request)["recipient"]
    # Both posts now say how it ended, and the buttons are gone
    wait_for(lambda: len(channels.slack.recorded.of("chat.update")) == 1, "the Slack edit")
    wait_for(lambda: channels.telegram.recorded.of("editMessageText") != [], "the Telegram edit")
    (edit,) = channels.telegram.recorded.of("editMessageText")
    question, *facts, outcome = edit["text"].split("\n")
    # The question stays in the chat, labelled as what was asked, with what it showed
    assert question == f"Asked: {request.card['reason']}", "the question stays in the chat"
    assert facts[:2] == ["Tool: Send report", "Recipient: team@example.org"], facts
    assert outcome.startswith("Approved by alice at ") and outcome.endswith("(Telegram)")
    assert edit["reply_markup"] == {"inline_keyboard": []}
    slack_edit = channels.slack.recorded.of("chat.update")[0]
    assert slack_edit["text"].split("\n")[-1] == outcome
    assert json.dumps(slack_edit["blocks"]).count("Asked: ") == 1
    # The trail says where the answer came from
    events = channels.client.get("/chats/c1/events", headers=auth(channels.key)).json["events"]
    decision = next(e for e in events if e["type"] == "decision")
    assert decision["detail"]["source"] == "telegram"


def test_a_wrong_secret_or_signature_is_refused_and_changes_nothing(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "c1")
    data = button_data("c1", request.interrupt_id, "a")

    forged = tap_telegram(channels, fakes.telegram_tap(7, TG_ALICE, data), secret="guess")
    assert (forged.status_code, forged.json["error"]["code"]) == (401, "unauthorized")
    unsigned = tap_slack(
        channels, fakes.slack_tap("U-ALICE", data, channels.slack.url), secret="guess"
    )
    assert unsigned.status_code == 401
    # A correctly signed delivery, but six minutes old: a captured request played again
    stale = tap_slack(channels, fakes.slack_tap("U-ALICE", data, channels.slack.url), at=0)
    assert stale.status_code == 401

    after = channels.stores.requests.get("c1", 0)
    assert (after.state, after.claim_count, after.secret_hash) == (
        RequestState.PENDING,
        0,
        request.secret_hash,
    )
    # Not even recorded as seen: the real delivery still goes through
    assert channels.stores.channels.first_delivery("telegram", "7", 0)


def test_the_same_delivery_twice_is_dropped(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    request = pause(channels, "c1")
    update = fakes.telegram_tap(5, TG_ALICE, button_data("c1", request.interrupt_id, "a"))

    assert tap_telegram(channels, update).status_code == 200
    wait_for(lambda: settled(channels, "c1"), "the tap to be applied")

    # The thanks is sent after the answer is stored: wait for it before the replay
    def told() -> int:
        return len(channels.telegram.recorded.of("answerCallbackQuery"))

    wait_for(lambda: told() == 1, "the tapper to be thanked")
    assert tap_telegram(channels, update).status_code == 200

    # The replay was dropped before anything: nobody was told anything again
    assert told() == 1
    assert channels.stores.requests.get("c1", 0).claim_count == 1


def test_an_unlinked_tap_is_refused_and_a_strangers_late_tap_learns_nothing(
    channels: Setup,
) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "telegram", str(TG_BOB), "bob", ["reporter"])
    request = pause(channels, "c1")
    approve = button_data("c1", request.interrupt_id, "a")

    # Before the answer: an account nobody linked is refused, and nothing changes
    tap_telegram(channels, fakes.telegram_tap(10, TG_STRANGER, approve))
    (refusal,) = channels.telegram.recorded.of("answerCallbackQuery")
    assert "not linked" in refusal["text"]
    # bob is linked, but the card is alice's
    tap_telegram(channels, fakes.telegram_tap(11, TG_BOB, approve))
    assert "not yours" in channels.telegram.recorded.of("answerCallbackQuery")[-1]["text"]
    assert channels.stores.requests.get("c1", 0).state is RequestState.PENDING

    tap_telegram(channels, fakes.telegram_tap(12, TG_ALICE, approve))
    wait_for(lambda: settled(channels, "c1"), "alice's tap to be applied")

    # Her tap is answered by the worker that applied it, once it has: wait for that
    # answer, or it could come after the stranger's below
    def answers() -> list[dict[str, Any]]:
        return list(channels.telegram.recorded.of("answerCallbackQuery"))

    wait_for(lambda: len(answers()) == 3, "alice to be thanked")
    assert answers()[-1]["text"].startswith("Thanks: Approved")

    # After it: a stranger's tap is refused as before, told nothing of the answer
    tap_telegram(
        channels, fakes.telegram_tap(13, TG_STRANGER, button_data("c1", request.interrupt_id, "r"))
    )
    late = answers()[-1]["text"]
    assert "not linked" in late and "Approved" not in late
    # bob too: the card was never his, so how it was answered is not his to know
    tap_telegram(
        channels, fakes.telegram_tap(14, TG_BOB, button_data("c1", request.interrupt_id, "r"))
    )
    assert "not yours" in answers()[-1]["text"] and "Approved" not in answers()[-1]["text"]
    assert channels.stores.requests.get("c1", 0).claim_count == 1


def test_a_slack_tap_racing_a_page_click_gives_one_answer(channels: Setup) -> None:
    import threading

    from tests.api.support import resume_body

    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    events = stream(
        channels.client.post(
            "/runs", data=run_body("c1", "send the report"), headers=auth(channels.key)
        )
    )
    interrupt = events[-1].outcome.interrupts[0]
    request = channels.stores.requests.get("c1", 0)
    data = button_data("c1", request.interrupt_id, "r")
    page: dict[str, Any] = {}

    def click() -> None:
        page["reply"] = channels.client.post(
            "/resume",
            headers=auth(channels.key),
            data=resume_body("c1", interrupt, {"decision": "approve"}),
        )

    clicking = threading.Thread(target=click)
    clicking.start()
    tap_slack(channels, fakes.slack_tap("U-ALICE", data, channels.slack.url))
    clicking.join()
    wait_for(lambda: settled(channels, "c1"), "one answer to win")
    wait_for(lambda: channels.slack.recorded.of("response_url"), "the tapper to be told")

    done = channels.stores.requests.get("c1", 0)
    assert done.claim_count == 1
    told = channels.slack.recorded.of("response_url")[-1]["text"]
    if done.decision == "approved":  # the page won: the tap was told so
        assert told.startswith("Already answered: Approved") or "right now" in told
    else:  # the tap won: the page was refused or shown the stored answer
        assert done.decision == "rejected" and told.startswith("Thanks: Denied")
        reply = page["reply"]
        assert reply.status_code in (200, 403, 409)
    # Exactly one report decision was applied: sent once, or never
    sent = reports_sent(channels, "c1", request)
    assert (sent is not None) == (done.decision == "approved")


def test_deny_with_feedback_opens_a_form_on_slack_and_its_submission_answers(
    channels: Setup,
) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "c1")
    feedback = button_data("c1", request.interrupt_id, "f")

    # The "Deny with feedback…" button opens a form at once (Slack allows 3 s)
    tap_slack(channels, fakes.slack_tap("U-ALICE", feedback, channels.slack.url, "f1"))
    (opened,) = channels.slack.recorded.of("views.open")
    assert opened["trigger_id"] == "trigger-f1"
    view = opened["view"]
    assert [b["block_id"] for b in view["blocks"]] == ["reason", "suggestion"]
    assert channels.stores.requests.get("c1", 0).state is RequestState.PENDING

    # Its submission answers the card: denied, with the reason the person typed
    submission = {
        "type": "view_submission",
        "user": {"id": "U-ALICE"},
        "view": {
            "private_metadata": view["private_metadata"],
            "state": {
                "values": {
                    "reason": {"reason": {"type": "plain_text_input", "value": "Not this week"}},
                    "suggestion": {"suggestion": {"type": "plain_text_input", "value": None}},
                }
            },
        },
    }
    assert tap_slack(channels, submission).status_code == 200
    wait_for(lambda: settled(channels, "c1"), "the form's answer to be applied")
    done = channels.stores.requests.get("c1", 0)
    assert done.decision == "rejected"  # a reason alone; a suggestion adds "with feedback"
    assert reports_sent(channels, "c1", request) is None
    events = channels.client.get("/chats/c1/events", headers=auth(channels.key)).json["events"]
    decision = next(e for e in events if e["type"] == "decision")
    assert decision["detail"]["reason"] == "Not this week"
    assert decision["detail"]["source"] == "slack"


def test_a_cancel_on_the_page_edits_the_posted_card(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    pause(channels, "c1")

    assert (
        channels.client.delete("/chats/c1/request", headers=auth(channels.key)).status_code == 200
    )

    (edit,) = channels.telegram.recorded.of("editMessageText")
    assert edit["text"].split("\n")[-1].startswith("Cancelled by alice at ")
    assert edit["reply_markup"] == {"inline_keyboard": []}


def test_an_expiry_edits_the_posted_card_to_say_why(channels: Setup) -> None:
    from interlock.admission import expire_and_release
    from interlock.api import wiring

    # Given a posted card
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    request = pause(channels, "c1")

    # When a check expires it (the user's roles changed, say)
    expire_and_release(wiring.runtime(), request, "your roles changed", 0)

    # Then the post is edited to say it ended, and offers no buttons any more
    (edit,) = channels.telegram.recorded.of("editMessageText")
    outcome = edit["text"].split("\n")[-1]
    assert outcome.startswith("Expired") and "your roles changed" in outcome
    assert edit["reply_markup"] == {"inline_keyboard": []}


def test_slack_replies_go_only_to_slacks_reply_host_and_never_carry_the_token(
    channels: Setup,
) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "c1")
    data = button_data("c1", request.interrupt_id, "a")
    # Signed taps whose reply URL is plain HTTP on Slack's host, or another host
    for n, url in enumerate(("http://hooks.slack.com/actions/T/1", "https://evil.example/r")):
        payload = fakes.slack_tap("U-STRANGER", data, channels.slack.url, f"x{n}")
        payload["response_url"] = url
        assert tap_slack(channels, payload).status_code == 200
    # Neither was posted to (the fake would have seen nothing either way: it is the one
    # host allowed besides Slack's); an unlinked tapper is told in an ephemeral message
    assert channels.slack.recorded.of("response_url") == []
    told = channels.slack.recorded.of("chat.postEphemeral")
    assert len(told) == 2 and all("not linked" in t["text"] for t in told)
    # A reply to an allowed URL goes without the bot token
    ok = fakes.slack_tap("U-STRANGER", data, channels.slack.url, "ok")
    tap_slack(channels, ok)
    (reply,) = channels.slack.recorded.of("response_url")
    assert reply["token_sent"] is False


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "block_actions", "user": "U-ALICE"},
        {"type": "block_actions", "user": {"id": "U-ALICE"}, "actions": "approve"},
        {"type": "block_actions", "user": {"id": "U-ALICE"}, "actions": [5]},
        {"type": "block_actions", "user": {"id": "U-ALICE"}, "container": []},
        {"type": "view_submission", "user": {"id": "U-ALICE"}, "view": [1]},
        {
            "type": "view_submission",
            "user": {"id": "U-ALICE"},
            "view": {"private_metadata": json.dumps({"data": "i1|f|abcdefgh|c1"}), "state": "x"},
        },
        {"type": "view_submission", "user": {"id": "U-ALICE"}, "view": {"private_metadata": 5}},
        {"type": "block_actions", "user": {"id": 7}},
    ],
)
def test_a_signed_but_malformed_slack_payload_is_a_4xx_and_changes_nothing(
    channels: Setup, payload: dict[str, Any]
) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "c1")
    reply = tap_slack(channels, payload)
    assert 400 <= reply.status_code < 500, reply.get_data(as_text=True)
    still = channels.stores.requests.get("c1", 0)
    assert (still.state, still.claim_count) == (request.state, 0)


def test_deep_and_oversized_slack_bodies_are_refused_before_they_are_parsed(
    channels: Setup,
) -> None:
    deep = {
        "type": "block_actions",
        "user": {"id": "U-ALICE"},
        "x": json.loads("[" * 900 + "]" * 900),
    }
    body, headers = fakes.slack_delivery(deep)
    body = body.replace("%5B" * 900, "%5B" * 5000).replace("%5D" * 900, "%5D" * 5000)
    headers = fakes.slack_headers(body)
    deep_reply = channels.client.post("/channels/slack/interactions", data=body, headers=headers)
    assert deep_reply.status_code == 422, deep_reply.get_data(as_text=True)
    huge = "payload=" + "a" * 300_000
    huge_reply = channels.client.post(
        "/channels/slack/interactions", data=huge, headers=fakes.slack_headers(huge)
    )
    assert huge_reply.status_code == 413, huge_reply.get_data(as_text=True)


def test_event_logging_switched_on_still_logs_no_secret(
    channels: Setup, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from local.server import LocalApi
    from tests.api.conftest import BufferedClient

    # An operator switches Powertools' event logging on for every function
    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "DEBUG")
    channels.client = BufferedClient(LocalApi(channels.key))
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    request = pause(channels, "c1")
    data = button_data("c1", request.interrupt_id, "r")
    tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, data))
    token = auth(channels.key)["Authorization"].removeprefix("Bearer ")
    channels.client.get("/chats/c1/request", headers=auth(channels.key))

    printed = capfd.readouterr()
    said = printed.out + printed.err
    assert fakes.TELEGRAM_WEBHOOK_SECRET not in said
    assert token not in said
