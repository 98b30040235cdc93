"""A claimed request's item stays under 1 KB: DynamoDB bills each journal step's fence
check by the kilobytes of that item, so past 1 KB every step of a run costs 2 WRU more."""

from __future__ import annotations

import json
import uuid

from bench.peers.metering import item_size, write_units
from interlock import keys
from interlock.adapters.requests import _to_item
from interlock.records import RequestRecord, RequestState, journal_of
from interlock.tokens import hash_secret, new_secret, new_token

CARD = {
    "batch_tools": ["request_approval"],
    "card_id": uuid.uuid4().hex,
    "impact": "The agent may download from these sites and install these packages for the "
    "rest of this chat.",
    "interrupt_name": "interlock.approval",
    "packages": ["pandas"],
    "reason": "Download the quarterly reference table the revenue analysis needs.",
    "risk": "medium",
    "sites": ["data.example.org"],
    "summary": {
        "packages": ["pandas"],
        "reason": "Download the quarterly reference table the revenue analysis needs.",
        "urls": ["https://data.example.org/reference/2026/q3/table.csv"],
    },
    "tool": "request_approval",
    "tool_use_id": "tooluse_0d848a7ae8bb4dda",
    "type": "download",
    "urls": ["https://data.example.org/reference/2026/q3/table.csv"],
}


def claimed(chat_id: str) -> RequestRecord:
    """A download approval as a claim leaves it, with ids as long as real ones."""
    interrupt_id = f"v1:tool_call:tooluse_{uuid.uuid4().hex[:16]}:{uuid.uuid4()}"
    run, lease = new_token(), new_token()
    response = json.dumps({interrupt_id: {"decision": "approve"}}, separators=(",", ":"))
    return RequestRecord(
        chat_id=chat_id,
        interrupt_id=interrupt_id,
        kind="approval",
        card=CARD,
        secret_hash=hash_secret(new_secret()),
        snapshot_key=keys.snapshot_key(chat_id, interrupt_id, run),
        snapshot_digest=hash_secret("snapshot"),
        user_id="alice@example.com",
        turn_seq=12,
        created_at=1_796_418_716,
        created_ms=1_796_418_716_598,
        expires_at=1_796_505_116,
        ttl=1_797_282_716,
        state=RequestState.CLAIMED,
        claim_count=1,
        stalls=1,  # as a first claim records it (`records.claim_progress`)
        ask_slot=17,
        owner_roles=("reporter",),
        version=1,
        worker=new_token(),
        lease_token=lease,
        lease_expires_at_ms=1_796_418_746_598,
        resume_deadline_ms=1_796_419_616_598,
        decision="approved",
        response=response,
        decided_by="alice@example.com",
        decided_at_ms=1_796_418_716_598,
        decided_via="slack",
        journal_id=journal_of(lease),
        acted=True,
    )


def test_a_claimed_download_approval_is_billed_as_one_kilobyte() -> None:
    chat_id = str(uuid.uuid4())  # as long as a client's generated thread id
    item = _to_item(claimed(chat_id))
    assert item_size(item) <= 1024, item_size(item)
    # So each journal step's fence check costs what a step's own small item does
    assert write_units(item_size(item), transactional=True) == 2
