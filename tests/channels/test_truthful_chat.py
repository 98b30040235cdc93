"""Chat cards read true to a person: a deadline says its day, a settled card keeps what
was asked and the facts it showed, and every Slack form draws a choice as a select and
a number as a number, so Doorstep's two-question pause is answered in one Slack form."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from interlock.adapters.slack import form_view
from interlock.channels import ANSWER_ALL, FORM, Tap, form_answer
from interlock.records import RequestState
from tests.api.support import auth, run_body, stream
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import TG_ALICE, link, pause, settled, tap_slack, tap_telegram
from tests.channels.test_groups import chosen, serving, submission, typed
from tests.e2e.support import wait_for

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def deadline_words(at_s: int) -> str:
    """How a person expects a deadline to read: its day as well as its time."""
    t = time.gmtime(at_s)
    day = f"{DAYS[t.tm_wday]} {t.tm_mday} {MONTHS[t.tm_mon - 1]}"
    return f"{day}, {t.tm_hour:02d}:{t.tm_min:02d} UTC"


@pytest.fixture
def doorstep(channels: Setup, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    yield serving(channels, monkeypatch, "examples.doorstep:build")


def slack_lines(blocks: list[dict[str, Any]]) -> list[str]:
    """A Slack message's lines as a person reads them (markup and escapes aside)."""
    text = "\n".join(b["text"]["text"] for b in blocks if b.get("type") == "section")
    plain = text.replace("*", "").replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&")
    return plain.split("\n")


def test_the_deadline_says_its_day_on_both_channels(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "day-1")
    expected = f"Asked by alice · answer by {deadline_words(request.expires_at)}"
    (sent,) = channels.telegram.recorded.of("sendMessage")
    assert expected in sent["text"].split("\n"), sent["text"]
    (post,) = channels.slack.recorded.of("chat.postMessage")
    assert expected in slack_lines(post["blocks"]), post["blocks"]


def test_a_settled_card_keeps_the_tool_and_its_arguments(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "kept-1")
    (sent,) = channels.telegram.recorded.of("sendMessage")
    facts = [line for line in sent["text"].split("\n") if line.startswith(("Tool:", "Recipient:"))]
    assert facts == ["Tool: Send report", "Recipient: team@example.org"], sent["text"]
    approve = next(
        b["callback_data"]
        for row in sent["reply_markup"]["inline_keyboard"]
        for b in row
        if b["text"] == "Approve"
    )
    tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, approve))
    wait_for(lambda: settled(channels, "kept-1"), "the tap to be applied")
    wait_for(lambda: channels.telegram.recorded.of("editMessageText"), "the Telegram edit")
    wait_for(lambda: channels.slack.recorded.of("chat.update"), "the Slack edit")

    (edit,) = channels.telegram.recorded.of("editMessageText")
    lines = edit["text"].split("\n")
    assert lines[0] == f"Asked: {request.card['reason']}"
    assert lines[1:3] == facts, lines
    assert lines[-1].startswith("Approved by alice at ") and lines[-1].endswith("(Telegram)")
    shown = slack_lines(channels.slack.recorded.of("chat.update")[0]["blocks"])
    assert shown[0] == f"Asked: {request.card['reason']}"
    assert shown[1:3] == facts, shown
    assert shown[-1] == lines[-1]


def _inputs(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in view["blocks"] if b["type"] == "input"]


def _tap(choice: str) -> Tap:
    return Tap("slack", "U-ALICE", "c", "f" * 8, "resolved", None, choice=choice)


def test_a_single_card_slack_form_draws_choices_numbers_and_yes_no() -> None:
    info = {
        "type": "info",
        "reason": "Tell me more",
        "fields": [
            {"name": "count", "label": "How many", "type": "integer", "minimum": 1},
            {"name": "share", "label": "Share it", "type": "boolean", "required": False},
            {"name": "weight", "label": "Weight", "type": "number"},
        ],
    }
    elements = {b["block_id"]: b["element"] for b in _inputs(form_view(_tap(FORM), info))}
    assert elements["count"]["type"] == "number_input"
    assert elements["count"]["is_decimal_allowed"] is False
    assert elements["weight"]["is_decimal_allowed"] is True
    assert elements["share"]["type"] == "static_select"
    assert [o["value"] for o in elements["share"]["options"]] == ["yes", "no"]

    several = {
        "type": "question",
        "question_type": "multiple_choice",
        "reason": "Which streets?",
        "options": ["Elm", "Oak", "Ash"],
        "min_selections": 1,
        "max_selections": 2,
    }
    (block,) = _inputs(form_view(_tap(FORM), several))
    assert block["element"]["type"] == "checkboxes"
    assert [o["value"] for o in block["element"]["options"]] == ["Elm", "Oak", "Ash"]

    captain = {
        "type": "interrupt",
        "reason": "How should we follow up?",
        "schema": {
            "type": "object",
            "properties": {"follow_up": {"enum": ["send", "call", "911"]}},
            "required": ["follow_up"],
        },
    }
    (block,) = _inputs(form_view(_tap(FORM), captain))
    assert block["element"]["type"] == "static_select"
    assert [o["value"] for o in block["element"]["options"]] == ["send", "call", "911"]

    # What is submitted is typed as each card asks: the object a schema asks for, an
    # option as its enum holds it, numbers and yes/no read from the form's text
    assert form_answer(captain, {"follow_up": "call"}) == {"follow_up": "call"}
    rated = {**captain, "schema": {"type": "object", "properties": {"stars": {"enum": [1, 5]}}}}
    assert form_answer(rated, {"stars": "5"}) == {"stars": 5}
    typed_values = {"count": "3", "share": "no", "weight": "2.5"}
    assert form_answer(info, typed_values) == {"count": 3, "share": False, "weight": 2.5}
    assert form_answer(several, {"answer": ["Elm", "Ash"]}) == {"answer": ["Elm", "Ash"]}


def test_doorsteps_two_question_pause_is_answered_in_one_slack_form(doorstep: Setup) -> None:
    link(doorstep, "slack", "U-ALICE", "alice", ["dispatcher"])
    events = stream(
        doorstep.client.post(
            "/runs",
            data=run_body("door-1", "heat warning for the block"),
            headers=auth(doorstep.key, "alice", ("dispatcher",)),
        )
    )
    assert events[-1].outcome.type == "interrupt"
    request = doorstep.stores.requests.get("door-1", 0)
    assert len(request.asked) == 2
    captain = next(i for i, a in enumerate(request.asked) if a.card.get("type") == "interrupt")
    sign_off = 1 - captain

    (post,) = doorstep.slack.recorded.of("chat.postMessage")
    (actions,) = [b for b in post["blocks"] if b["type"] == "actions"]
    answer_each = next(e for e in actions["elements"] if e["value"].startswith(f"i1|{ANSWER_ALL}|"))
    tap_slack(doorstep, fakes.slack_tap("U-ALICE", answer_each["value"], doorstep.slack.url))
    (opened,) = doorstep.slack.recorded.of("views.open")
    inputs = {b["block_id"]: b for b in opened["view"]["blocks"] if b["type"] == "input"}
    # The captain's three options are a select, not a box to type one into
    follow_up = inputs[f"{captain}.follow_up"]["element"]
    assert follow_up["type"] == "static_select"
    assert [o["value"] for o in follow_up["options"]] == [
        "send a volunteer",
        "call the resident again",
        "call emergency services",
    ]
    assert inputs[f"{sign_off}.decision"]["element"]["type"] == "static_select"

    answers = {
        f"{captain}.follow_up": chosen("send a volunteer"),
        f"{sign_off}.decision": chosen("approve"),
        f"{sign_off}.reason": typed("plain_text_input", None),
    }
    accepted = tap_slack(doorstep, submission(opened["view"], answers))
    assert (accepted.status_code, accepted.json) == (200, {})
    wait_for(lambda: settled(doorstep, "door-1"), "the form's answers to be applied")
    done = doorstep.stores.requests.get("door-1", 0)
    assert (done.state, done.claim_count) == (RequestState.DONE, 1)
    recorded = json.loads(done.response)
    ids = [a.interrupt_id for a in request.asked]
    assert recorded[ids[captain]] == {"follow_up": "send a volunteer"}
    assert recorded[ids[sign_off]]["decision"] == "approve"
    wait_for(lambda: doorstep.slack.recorded.of("chat.postEphemeral"), "the tapper to be told")
    (told,) = doorstep.slack.recorded.of("chat.postEphemeral")
    assert told["text"].startswith("Thanks:"), told["text"]
