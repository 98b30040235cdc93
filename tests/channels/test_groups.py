"""Pauses that ask several things at once, answered from chat: one Slack form with a
field per card (drawn from each card's rules) or one tap for a group of approvals gives
one resume with every answer; a broken rule is shown in the form and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from interlock.channels import ANSWER_ALL, APPROVE, APPROVE_ALL, DISMISS, button_data
from interlock.records import RequestState
from local.server import LocalApi
from tests.api.conftest import BufferedClient
from tests.api.support import auth
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import TG_ALICE, link, pause, settled, tap_slack, tap_telegram
from tests.e2e.support import wait_for


def serving(setup: Setup, monkeypatch: pytest.MonkeyPatch, agent: str) -> Setup:
    """The channel tier's API, serving another user's agent."""
    monkeypatch.setenv("INTERLOCK_AGENT", agent)
    setup.client = BufferedClient(LocalApi(setup.key))
    return setup


@pytest.fixture
def survey(channels: Setup, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    yield serving(channels, monkeypatch, "tests.channels.survey_agent:build")


@pytest.fixture
def twins(channels: Setup, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    yield serving(channels, monkeypatch, "tests.api.twin_agent:build")


def submission(view: dict[str, Any], values: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A `view_submission` of `view` with each block's element state."""
    return {
        "type": "view_submission",
        "user": {"id": "U-ALICE"},
        "view": {
            "private_metadata": view["private_metadata"],
            "state": {"values": {block: {"value": state} for block, state in values.items()}},
        },
    }


def chosen(value: str) -> dict[str, Any]:
    return {"type": "static_select", "selected_option": {"value": value}}


def ticked(*values: str) -> dict[str, Any]:
    return {"type": "checkboxes", "selected_options": [{"value": v} for v in values]}


def typed(kind: str, value: str | None) -> dict[str, Any]:
    return {"type": kind, "value": value}


def test_one_slack_form_answers_four_cards_in_one_resume(survey: Setup) -> None:
    link(survey, "slack", "U-ALICE", "alice", [])
    link(survey, "telegram", str(TG_ALICE), "alice", [])
    request = pause(survey, "round-1")
    assert len(request.asked) == 4

    # The message numbers each card and answers them together: one form, no per-card
    # buttons (an answer to one card alone could not resume the run)
    (post,) = survey.slack.recorded.of("chat.postMessage")
    sections = [b["text"]["text"] for b in post["blocks"] if b["type"] == "section"]
    assert [s.split(":", 1)[0] for s in sections[:4]] == [
        "*1 of 4",
        "*2 of 4",
        "*3 of 4",
        "*4 of 4",
    ]
    assert "Which streets should the round cover?" in sections[1]
    (actions,) = [b for b in post["blocks"] if b["type"] == "actions"]
    # (and dismissed together: Dismiss sets the whole request aside)
    assert [e["text"]["text"] for e in actions["elements"]] == ["Answer each…", "Dismiss"]
    answer_each = actions["elements"][0]["value"]
    assert answer_each == button_data("round-1", request.asked[0].interrupt_id, ANSWER_ALL)
    # Telegram says where they are answered, and links the card page on this chat
    (sent,) = survey.telegram.recorded.of("sendMessage")
    assert "(4 questions, answered together: on the card page.)" in sent["text"]
    dismiss = button_data("round-1", request.asked[0].interrupt_id, DISMISS)
    assert sent["reply_markup"]["inline_keyboard"] == [
        [{"text": "Dismiss", "callback_data": dismiss}],
        [{"text": "Open the card page", "url": "https://cards.example.com/?chat=round-1"}],
    ]

    # "Answer each…" opens one form with a field per card, from each card's rules
    tap_slack(survey, fakes.slack_tap("U-ALICE", answer_each, survey.slack.url, "g1"))
    (opened,) = survey.slack.recorded.of("views.open")
    view = opened["view"]
    inputs = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert list(inputs) == [
        "0.decision",
        "0.reason",
        "1.answer",
        "2.answer",
        "3.volunteers",
        "3.lead",
        "3.cold_boxes",
    ]
    assert [o["value"] for o in inputs["0.decision"]["element"]["options"]] == ["approve", "reject"]
    streets = inputs["1.answer"]
    assert streets["element"]["type"] == "checkboxes"
    assert streets["label"]["text"] == "Choose 1 to 2"
    assert [o["value"] for o in streets["element"]["options"]] == ["Elm", "Oak", "Ash", "Yew"]
    assert inputs["2.answer"]["element"]["type"] == "static_select"
    volunteers = inputs["3.volunteers"]["element"]
    assert (volunteers["type"], volunteers["min_value"], volunteers["max_value"]) == (
        "number_input",
        "1",
        "12",
    )
    assert volunteers["is_decimal_allowed"] is False
    assert inputs["3.lead"]["element"]["type"] == "email_text_input"
    assert (inputs["3.cold_boxes"]["optional"], inputs["0.reason"]["optional"]) == (True, True)

    answers = {
        "0.decision": chosen("approve"),
        "0.reason": typed("plain_text_input", None),
        "1.answer": ticked("Elm", "Oak", "Ash"),  # one more than the card allows
        "2.answer": chosen("Evening"),
        "3.volunteers": typed("number_input", "4"),
        "3.lead": typed("email_text_input", "sam@example.org"),
        "3.cold_boxes": chosen("yes"),
    }
    # A broken rule is shown beside its card; the form stays open and nothing changed
    refused = tap_slack(survey, submission(view, answers))
    assert refused.status_code == 200
    assert refused.json["response_action"] == "errors"
    assert list(refused.json["errors"]) == ["1.answer"]
    assert "2" in refused.json["errors"]["1.answer"]
    still = survey.stores.requests.get("round-1", 0)
    assert (still.state, still.claim_count, still.response) == (
        RequestState.PENDING,
        0,
        request.response,
    )

    # Corrected, the form gives one resume with every answer
    answers["1.answer"] = ticked("Elm", "Ash")
    accepted = tap_slack(survey, submission(view, answers))
    assert (accepted.status_code, accepted.json) == (200, {})
    wait_for(lambda: settled(survey, "round-1"), "the form's answers to be applied")
    done = survey.stores.requests.get("round-1", 0)
    assert done.claim_count == 1
    recorded = json.loads(done.response)
    ids = [a.interrupt_id for a in request.asked]
    assert recorded[ids[0]]["decision"] == "approve"
    assert recorded[ids[1]] == {"answer": ["Elm", "Ash"]}
    assert recorded[ids[2]] == {"answer": "Evening"}
    assert recorded[ids[3]] == {"volunteers": 4, "lead": "sam@example.org", "cold_boxes": True}
    assert survey.stores.outbox.get(f"round-1#{request.asked[0].card['tool_use_id']}") == {
        "van": "Friday"
    }
    events = survey.client.get("/chats/round-1/events", headers=auth(survey.key)).json["events"]
    decisions = [e for e in events if e["type"] == "decision"]
    assert {d["detail"]["source"] for d in decisions} == {"slack"}
    # The person is told, in the message's channel, what became of the form
    wait_for(lambda: survey.slack.recorded.of("chat.postEphemeral"), "the tapper to be told")
    (told,) = survey.slack.recorded.of("chat.postEphemeral")
    assert (told["channel"], told["user"]) == ("C-cards", "U-ALICE")
    assert told["text"].startswith("Thanks:")


def test_a_tap_on_one_card_of_a_group_is_refused_and_changes_nothing(survey: Setup) -> None:
    link(survey, "telegram", str(TG_ALICE), "alice", [])
    request = pause(survey, "round-2")
    # A button for one card alone (an older message's, say) cannot resume the run
    lone = button_data("round-2", request.asked[0].interrupt_id, APPROVE)
    assert tap_telegram(survey, fakes.telegram_tap(1, TG_ALICE, lone)).status_code == 200
    (told,) = survey.telegram.recorded.of("answerCallbackQuery")
    assert "answer them all at once" in told["text"]
    still = survey.stores.requests.get("round-2", 0)
    assert (still.state, still.claim_count) == (RequestState.PENDING, 0)


def test_a_telegram_tap_approves_a_group_of_approvals_in_one_resume(twins: Setup) -> None:
    link(twins, "telegram", str(TG_ALICE), "alice", [])
    link(twins, "slack", "U-ALICE", "alice", [])
    request = _pause_twins(twins, "refunds-1")

    (sent,) = twins.telegram.recorded.of("sendMessage")
    lines = sent["text"].split("\n")
    # Interlock's header, then the intervention's question, labelled as the agent's and
    # without the raw input it appends: the details say it
    assert lines[0] == "1 of 2: Approval needed: Refund", lines
    assert '“Approve "refund"?”' in lines, lines
    assert "Input:" not in sent["text"] and "Order: A-1" in lines
    assert lines[0].startswith("1 of 2: ") and any(x.startswith("2 of 2: ") for x in lines)
    assert "(2 questions, answered together: here all at once, or each on the card page.)" in lines
    keyboard = sent["reply_markup"]["inline_keyboard"]
    assert [b["text"] for b in keyboard[0]] == ["Approve all", "Deny all"]
    assert [b["text"] for b in keyboard[1]] == ["Dismiss"]
    assert keyboard[2] == [
        {"text": "Open the card page", "url": "https://cards.example.com/?chat=refunds-1"}
    ]
    (post,) = twins.slack.recorded.of("chat.postMessage")
    (actions,) = [b for b in post["blocks"] if b["type"] == "actions"]
    assert [e["text"]["text"] for e in actions["elements"]] == [
        "Approve all",
        "Deny all",
        "Answer each…",
        "Dismiss",
    ]

    approve_all = keyboard[0][0]["callback_data"]
    assert approve_all == button_data("refunds-1", request.asked[0].interrupt_id, APPROVE_ALL)
    tap_telegram(twins, fakes.telegram_tap(2, TG_ALICE, approve_all))
    wait_for(lambda: settled(twins, "refunds-1"), "the group's answers to be applied")
    done = twins.stores.requests.get("refunds-1", 0)
    assert (done.claim_count, done.decision) == (1, "approved")
    keys = [f"refunds-1#{a.card['tool_use_id']}" for a in request.asked]
    assert [twins.stores.outbox.get(k) for k in keys] == [
        {"refund": "A-1", "amount": 40},
        {"refund": "B-2", "amount": 15},
    ]
    wait_for(lambda: twins.telegram.recorded.of("answerCallbackQuery"), "the tapper to be told")
    assert twins.telegram.recorded.of("answerCallbackQuery")[0]["text"] == "Thanks: Approved."
    # The same tap again is told the answer and changes nothing
    tap_telegram(twins, fakes.telegram_tap(3, TG_ALICE, approve_all))
    wait_for(
        lambda: len(twins.telegram.recorded.of("answerCallbackQuery")) == 2, "the second answer"
    )
    assert twins.telegram.recorded.of("answerCallbackQuery")[1]["text"].startswith("Already")
    assert twins.stores.requests.get("refunds-1", 0).claim_count == 1


def _pause_twins(setup: Setup, chat: str) -> Any:
    from tests.api.support import run_body, stream

    events = stream(
        setup.client.post(
            "/runs", data=run_body(chat, "refund both orders"), headers=auth(setup.key)
        )
    )
    assert events[-1].outcome.type == "interrupt"
    return setup.stores.requests.get(chat, 0)
