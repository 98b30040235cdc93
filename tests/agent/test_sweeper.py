"""The expiry sweeper: each kind's timeout policy, applied once."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from interlock.adapters.factory import Stores
from interlock.config import assemble
from interlock.records import RequestState
from interlock.resume import resume_turn
from interlock.sweeper import sweep
from interlock.timing import CLOCK_SKEW_MS, ManualClock
from interlock.turns import Caller, Runtime, run_turn
from tests.agent.support import as_recorded


def overdue(rt: Runtime, caller: Caller, chat: str, prompt: str, clock: ManualClock) -> Any:
    paused = run_turn(rt, caller, chat, prompt)
    assert paused.outcome == "interrupted"
    return paused


def test_an_unanswered_approval_is_denied_and_the_agent_told(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    overdue(runtime, alice, "c1", "download the table", clock)
    clock.advance(seconds=runtime.stores.policy.request_ttl_s, ms=CLOCK_SKEW_MS)

    report = sweep(runtime, clock.now_ms())

    assert (report.found, report.timed_out) == (1, 1)
    request = stores.requests.get("c1", clock.now_ms())
    assert (request.state, request.decision) == (RequestState.DONE, "timed_out")
    turns = stores.chats.turns("c1")
    assert "Nobody answered the request for sites data.example.org in time" in turns[-1]["text"]
    types = [e.type for e in stores.chats.events("c1")]
    assert types[types.index("paused") + 1 :] == ["timed_out", "turn_completed"]
    assert sweep(runtime, clock.now_ms()).found == 0, "settled requests leave the index"


def test_a_question_times_out_to_its_default(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    overdue(runtime, alice, "c1", "write a summary", clock)
    clock.advance(seconds=runtime.stores.policy.request_ttl_s, ms=CLOCK_SKEW_MS)

    assert sweep(runtime, clock.now_ms()).defaulted == 1
    assert "the default applies" in stores.chats.turns("c1")[-1]["text"]


def rerouted(runtime: Runtime, alice: Caller, prompt: str, clock: ManualClock) -> Runtime:
    """A runtime whose approvals reroute to supervisors, and one such request rerouted."""
    rt = replace(
        runtime,
        config=assemble(
            {}, {"timeouts": {"approval": {"action": "reroute", "reroute_role": "supervisor"}}}
        ),
    )
    overdue(rt, alice, "c1", prompt, clock)
    clock.advance(seconds=rt.stores.policy.request_ttl_s, ms=CLOCK_SKEW_MS)
    assert sweep(rt, clock.now_ms()).rerouted == 1
    return rt


def test_a_request_is_rerouted_once_then_timed_out(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    config = assemble(
        {},
        {
            "timeouts": {
                "approval": {
                    "action": "reroute",
                    "reroute_role": "supervisor",
                    "reroute_extra_s": 600,
                }
            }
        },
    )
    rt = replace(runtime, config=config)
    overdue(rt, alice, "c1", "download the table", clock)
    clock.advance(seconds=rt.stores.policy.request_ttl_s, ms=CLOCK_SKEW_MS)

    assert sweep(rt, clock.now_ms()).rerouted == 1
    request = stores.requests.get("c1", clock.now_ms())
    assert request.route_role == "supervisor" and request.state is RequestState.PENDING
    assert not request.is_past_expiry(clock.now_ms())

    clock.advance(seconds=601, ms=CLOCK_SKEW_MS)
    assert sweep(rt, clock.now_ms()).timed_out == 1, "rerouted only once"


def test_an_operator_of_the_routed_role_can_answer(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    from interlock import manage

    rt = rerouted(runtime, alice, "download the table", clock)
    bob = Caller("bob", frozenset({"supervisor"}))

    opened = manage.open_request(stores, bob, "c1", clock.now_ms())
    done = resume_turn(
        rt,
        bob,
        "c1",
        interrupt_id=opened.request.interrupt_id,
        secret=opened.secret or "",
        status="resolved",
        payload={"decision": "approve"},
    )

    assert done.outcome == "completed"
    rows = stores.approvals.for_user("c1", "alice", clock.now_ms())
    assert [r.subject.name for r in rows] == ["data.example.org"], "granted to the owner"
    decision = next(e for e in stores.chats.events("c1") if e.type == "decision")
    assert decision.actor == "bob"


def test_a_live_claim_is_not_swept(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = overdue(runtime, alice, "c1", "download the table", clock)
    request = stores.requests.get("c1", clock.now_ms())
    clock.advance(seconds=runtime.stores.policy.request_ttl_s - 1)
    stores.requests.claim(request, paused.offer.secret, "busy", clock.now_ms())
    clock.advance(seconds=2, ms=CLOCK_SKEW_MS)  # overdue by every clock, its lease still live

    report = sweep(runtime, clock.now_ms())

    assert (report.found, report.skipped) == (1, 1)
    assert stores.requests.get("c1", clock.now_ms()).worker == "busy"


def test_one_request_that_cannot_be_settled_does_not_stop_the_sweep(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    # Given two overdue requests, one whose snapshot is gone
    broken = overdue(runtime, alice, "c-broken", "download the table", clock)
    overdue(runtime, alice, "c-fine", "download the table", clock)
    aws["s3"].delete_object(Bucket=aws["bucket"], Key=broken.offer.request.snapshot_key)
    clock.advance(seconds=runtime.stores.policy.request_ttl_s, ms=CLOCK_SKEW_MS)

    # When the sweeper runs, and keeps running every time the lease lapses
    first = sweep(runtime, clock.now_ms())

    # Then the healthy request is settled, the broken one fails without stopping it
    assert (first.timed_out, first.failed) == (1, 1)
    for _ in range(stores.policy.max_claims):
        clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS)
        sweep(runtime, clock.now_ms())
    ended = stores.requests.get("c-broken", clock.now_ms())
    assert ended.state is RequestState.EXPIRED, "given up after the claim cap"
    assert sweep(runtime, clock.now_ms()).found == 0


def test_an_operator_may_answer_a_rerouted_request_but_not_cancel_it(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:

    from interlock import errors, manage

    rerouted(runtime, alice, "download the table", clock)

    with pytest.raises(errors.Forbidden, match="only the chat's user"):
        manage.cancel_request(
            stores, Caller("bob", frozenset({"supervisor"})), "c1", clock.now_ms()
        )
    assert manage.cancel_request(stores, alice, "c1", clock.now_ms()).state is (
        RequestState.CANCELLED
    )


def test_an_operator_approves_a_rerouted_action_with_the_owners_roles(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    from interlock import manage

    rt = rerouted(runtime, alice, "send the report", clock)
    bob = Caller("bob", frozenset({"supervisor"}))  # may answer, cannot send reports himself

    opened = manage.open_request(stores, bob, "c1", clock.now_ms())
    done = resume_turn(
        rt,
        bob,
        "c1",
        interrupt_id=opened.request.interrupt_id,
        secret=opened.secret or "",
        status="resolved",
        payload={"decision": "approve"},
    )

    assert done.outcome == "completed" and "Report sent" in (done.text or "")
    assert stores.outbox.get(f"c1#{opened.request.card['tool_use_id']}") is not None


def test_a_sweeper_losing_the_race_at_the_claim_cap_skips_instead_of_failing(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    from interlock.sweeper import settle_overdue

    paused = overdue(runtime, alice, "c1", "download the table", clock)
    request = stores.requests.get("c1", clock.now_ms())
    for n in range(stores.policy.max_claims):
        request = stores.requests.claim(request, paused.offer.secret, f"w{n}", clock.now_ms())
        clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS)
    clock.advance(seconds=stores.policy.request_ttl_s, ms=CLOCK_SKEW_MS)
    stale = stores.requests.get("c1", clock.now_ms())
    stores.requests.expire(stale, "another sweeper got here first", clock.now_ms())

    slow = copy.copy(stores.requests)
    slow.get = lambda chat_id, now_ms: stale  # type: ignore[method-assign]
    late = replace(runtime, stores=replace(stores, requests=slow))
    assert settle_overdue(late, "c1", clock.now_ms()) == "skipped"


def test_rerouting_never_outlives_the_snapshot(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    overdue(runtime, alice, "c1", "download the table", clock)
    request = stores.requests.get("c1", clock.now_ms())
    clock.advance(seconds=stores.policy.latest_expiry_s() - 60)
    rerouted = stores.requests.reroute(request, "supervisor", 86_400, clock.now_ms())
    assert rerouted.expires_at == request.created_at + stores.policy.latest_expiry_s()


def test_a_request_abandoned_by_a_newer_turn_is_expired_not_run(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock, models: Any
) -> None:
    from interlock.turns import run_turn

    # Given an unanswered request past its expiry, and a new turn the user then started
    overdue(runtime, alice, "c1", "send the weekly report", clock)
    clock.advance(seconds=runtime.stores.policy.request_ttl_s + 1, ms=CLOCK_SKEW_MS)
    assert run_turn(runtime, alice, "c1", "hello").outcome == "completed"
    calls = models.calls

    # When the sweeper comes by
    report = sweep(runtime, clock.now_ms())

    # Then it expires the old request without running any of it
    assert report.superseded == 1 and report.timed_out == 0
    assert models.calls == calls
    request = stores.requests.get("c1", clock.now_ms())
    assert request is not None and request.state is RequestState.EXPIRED
    assert [t["role"] for t in stores.chats.turns("c1")][-2:] == ["user", "assistant"]


def _claimed_by_a_dead_worker(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock, chat: str
) -> Any:
    """A download card approved by alice, whose worker died right after its claim."""
    import json

    paused = overdue(runtime, alice, chat, "download the table", clock)
    request = stores.requests.get(chat, clock.now_ms())
    assert request is not None
    approve = as_recorded(request.card, {"decision": "approve"})
    answer = json.dumps({request.interrupt_id: approve}, separators=(",", ":"))
    return stores.requests.claim(
        request, paused.offer.secret, "dead", clock.now_ms(), ("approved", answer), by="alice"
    )


def test_a_claim_whose_worker_died_is_continued_with_its_answer_without_a_click(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    # Given an approve whose worker died right after its claim
    claim = _claimed_by_a_dead_worker(runtime, alice, stores, clock, "c1")
    policy = stores.policy

    # When the sweeper runs while the lease holds, and just after it ran out
    assert sweep(runtime, clock.now_ms()).found == 0
    clock.advance(ms=policy.lease_ms + 1)
    assert sweep(runtime, clock.now_ms()).recovered == 0, "a grace for the person first"

    # Then, once the grace ran out too (by every clock), it carries on with the recorded
    # answer, once
    clock.advance(ms=policy.recovery_grace_ms + CLOCK_SKEW_MS)
    report = sweep(runtime, clock.now_ms())
    assert (report.found, report.recovered) == (1, 1)
    done = stores.requests.get("c1", clock.now_ms())
    assert done is not None and (done.state, done.decision) == (RequestState.DONE, "approved")
    assert done.claim_count == claim.claim_count + 1
    assert stores.chats.turns("c1")[-1]["role"] == "assistant"
    rows = stores.approvals.for_user("c1", "alice", clock.now_ms())
    assert [r.subject.name for r in rows] == ["data.example.org"]
    recovered = [e for e in stores.chats.events("c1") if e.type == "recovered"]
    assert len(recovered) == 1 and recovered[0].detail["decision"] == "approved"
    assert sweep(runtime, clock.now_ms()).found == 0, "finished claims leave the lease index"


def test_a_claim_that_keeps_killing_its_workers_is_denied_by_the_recovery(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    # Given a claim already taken over up to the cap, its last worker dead too
    claim = _claimed_by_a_dead_worker(runtime, alice, stores, clock, "c1")
    for n in range(stores.policy.max_claims - 1):
        clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS + 1)
        current = stores.requests.get("c1", clock.now_ms())
        assert current is not None
        claim = stores.requests.claim_lapsed(current, f"dead-{n}", clock.now_ms())
    assert claim.claim_count == stores.policy.max_claims

    # When the recovery finds it
    clock.advance(ms=stores.policy.lease_ms + stores.policy.recovery_grace_ms + CLOCK_SKEW_MS + 1)
    report = sweep(runtime, clock.now_ms())

    # Then it is ended, not retried forever, and nothing stays granted
    assert report.failed == 1
    ended = stores.requests.get("c1", clock.now_ms())
    assert ended is not None and ended.state is RequestState.EXPIRED
    assert stores.approvals.for_user("c1", "alice", clock.now_ms()) == []


def test_a_cancel_after_the_stated_expiry_is_refused_and_the_timeout_policy_runs(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    from interlock import errors, manage

    # Given an approval nobody answered before its stated expiry
    overdue(runtime, alice, "c1", "download the table", clock)
    clock.advance(seconds=runtime.stores.policy.request_ttl_s)

    # When its person cancels it, late
    with pytest.raises(errors.RequestExpired, match="timeout policy"):
        manage.cancel_request(stores, alice, "c1", clock.now_ms())

    # Then the sweeper settles it by its policy (once past its expiry by every clock),
    # and the trail says so, not "cancelled"
    clock.advance(ms=CLOCK_SKEW_MS)
    assert sweep(runtime, clock.now_ms()).timed_out == 1
    events = [e.type for e in stores.chats.events("c1", after=0, limit=50)]
    assert "cancelled" not in events and "timed_out" in events
