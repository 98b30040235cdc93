"""An MCP server's input requests as cards, and answers as MCP's replies."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.answers import agent_response, decide
from interlock.elicitation import input_card, interrupt_name, recorded, reply
from interlock.errors import InvalidInput
from interlock.interrupts import schema_fields

FORM: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Confirm the payee, see https://bank.example/x?token=s3cret",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "ok": {"type": "boolean", "title": "Send it"},
                "email": {"type": "string", "format": "email"},
                "tier": {"type": "string", "enum": ["gold", "basic"]},
                "count": {"type": "integer", "minimum": 1, "maximum": 5},
            },
            "required": ["ok"],
        },
    },
}


def card(request: dict[str, Any] = FORM, **arguments: Any) -> dict[str, Any]:
    return input_card(
        key="confirm",
        request=request,
        tool="transfer_funds",
        arguments=arguments or {"amount": 5, "api_token": "t"},
        tool_use_id="tu-1",
        round_=1,
    )


def test_a_form_becomes_a_generic_card_with_the_servers_schema_and_scrubbed_words() -> None:
    made = card()
    assert (made["type"], made["source"], made["input_key"], made["tool"]) == (
        "interrupt",
        "mcp",
        "confirm",
        "transfer_funds",
    )
    assert made["schema"] == FORM["params"]["requestedSchema"]
    assert "s3cret" not in made["reason"] and "https://bank.example/x" in made["reason"]
    assert made["summary"] == {"amount": 5, "api_token": "[redacted]"}
    assert made["interrupt_name"] == interrupt_name(1, "confirm")


def test_rounds_and_keys_name_distinct_interrupts() -> None:
    names = {interrupt_name(r, k) for r in (1, 2) for k in ("confirm", "reference")}
    assert len(names) == 4 and all(n.startswith("interlock.mcp.") for n in names)


def test_a_url_request_is_a_link_card_answered_by_saying_it_is_done() -> None:
    link = {
        "params": {
            "mode": "url",
            "message": "Sign in",
            "url": "https://id.example/sign",
            "elicitationId": "e1",
        }
    }
    made = card(link)
    assert made["link"] == "https://id.example/sign"
    assert "[Open the page](https://id.example/sign)" in made["reason"]
    assert reply(made, recorded({"done": True})) == {"action": "accept"}
    assert reply(made, recorded({"done": False})) == {"action": "cancel"}


def test_a_link_keeps_the_servers_session_in_its_query_and_cannot_break_its_markdown() -> None:
    url = "https://id.example/sign?session=abc&step=2)](javascript:x)#top"
    made = card({"params": {"mode": "url", "message": "Sign in", "url": url}})
    assert made["link"].startswith("https://id.example/sign?session=abc&step=2")
    assert made["link"].endswith("#top")
    assert ")" not in made["link"] and "]" not in made["link"]
    assert f"[Open the page]({made['link']})" in made["reason"]


@pytest.mark.parametrize(
    "request_",
    [
        {"params": {"mode": "url", "message": "x", "url": "javascript:alert(1)"}},
        {"params": {"mode": "form", "message": "x", "requestedSchema": "not a schema"}},
        {"method": "sampling/createMessage", "params": {}},
        {"params": None},
    ],
    ids=["script-link", "bad-schema", "not-elicitation", "no-params"],
)
def test_an_unusable_request_is_refused_with_a_clear_error(request_: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match=r"input request|response_schema"):
        card(request_)


def test_answers_become_accept_decline_or_cancel() -> None:
    made = card()
    _, answered = decide(made, "resolved", {"ok": True})
    assert reply(made, answered) == {"action": "accept", "content": {"ok": True}}
    _, cancelled = decide(made, "cancelled", None)
    assert reply(made, cancelled) == {"action": "decline"}
    assert reply(made, {"status": "timed_out"}) == {"action": "cancel"}
    assert reply(made, None) == {"action": "cancel"}
    # The paused call receives exactly that, through the one answer path
    _, refused = decide(made, "resolved", {"ok": False})
    assert agent_response(made, refused) == {"action": "accept", "content": {"ok": False}}


def test_a_form_field_named_status_is_an_answer_never_a_cancellation() -> None:
    form = {
        "params": {
            "message": "Set the order's status",
            "requestedSchema": {
                "type": "object",
                "properties": {"status": {"type": "string", "enum": ["cancelled", "open"]}},
            },
        }
    }
    made = card(form)
    decision, response = decide(made, "resolved", {"status": "cancelled"})
    assert decision.label == "answered"
    assert recorded_answers_label(made, response) == "answered"
    assert reply(made, response) == {"action": "accept", "content": {"status": "cancelled"}}


def recorded_answers_label(made: dict[str, Any], response: Any) -> str:
    """The decision a takeover reads back from the recorded response."""
    from interlock.answers import recorded_decision

    return recorded_decision(made, response).label


@pytest.mark.parametrize(
    "field",
    [
        {"type": "object"},
        {"type": "array", "items": {"type": "object"}},
        {"anyOf": [{"type": "string"}]},
    ],
    ids=["nested-object", "list-of-objects", "no-type"],
)
def test_a_schema_outside_mcps_flat_subset_is_refused_when_the_card_is_made(
    field: dict[str, Any],
) -> None:
    form = {
        "params": {
            "message": "x",
            "requestedSchema": {"type": "object", "properties": {"f": field}},
        }
    }
    with pytest.raises(InvalidInput, match="restricted schema"):
        card(form)


def test_a_schemas_labels_are_scrubbed_like_the_servers_message() -> None:
    form = {
        "params": {
            "message": "x",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "ok": {"type": "boolean", "title": "See https://evil.example/a?t=s3cret"}
                },
            },
        }
    }
    title = card(form)["schema"]["properties"]["ok"]["title"]
    assert "s3cret" not in title and "https://evil.example/a" in title


def test_an_answer_is_checked_against_the_servers_schema_before_anything_is_written() -> None:
    made = card()
    decision, response = decide(made, "resolved", {"ok": True, "count": 3})
    assert (decision.label, response) == ("answered", {"content": {"ok": True, "count": 3}})
    with pytest.raises(InvalidInput, match="count"):
        decide(made, "resolved", {"ok": True, "count": 9})
    with pytest.raises(InvalidInput, match="ok"):
        decide(made, "resolved", {"count": 2})


def test_a_flat_schema_is_read_as_fields_for_forms_that_cannot_draw_json_schema() -> None:
    fields = {f["name"]: f for f in schema_fields(card()) or []}
    assert (fields["ok"]["type"], fields["ok"]["required"], fields["ok"]["label"]) == (
        "boolean",
        True,
        "Send it",
    )
    assert fields["email"]["type"] == "email"
    assert fields["tier"]["options"] == ["gold", "basic"]
    assert (fields["count"]["minimum"], fields["count"]["maximum"]) == (1, 5)
    nested = {"schema": {"type": "object", "properties": {"a": {"type": "object"}}}}
    assert schema_fields(nested) is None
    assert schema_fields({"schema": {"type": "string"}}) is None
