"""The pointer item's codec: every field of `RequestRecord` is stored and read back,
and an item missing what every request has is a store error, never a guess."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from typing import Any

import pytest

from interlock import errors
from interlock.adapters.dynamo import from_item
from interlock.adapters.requests import _to_item, request_from_item
from interlock.records import Asked, RequestRecord, RequestState


def every_field_set() -> RequestRecord:
    """A record whose every field differs from its default."""
    return RequestRecord(
        chat_id="c1",
        interrupt_id="i1",
        kind="approval",
        card={"type": "download", "b": [1, 2]},
        secret_hash="h",
        snapshot_key="snapshots/c1/i1",
        user_id="alice",
        turn_seq=3,
        created_at=10,
        expires_at=20,
        ttl=30,
        state=RequestState.CLAIMED,
        claim_count=2,
        worker="w",
        lease_token="t",
        lease_expires_at_ms=40,
        resume_deadline_ms=50,
        answer_key="answers/c1",
        answer='{"a":1}',
        final_text="done",
        answered_at=60,
        decision="approved",
        ended_reason="why",
        route_role="finance",
        ask_slot=1,
        owner_roles=("finance", "ops"),
        version=4,
        snapshot_digest="d",
        response='{"r":1}',
        journal_id="j",
        acted=True,
        failures=2,
        stalls=2,
        journal_seen=5,
        also_asked=(Asked("i2", {"type": "confirm"}),),
        created_ms=70,
        decided_by="bob",
        decided_at_ms=80,
        decided_via="slack",
        notify_due_ms=90,
        posted=True,
        page_secret_hash="p",
        chat_secret_hash="c",
    )


def test_every_field_round_trips_through_the_item() -> None:
    record = every_field_set()
    # Every field differs from its default, so none can round-trip by being dropped.
    same = [f.name for f in fields(record) if getattr(record, f.name) == f.default]
    assert same == []
    assert request_from_item(from_item(_to_item(record))) == record


def test_empty_values_are_left_off_the_item_and_read_back_as_defaults() -> None:
    record = replace(
        every_field_set(),
        acted=False,
        failures=0,
        stalls=0,
        journal_seen=0,
        also_asked=(),
        created_ms=0,
    )
    stored = from_item(_to_item(record))
    assert not {"acted", "failures", "stalls", "journal_seen", "also_asked", "created_ms"} & set(
        stored
    )
    assert request_from_item(stored) == record


@pytest.mark.parametrize("attribute", ["state", "pk", "secret_hash", "card"])
def test_an_item_without_what_every_request_has_is_a_store_error(attribute: str) -> None:
    stored: dict[str, Any] = from_item(_to_item(every_field_set()))
    del stored[attribute]
    with pytest.raises(errors.StoreError, match=f"malformed request record: '{attribute}'"):
        request_from_item(stored)


def test_a_snapshot_key_is_left_off_only_by_a_finish() -> None:
    # A finished pointer no longer names its snapshot; an open one without it is broken.
    open_one: dict[str, Any] = from_item(_to_item(every_field_set()))
    del open_one["snapshot_key"]
    with pytest.raises(errors.StoreError, match="malformed request record: 'snapshot_key'"):
        request_from_item(open_one)
    finished = {**open_one, "state": RequestState.DONE.value}
    assert request_from_item(finished).snapshot_key is None


def test_cards_are_stored_compressed_and_cards_stored_as_text_still_read() -> None:
    record = replace(
        every_field_set(),
        card={"type": "download", "reason": "Fetch the table. " * 20},
        also_asked=(Asked("i2", {"type": "confirm", "reason": "Sure? " * 20}),),
    )
    stored = from_item(_to_item(record))
    as_text = json.dumps(record.card, separators=(",", ":"), sort_keys=True)
    # Billed by the byte on every write of the item: the card takes less than its text
    assert isinstance(stored["card"], bytes) and len(stored["card"]) < len(as_text) / 2
    assert isinstance(stored["also_asked"], bytes)

    # An item written before cards were compressed holds their JSON text
    stored["card"] = as_text
    stored["also_asked"] = json.dumps([{"interrupt_id": "i2", "card": record.also_asked[0].card}])
    assert request_from_item(stored) == record


def test_a_long_answer_is_stored_compressed_and_an_answer_stored_as_text_still_reads() -> None:
    calls = [{"id": f"tooluse_{n}", "name": "fetch_url", "status": "success"} for n in range(9)]
    answer = json.dumps({"message_id": "msg_1", "tool_calls": calls}, separators=(",", ":"))
    record = replace(every_field_set(), answer=answer)
    stored = from_item(_to_item(record))
    assert isinstance(stored["answer"], bytes) and len(stored["answer"]) < len(answer) / 2
    assert request_from_item(stored) == record

    stored["answer"] = answer  # as written before answers were compressed
    assert request_from_item(stored) == record


def test_what_the_item_holds_elsewhere_is_stored_once_and_earlier_items_still_read() -> None:
    # The chat's id is in the key; the second it was created, in its millisecond.
    record = replace(every_field_set(), created_at=1_796_418_716, created_ms=1_796_418_716_598)
    stored = from_item(_to_item(record))
    assert "chat_id" not in stored and "created_at" not in stored
    assert request_from_item(stored) == record

    # As written before: both stored
    assert request_from_item({**stored, "chat_id": "c1", "created_at": 1_796_418_716}) == record


def test_an_answer_is_stored_without_its_own_interrupt_id_and_read_back_byte_for_byte() -> None:
    interrupt = "v1:tool_call:tooluse_076c20e8bef248b7:768b5985-11ba-5e44-832a-820f38459f3b"
    response = json.dumps(
        {interrupt: {"decision": "approve"}, "v1:other": {"answer": "blue"}},
        separators=(",", ":"),
        sort_keys=True,
    )
    record = replace(every_field_set(), interrupt_id=interrupt, response=response)
    stored = from_item(_to_item(record))

    assert interrupt not in stored["response"] and "v1:other" in stored["response"]
    assert len(stored["response"]) == len(response) - len(interrupt) + 1
    assert request_from_item(stored).response == response
    # As written before: the whole answer
    assert request_from_item({**stored, "response": response}).response == response


@pytest.mark.parametrize(
    "response",
    [
        '{"i1": {"decision": "approve"}}',
        '["i1"]',
        '{"": 1, "i1": 2}',
        '"i1"',
        "null",
        "approve",
        "=approve",
        '={"i1":1}',
    ],
)
def test_an_answer_not_as_a_claim_writes_it_is_stored_exactly_as_given(response: str) -> None:
    record = replace(every_field_set(), interrupt_id="i1", response=response)
    stored = from_item(_to_item(record))
    assert stored["response"] == response
    assert request_from_item(stored).response == response
