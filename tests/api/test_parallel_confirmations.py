"""Two parallel confirmations: one pause, two cards, one resume that answers both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from ag_ui.core import RunAgentInput
from ag_ui.core.types import ResumeEntry
from werkzeug.test import Client

from tests.api.support import auth, run_body, stream

CHAT = "twin-chat"


@pytest.fixture
def twin_agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("INTERLOCK_AGENT", "tests.api.twin_agent:build")
    yield


def resume_with(entries: list[ResumeEntry]) -> str:
    return RunAgentInput(thread_id=CHAT, run_id="r2", messages=[], resume=entries).model_dump_json(
        by_alias=True
    )


def entry(interrupt: dict[str, Any], decision: str, secret: str) -> ResumeEntry:
    return ResumeEntry(
        interrupt_id=interrupt["interruptId"],
        status="resolved",
        payload={"decision": decision},
        metadata={"secret": secret},
    )


def paused_events(client: Client, headers: dict[str, str]) -> list[dict[str, Any]]:
    audit = client.get(f"/chats/{CHAT}/events", headers=headers).get_json()
    return [e for e in audit["events"] if e["type"] == "paused"]


def outbox(interrupts: list[Any]) -> list[Any]:
    """The recorded refunds, in the order of the cards."""
    from interlock.api import wiring

    stores = wiring.stores()
    keys = [f"{CHAT}#{i.metadata['card']['tool_use_id']}" for i in interrupts]
    return [stores.outbox.get(k) for k in keys]


def test_both_confirmations_pause_once_and_one_resume_answers_both(
    twin_agent: None, api: tuple[Client, bytes]
) -> None:
    client, key = api
    headers = auth(key)

    # Given a run whose batch holds two refunds, each confirmed by HumanInTheLoop
    events = stream(client.post("/runs", data=run_body(CHAT, "refund both"), headers=headers))

    # Then it paused once, with both cards, one secret between them
    finished = events[-1]
    interrupts = finished.outcome.interrupts
    assert len(interrupts) == 2
    assert {i.metadata["card"]["type"] for i in interrupts} == {"confirm"}
    assert sorted(i.metadata["card"]["summary"]["order"] for i in interrupts) == ["A-1", "B-2"]
    assert len({i.metadata["secret"] for i in interrupts}) == 1
    assert all(i.response_schema["properties"]["decision"]["enum"] for i in interrupts)
    assert len(paused_events(client, headers)) == 2

    # And the request view shows the first and lists the other
    view = client.get(f"/chats/{CHAT}/request", headers=headers).get_json()
    asked = [view, *view["alsoAsked"]]
    assert [a["card"]["summary"]["order"] for a in asked] == [
        i.metadata["card"]["summary"]["order"] for i in interrupts
    ]
    secret = view["secret"]
    by_order = {a["card"]["summary"]["order"]: a for a in asked}

    # When a resume answers only one of them, it is refused and nothing changes
    partial = client.post(
        "/resume", data=resume_with([entry(by_order["A-1"], "approve", secret)]), headers=headers
    )
    assert partial.status_code == 422, partial.get_data(as_text=True)
    assert partial.get_json()["error"]["code"] == "incomplete_resume"
    assert outbox(interrupts) == [None, None]
    still = client.get(f"/chats/{CHAT}/request", headers=headers).get_json()
    assert (still["state"], still["interruptId"]) == ("pending", view["interruptId"])
    secret = still["secret"]

    # When one resume approves A-1 and rejects B-2
    both = [entry(by_order["A-1"], "approve", secret), entry(by_order["B-2"], "reject", secret)]
    done = stream(client.post("/resume", data=resume_with(both), headers=headers))

    # Then the run completed: A-1 refunded, B-2 never ran
    text = "".join(e.delta for e in done if getattr(e, "type", None) == "TEXT_MESSAGE_CONTENT")
    assert "Refunded A-1." in text and "Refunded B-2" not in text, text
    assert "CONFIRMATION_FAILED" in text
    final = client.get(f"/chats/{CHAT}/request", headers=headers).get_json()
    assert final["state"] == "done"
    orders = [i.metadata["card"]["summary"]["order"] for i in interrupts]
    by_card = dict(zip(orders, outbox(interrupts), strict=True))
    assert by_card == {"A-1": {"refund": "A-1", "amount": 40}, "B-2": None}

    # And the trail the page's history reads holds one decision per card, each its own
    audit = client.get(f"/chats/{CHAT}/events", headers=headers).get_json()["events"]
    decisions = {e["detail"]["interrupt_id"]: e for e in audit if e["type"] == "decision"}
    assert {i.id: decisions[i.id]["detail"]["decision"] for i in interrupts} == {
        by_order["A-1"]["interruptId"]: "approved",
        by_order["B-2"]["interruptId"]: "rejected",
    }
    assert {e["actor"] for e in decisions.values()} == {"alice"}
    assert all(e["detail"]["source"] == "api" for e in decisions.values())

    # And answering again replays the stored outcome, running nothing twice
    again = client.post("/resume", data=resume_with(both), headers=headers)
    replayed = stream(again)
    assert replayed[-1].result["outcome"] == "replayed"
    assert [r is not None for r in outbox(interrupts)] == [
        i.metadata["card"]["summary"]["order"] == "A-1" for i in interrupts
    ]


def test_approving_both_records_each_refund_once(
    twin_agent: None, api: tuple[Client, bytes]
) -> None:
    client, key = api
    headers = auth(key)
    events = stream(client.post("/runs", data=run_body(CHAT, "refund both"), headers=headers))
    interrupts = events[-1].outcome.interrupts
    secret = interrupts[0].metadata["secret"]
    both = [
        ResumeEntry(
            interrupt_id=i.id,
            status="resolved",
            payload={"decision": "approve"},
            metadata={"secret": secret},
        )
        for i in interrupts
    ]
    for _ in range(2):
        client.post("/resume", data=resume_with(both), headers=headers)

    assert [json.dumps(r, sort_keys=True) for r in outbox(interrupts)] == [
        json.dumps({"amount": 40, "refund": "A-1"}),
        json.dumps({"amount": 15, "refund": "B-2"}),
    ]
