"""How chat buttons and forms become answers: read against each card, never guessed."""

from __future__ import annotations

from typing import Any

import pytest

from interlock import errors
from interlock.channels import (
    ANSWER_ALL,
    APPROVE_ALL,
    DENY_ALL,
    channel_card,
    form_answer,
    group_answers,
    group_buttons,
    group_problems,
)
from interlock.records import Asked, RequestRecord

APPROVAL: dict[str, Any] = {"type": "action", "tool": "send_report", "reason": "Send it?"}
PICK: dict[str, Any] = {
    "type": "question",
    "question_type": "multiple_choice",
    "reason": "Which?",
    "options": ["Yes", "No", "Maybe"],
    "min_selections": 1,
    "max_selections": 2,
}
FIELDS: dict[str, Any] = {
    "type": "info",
    "reason": "Details",
    "fields": [
        {"name": "count", "label": "Count", "type": "integer", "required": True},
        {"name": "notify", "label": "Notify", "type": "boolean", "required": False},
    ],
}


def request(*cards: dict[str, Any]) -> RequestRecord:
    first, *others = cards
    return RequestRecord(
        chat_id="c1",
        interrupt_id="i-0",
        kind="approval",
        card=first,
        secret_hash="",
        snapshot_key=None,
        user_id="alice",
        turn_seq=1,
        created_at=0,
        expires_at=60,
        ttl=120,
        also_asked=tuple(Asked(f"i-{n}", card) for n, card in enumerate(others, 1)),
    )


def test_a_group_of_approvals_is_approved_or_denied_card_by_card() -> None:
    group = request(APPROVAL, {**APPROVAL, "tool": "close_account"})
    assert group_buttons(group, form=False) == (
        ("Approve all", APPROVE_ALL),
        ("Deny all", DENY_ALL),
    )
    assert group_answers(group, APPROVE_ALL, {}) == [
        ("i-0", {"decision": "approve"}),
        ("i-1", {"decision": "approve"}),
    ]
    assert [a for _, a in group_answers(group, DENY_ALL, {})] == [{"decision": "reject"}] * 2


def test_a_mixed_group_offers_only_the_form_and_reads_each_cards_fields() -> None:
    group = request(APPROVAL, PICK, FIELDS)
    assert group_buttons(group, form=False) == ()
    assert group_buttons(group, form=True) == (("Answer each…", ANSWER_ALL),)
    values = {
        "0.decision": "reject",
        "0.reason": " not now ",
        "1.answer": ["Yes", "Maybe"],  # options that read like a decision stay options
        "2.count": "7",
        "2.notify": "no",
    }
    assert group_answers(group, ANSWER_ALL, values) == [
        ("i-0", {"decision": "reject", "reason": "not now"}),
        ("i-1", {"answer": ["Yes", "Maybe"]}),
        ("i-2", {"count": 7, "notify": False}),
    ]
    assert group_problems(group, values) == {}


def test_each_broken_rule_is_found_on_its_own_card() -> None:
    group = request(APPROVAL, PICK, FIELDS)
    values = {"0.decision": "approve", "1.answer": ["Yes", "No", "Maybe"], "2.count": "seven"}
    problems = group_problems(group, values)
    assert sorted(problems) == [1, 2]
    assert "2" in problems[1] and "count" in problems[2]


def test_an_approval_form_without_its_decision_is_refused_not_guessed() -> None:
    with pytest.raises(errors.InvalidInput):
        form_answer(APPROVAL, {"decision": ""})
    # The deny-with-feedback form carries no decision: it denies
    assert form_answer(APPROVAL, {"reason": "no"}) == {"decision": "reject", "reason": "no"}
    # An approval keeps a reason only when one was given
    assert form_answer(APPROVAL, {"decision": "approve", "reason": ""}) == {"decision": "approve"}


def test_a_button_the_message_has_not_is_refused() -> None:
    with pytest.raises(errors.InvalidInput):
        group_answers(request(APPROVAL), "a", {})


def test_a_chat_card_says_what_is_approved_without_the_raw_input() -> None:
    card = channel_card(
        {**APPROVAL, "summary": {"recipient": "team@example.org", "link": "https://x.org/a?t=1"}}
    )
    assert card.details == (
        "Tool: Send report",
        "Recipient: team@example.org",
        "Link: https://x.org/a",
    )
