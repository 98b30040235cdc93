"""Executed = decided, across real processes: the answer a person gives last is the one
that runs until something was acted on; after that the recorded one binds, and every
surface says so. A worker that died right after its claim is continued by the system.

Each worker is its own interpreter (`half.py`) on a moto server on 127.0.0.1; B claims
the person's approve and is SIGKILLed at the point named by `--hang`. The later answers
come through each surface's own entry point: the card page's (read the request, which
rotates its secret, then resume), a Slack tap (`respond.apply_tap`, as the channels
function hands it over) and an AG-UI resume (the interrupt's own secret).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from interlock import errors, manage
from interlock.adapters.factory import Stores, build_stores
from interlock.answers import Reply
from interlock.api.views import request_view
from interlock.channels import REJECT, Link, Tap, fingerprint
from interlock.records import RequestState
from interlock.respond import apply_tap
from interlock.resume import resume_replies, resume_turn
from interlock.sweeper import sweep
from interlock.timing import CLOCK_SKEW_MS, StorePolicy, SystemClock
from tests.e2e.support import ALICE, REPORT_AT_GATE, TIMEOUT_S, outbox_records, pointer, runtime
from tests.e2e.test_processes import CRASH_LEASE, Lab, wait_for_lapse

pytestmark = pytest.mark.server

DENY = {"decision": "reject"}
LEASE_MS = int(CRASH_LEASE[1])


@pytest.fixture
def lab(server_aws: dict[str, Any], tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(server_aws, tmp_path, chat="decided-chat")
    try:
        yield lab
    finally:
        lab.kill_all()


def _crashed(lab: Lab, stores: Stores, hang: str) -> dict[str, Any]:
    """A paused report, approved by B, which died at `hang`; its lease has lapsed."""
    offer = lab.pause(REPORT_AT_GATE, *CRASH_LEASE)
    b = lab.start("resume", "B", "--hang", hang, *CRASH_LEASE)
    lab.wait_until_hung(b, "B")
    b.kill()
    b.wait(timeout=TIMEOUT_S)
    wait_for_lapse(stores, lab.chat)
    held = pointer(stores, lab.chat)
    assert (held.state, held.decision, held.decided_by) == (
        RequestState.CLAIMED,
        "approved",
        "alice",
    )
    return offer


def _deny(surface: str, stores: Stores, chat: str, offer: dict[str, Any]) -> str:
    """Deny through `surface`; what the person is told."""
    rt = runtime(stores, f"deny-{surface}")
    now = SystemClock().now_ms()
    if surface == "page":
        opened = manage.open_request(stores, ALICE, chat, now)
        view = request_view(opened.request, now, opened.secret)
        # The page offers the buttons again, and says the approve was not acted on
        assert view["secret"] and view["binding"] is False and view["interrupted"] is True
        done = resume_turn(
            rt,
            ALICE,
            chat,
            interrupt_id=view["interruptId"],
            secret=view["secret"],
            status="resolved",
            payload=DENY,
        )
        return f"{done.outcome}:{done.decision}"
    if surface == "slack":
        stores.channels.link(Link("slack", "U1ALICE", "alice", ALICE.roles), "admin", now)
        tap = Tap("slack", "U1ALICE", chat, fingerprint(offer["interrupt_id"]), "resolved", None)
        return apply_tap(rt, replace(tap, choice=REJECT)).text
    replies = [Reply(offer["interrupt_id"], "resolved", DENY)]
    done = resume_replies(rt, ALICE, chat, secret=offer["secret"], replies=replies)
    return f"{done.outcome}:{done.decision}"


@pytest.mark.parametrize("surface", ["page", "slack", "agui"])
def test_a_deny_after_a_crash_that_acted_on_nothing_is_what_runs(
    lab: Lab, server_stores: Stores, server_aws: dict[str, Any], surface: str
) -> None:
    # Given an approve recorded by a worker killed before it acted on anything
    offer = _crashed(lab, server_stores, "claimed")

    # When the person denies through this surface
    told = _deny(surface, server_stores, lab.chat, offer)

    # Then the run continued on the Deny: nothing was sent, and everyone says Denied
    assert told in ("completed:rejected", "Thanks: Denied.")
    request = pointer(server_stores, lab.chat)
    assert (request.state, request.decision) == (RequestState.DONE, "rejected")
    assert outbox_records(server_aws) == []
    view = request_view(request, SystemClock().now_ms(), None)
    assert view["decision"] == "rejected" and view["decided"].startswith("Denied by alice")
    decisions = [e.detail for e in server_stores.chats.events(lab.chat) if e.type == "decision"]
    assert [d["decision"] for d in decisions] == ["approved", "rejected"]
    assert decisions[-1]["replaced"] == "approved" and decisions[-1]["takeover"] is True
    # And the agent was told of the denial: its last word reports no send
    last = server_stores.chats.turns(lab.chat)[-1]["text"]
    assert last.startswith("Report step finished") and "Report sent" not in last


def test_a_deny_after_the_approve_was_acted_on_is_refused_naming_it(
    lab: Lab, server_stores: Stores, server_aws: dict[str, Any]
) -> None:
    # Given an approve whose report was reserved in the outbox before its worker died
    offer = _crashed(lab, server_stores, "outbox")
    before = pointer(server_stores, lab.chat)
    assert before.acted_on

    # When the person denies, from the page and from Slack
    rt = runtime(server_stores, "late")
    with pytest.raises(errors.DecisionBinding, match="Approved by alice at") as refused:
        resume_replies(
            rt,
            ALICE,
            lab.chat,
            secret=offer["secret"],
            replies=[Reply(offer["interrupt_id"], "resolved", DENY)],
        )
    told = _deny("slack", server_stores, lab.chat, offer)

    # Then both are refused with the binding approve named, and nothing changed
    assert refused.value.code == "decision_binding"
    assert told.startswith("Already decided: Approved by alice")
    assert pointer(server_stores, lab.chat) == before
    # And the page shows it decided, continuing, with no buttons to press
    view = request_view(before, SystemClock().now_ms(), None)
    assert view["binding"] is True and view["decided"].startswith("Approved by alice")
    assert len(outbox_records(server_aws)) == 1


def test_a_worker_killed_right_after_its_claim_is_continued_without_a_click(
    lab: Lab, server_stores: Stores, server_aws: dict[str, Any]
) -> None:
    # Given an approve whose worker died right after its claim
    _crashed(lab, server_stores, "claimed")
    held = pointer(server_stores, lab.chat)
    assert held.lease_expires_at_ms is not None
    view = request_view(held, SystemClock().now_ms(), None)
    assert view["interrupted"] is True and view["decided"].startswith("Approved by alice")

    # When nobody clicks, and the system's sweep runs every 200 ms
    grace_ms = 500
    policy = StorePolicy(lease_ms=LEASE_MS, recovery_grace_ms=grace_ms)
    aws = server_aws
    stores = build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"], policy)
    rt = runtime(stores, "sweeper")
    deadline = time.monotonic() + TIMEOUT_S
    recovered = 0
    while pointer(stores, lab.chat).state is not RequestState.DONE:
        assert time.monotonic() < deadline, "never recovered"
        recovered += sweep(rt, SystemClock().now_ms()).recovered
        time.sleep(0.2)
    done_ms = SystemClock().now_ms()

    # Then it was continued once, with the person's approve, within the bound
    assert recovered == 1
    request = pointer(stores, lab.chat)
    assert request.decision == "approved"
    assert len(outbox_records(server_aws)) == 1, "the report went out once"
    # A lease, the grace and the clock margin, a sweep, a run
    bound_ms = LEASE_MS + grace_ms + CLOCK_SKEW_MS + 200 + 5_000
    assert done_ms - held.lease_expires_at_ms <= bound_ms
    assert any(e.type == "recovered" for e in stores.chats.events(lab.chat))
