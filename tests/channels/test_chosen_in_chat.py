"""A settled chat card says what was chosen, read as a person reads it: the button
pressed ("Chosen: Approve", "Chosen: Deny"), the option picked, or the fields filled in
under the form's own labels, whichever path edited it (the answer's own, or the finder's
pass after the process that answered died before its edit)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from interlock.channels import button_data
from interlock.notify import Notifier
from interlock.timing import EDIT_HOLD_MS
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import TG_ALICE, link, pause, settled, tap_slack, tap_telegram
from tests.channels.test_groups import chosen, serving, submission, ticked, typed
from tests.channels.test_truthful_chat import slack_lines
from tests.e2e.support import wait_for


@pytest.fixture
def survey(channels: Setup, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    """The channel tier serving an agent whose one pause asks four things at once."""
    yield serving(channels, monkeypatch, "tests.channels.survey_agent:build")


def telegram_edit(setup: Setup) -> list[str]:
    """The lines of the one Telegram edit, once it was sent."""
    wait_for(lambda: setup.telegram.recorded.of("editMessageText"), "the Telegram edit")
    (edit,) = setup.telegram.recorded.of("editMessageText")
    return str(edit["text"]).split("\n")


def slack_edit(setup: Setup) -> list[str]:
    """The lines of the one Slack edit as a person reads them, once it was sent."""
    wait_for(lambda: setup.slack.recorded.of("chat.update"), "the Slack edit")
    (update,) = setup.slack.recorded.of("chat.update")
    return slack_lines(update["blocks"])


def test_an_approved_card_says_approve_was_chosen_on_both_channels(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "chosen-a")

    approve = button_data("chosen-a", request.interrupt_id, "a")
    tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, approve))
    wait_for(lambda: settled(channels, "chosen-a"), "the tap to be applied")

    for lines in (telegram_edit(channels), slack_edit(channels)):
        # What was chosen, just above how it ended; the kept facts stay where they were
        assert lines[-2] == "Chosen: Approve", lines
        assert lines[-1].startswith("Approved by alice at "), lines
        assert lines[1:3] == ["Tool: Send report", "Recipient: team@example.org"], lines


def test_a_denied_card_says_deny_was_chosen(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "chosen-d")

    deny = button_data("chosen-d", request.interrupt_id, "r")
    tap_slack(channels, fakes.slack_tap("U-ALICE", deny, channels.slack.url))
    wait_for(lambda: channels.stores.requests.get("chosen-d", 0).decision, "the tap to be applied")

    for lines in (telegram_edit(channels), slack_edit(channels)):
        assert lines[-2] == "Chosen: Deny", lines
        assert lines[-1].startswith("Denied by alice at ") and lines[-1].endswith("(Slack)")
        assert "Chosen: Approve" not in lines


def test_answered_questions_are_said_in_the_forms_words(survey: Setup) -> None:
    link(survey, "slack", "U-ALICE", "alice", [])
    link(survey, "telegram", str(TG_ALICE), "alice", [])
    request = pause(survey, "chosen-q")
    (post,) = survey.slack.recorded.of("chat.postMessage")
    (actions,) = [b for b in post["blocks"] if b["type"] == "actions"]
    answer_each = next(e["value"] for e in actions["elements"] if e["value"].startswith("i1|m|"))
    tap_slack(survey, fakes.slack_tap("U-ALICE", answer_each, survey.slack.url, "q1"))
    (opened,) = survey.slack.recorded.of("views.open")
    answers = {
        "0.decision": chosen("approve"),
        "0.reason": typed("plain_text_input", None),
        "1.answer": ticked("Elm", "Ash"),
        "2.answer": chosen("Evening"),
        "3.volunteers": typed("number_input", "4"),
        "3.lead": typed("email_text_input", "sam@example.org"),
        "3.cold_boxes": chosen("yes"),
    }
    tap_slack(survey, submission(opened["view"], answers))
    wait_for(lambda: settled(survey, "chosen-q"), "the form's answers to be applied")
    assert len(request.asked) == 4

    expected = [
        "1 of 4: Chosen: Approve",
        "2 of 4: Chosen: Elm, Ash",
        "3 of 4: Chosen: Evening",
        # The information request's answer under its fields' labels, yes for a ticked box
        "4 of 4: Answer: Volunteers: 4; Lead's email: sam@example.org; Bring cold boxes: yes",
    ]
    for lines in (telegram_edit(survey), slack_edit(survey)):
        assert lines[-5:-1] == expected, lines
        assert lines[-1].startswith("Answered by alice at "), lines
        # Never the form's keys, nor the answer as raw JSON
        said = "\n".join(lines)
        assert "cold_boxes" not in said and "{" not in said, said


def test_a_card_the_finders_pass_edits_says_what_was_chosen(
    channels: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interlock.api import wiring

    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    request = pause(channels, "chosen-f")
    # The process that applies the tap dies before it edits the card: the edit it owed
    # is left to the finder's pass, which has only the pointer's record to say it from
    dropped: list[Any] = []
    monkeypatch.setattr(Notifier, "settled", lambda self, *args, **kw: dropped.append(args))
    deny = button_data("chosen-f", request.interrupt_id, "r")
    tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, deny))
    wait_for(lambda: settled(channels, "chosen-f"), "the tap to be applied")
    assert dropped and channels.telegram.recorded.of("editMessageText") == []
    monkeypatch.undo()

    # Once the ending's hold ran out, the finder's pass edits the card
    later = int(time.time() * 1000) + EDIT_HOLD_MS + 1_000
    finder = Notifier(
        channels.stores.channels,
        wiring.notifier().channels,
        lambda: later,
        requests=channels.stores.requests,
    )
    finder.retry("chosen-f")

    lines = telegram_edit(channels)
    assert lines[-2] == "Chosen: Deny", lines
    assert lines[-1].startswith("Denied by alice at "), lines


APPROVAL = {"type": "action", "tool": "send_report", "editable": {"recipient": {"value": "a@b"}}}


@pytest.mark.parametrize(
    ("card", "response", "line"),
    [
        pytest.param(APPROVAL, {"decision": "approve", "fingerprint": "f"}, "Chosen: Approve"),
        pytest.param(
            APPROVAL,
            {"decision": "approve", "edits": {"recipient": "boss@example.org"}},
            "Chosen: Approve with changes: Recipient: boss@example.org",
            id="changed",
        ),
        pytest.param(
            APPROVAL,
            {"decision": "reject", "reason": "Not now", "suggestion": "Ask me"},
            "Chosen: Deny with feedback · Reason: \u201cNot now\u201d"
            " · Instead: \u201cAsk me\u201d",
            id="feedback",
        ),
        pytest.param(APPROVAL, {"status": "timed_out"}, "", id="nobody-chose"),
        pytest.param(
            {"type": "question", "question_type": "free_text"},
            {"answer": "Tuesday,\nafter lunch"},
            "Answer: Tuesday, after lunch",
            id="typed",
        ),
        pytest.param(
            {"type": "question", "question_type": "single_choice", "options": ["a", "b"]},
            {"status": "default", "answer": "b"},
            "Default used: b",
            id="default",
        ),
        pytest.param(
            {"type": "info", "fields": [{"name": "seats", "label": "Seats booked"}]},
            {"seats": 3, "api_token": "s3cret"},
            "Answer: Seats booked: 3; Api token: [redacted]",
            id="sensitive-masked",
        ),
        pytest.param(
            {
                "type": "interrupt",
                "source": "mcp",
                "schema": {"properties": {"ok": {"type": "boolean", "title": "Go ahead"}}},
            },
            {"content": {"ok": False}},
            "Answer: Go ahead: no",
            id="mcp-content",
        ),
    ],
)
def test_an_answer_is_said_in_the_words_its_card_offered(
    card: dict[str, Any], response: Any, line: str
) -> None:
    from interlock.channels import chosen_line

    assert chosen_line(card, response) == line
