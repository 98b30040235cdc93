"""The Doorstep drill: pause, the process dies, a fresh process answers, once.

Process A gets the heat warning and pauses on two cards (the captain's page, inside
`escalate_to_captain`, and the sign-off `Confirm` on `assign_volunteer`), then exits.
Process B holds nothing but the store: it answers both, then taps the same answers
again. Exactly one volunteer task is in the outbox.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from examples.doorstep import ESCALATION, CaptainSignOff
from examples.doorstep.roster import RESIDENTS, VOLUNTEERS, volunteer_message
from interlock.adapters.factory import Stores
from interlock.records import RequestState
from tests.e2e.support import finished_by, outbox_records, pointer
from tests.e2e.test_processes import Lab

pytestmark = pytest.mark.server

DOORSTEP = ("--agent", "examples.doorstep:build", "--roles", "dispatcher")
ANSWERS = {
    ESCALATION: {"follow_up": "send a volunteer"},
    CaptainSignOff.name: {"decision": "approve"},
    "*": {"decision": "reject"},
}


def recorded(aws: dict[str, Any], chat: str) -> list[dict[str, Any]]:
    return [
        json.loads(item["payload"]["S"])
        for item in outbox_records(aws)
        if item["pk"]["S"].startswith(f"OUTBOX#{chat}#")
    ]


def test_the_drill_sends_exactly_one_volunteer_task(
    server_aws: dict[str, Any], server_stores: Stores, tmp_path: Path
) -> None:
    lab = Lab(server_aws, tmp_path, chat="doorstep-drill")
    try:
        # Given A got the heat warning, paused on the captain's two cards, and exited
        lab.run("pause", "A", "--prompt", "heat warning for the block", *DOORSTEP)
        offer = json.loads((tmp_path / "offer.json").read_text())
        assert sorted(offer["asked"].values()) == sorted([ESCALATION, CaptainSignOff.name])
        paused = pointer(server_stores, lab.chat)
        assert paused.state is RequestState.PENDING
        # The captain's cards carry today's call
        assert all("dizzy" in a.card["reason"] for a in paused.asked)

        # When B, a fresh process, answers both, then taps the same answers again
        lab.run("resume", "B", *DOORSTEP, "--payloads", json.dumps(ANSWERS))
        b = json.loads((tmp_path / "B.json").read_text())
    finally:
        lab.kill_all()

    # Then B's run sent the task, and the second tap replayed the stored answer
    first, again = b["first"], b["again"]
    assert first["outcome"] == "completed", first
    assert "Assigned Tom to unit 2B." in first["text"]
    assert "The captain chose to send a volunteer for Ada Lind." in first["text"]
    assert (again["outcome"], again["text"]) == ("replayed", first["text"])
    done = pointer(server_stores, lab.chat)
    assert (done.state, done.claim_count, finished_by(server_stores, lab.chat)) == (
        RequestState.DONE,
        1,
        "B",
    )
    # And the outbox holds one case upsert and exactly one volunteer task, without
    # anything from today's call in it
    records = recorded(server_aws, lab.chat)
    tasks = [r for r in records if "to" in r]
    assert [r for r in records if "case" in r] == [{"case": "r01", "state": "escalated"}]
    assert tasks == [
        {
            "to": "vol-tom",
            "message": volunteer_message(RESIDENTS["r01"], VOLUNTEERS["vol-tom"]),
            "by": "alice",
        }
    ]
