"""Question and information-request specs, schemas and answer validation."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.answers import answer_text, decide, response_schema
from interlock.errors import InvalidInput
from interlock.questions import InfoSpec, QuestionSpec, info_card, parse_spec, question_card


def question(**spec: Any) -> dict[str, Any]:
    return question_card(parse_spec(QuestionSpec, spec), "tooluse_1")


SINGLE = {"type": "single_choice", "prompt": "Which?", "options": ["a", "b", "c"]}
MULTI = {
    "type": "multiple_choice",
    "prompt": "Which ones?",
    "options": ["a", "b", "c", "d"],
    "min_selections": 1,
    "max_selections": 2,
}
TEXT = {"type": "free_text", "prompt": "Why?", "max_length": 10}


@pytest.mark.parametrize(
    "spec",
    [
        {**SINGLE, "options": ["a"]},
        {**SINGLE, "options": ["a", "a"]},
        {**SINGLE, "default": "z"},
        {**MULTI, "max_selections": 0},
        {**MULTI, "min_selections": 3, "max_selections": 2},
        {**TEXT, "options": ["a", "b"]},
        {"type": "essay", "prompt": "x"},
        {**SINGLE, "prompt": ""},
        {**SINGLE, "surprise": 1},
    ],
)
def test_malformed_questions_are_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        parse_spec(QuestionSpec, spec)


def test_single_choice_answers_must_be_an_option() -> None:
    card = question(**SINGLE)
    assert response_schema(card)["properties"]["answer"] == {"enum": ["a", "b", "c"]}
    assert decide(card, "resolved", {"answer": "b"})[1] == {"answer": "b"}
    for bad in ({"answer": "z"}, {"answer": ["a"]}, {}, {"answer": "a", "extra": 1}, "a"):
        with pytest.raises(InvalidInput):
            decide(card, "resolved", bad)


def test_multiple_choice_answers_respect_the_bounds() -> None:
    card = question(**MULTI)
    schema = response_schema(card)["properties"]["answer"]
    assert (schema["minItems"], schema["maxItems"]) == (1, 2)
    assert decide(card, "resolved", {"answer": ["a", "d"]})[1] == {"answer": ["a", "d"]}
    for bad in (["a", "b", "c"], [], ["a", "a"], ["z"], "a"):
        with pytest.raises(InvalidInput):
            decide(card, "resolved", {"answer": bad})


def test_free_text_has_a_length_limit_and_refuses_control_characters() -> None:
    card = question(**TEXT)
    assert decide(card, "resolved", {"answer": " fine "})[1] == {"answer": "fine"}
    for bad in ("x" * 11, "bell\x07", 42):
        with pytest.raises(InvalidInput):
            decide(card, "resolved", {"answer": bad})


def test_an_optional_question_may_be_skipped_and_gets_its_default() -> None:
    card = question(**SINGLE, required=False, default="a")
    assert decide(card, "resolved", {"answer": None})[1] == {"answer": "a"}
    assert "required" not in response_schema(card)
    with pytest.raises(InvalidInput, match="requires an answer"):
        decide(question(**SINGLE), "resolved", {})


def test_information_requests_check_every_field() -> None:
    spec = parse_spec(
        InfoSpec,
        {
            "reason": "Need details",
            "fields": [
                {"name": "bucket", "label": "Bucket", "max_length": 5},
                {"name": "days", "label": "Days", "type": "integer", "minimum": 1, "maximum": 30},
                {"name": "email", "label": "Email", "type": "email", "required": False},
                {"name": "notify", "label": "Notify", "type": "boolean", "required": False},
            ],
        },
    )
    card = info_card(spec, "tooluse_2", for_call="tooluse_1")

    assert card["for_call"] == "tooluse_1"
    assert response_schema(card)["required"] == ["bucket", "days"]
    assert decide(card, "resolved", {"bucket": "b1", "days": 7, "notify": True})[1] == {
        "bucket": "b1",
        "days": 7,
        "notify": True,
    }
    for bad in (
        {"days": 7},
        {"bucket": "b1", "days": 0},
        {"bucket": "b1", "days": 2.5},
        {"bucket": "b1", "days": True},
        {"bucket": "toolong", "days": 1},
        {"bucket": "b", "days": 1, "email": "nope"},
        {"bucket": "b", "days": 1, "x": 1},
    ):
        with pytest.raises(InvalidInput):
            decide(card, "resolved", bad)
    with pytest.raises(InvalidInput):
        parse_spec(
            InfoSpec,
            {"reason": "r", "fields": [{"name": "a", "label": "A"}, {"name": "a", "label": "B"}]},
        )


def test_cancelled_and_timed_out_are_explicit_for_every_kind() -> None:
    card = question(**SINGLE)
    for status in ("cancelled", "timed_out"):
        decision, response = decide(card, status, None)
        assert decision.label == status and response == {"status": status}
    assert "cancelled the question" in answer_text(card, {"status": "cancelled"})
    assert "in time" in answer_text(card, {"status": "timed_out"})
    with pytest.raises(InvalidInput):
        decide(card, "maybe", {"answer": "a"})  # type: ignore[arg-type]
