"""The fencing rule, turn admission and the journal, store by store.

A write fenced by a claim lands only while that claim (lease token and claim count) is
on the pointer; by a turn, only while the chat's running-turn token is. A lost fence is
`LeaseLost` and nothing of the transaction is written.
"""

from __future__ import annotations

from typing import Any

import pytest

from interlock import errors
from interlock.outcomes import Offer
from interlock.pause import persist_pause
from interlock.ports import Stores
from interlock.records import ChatMeta, RequestState, Subject, TurnFence
from interlock.timing import CLOCK_SKEW_MS, ManualClock
from tests.turns import append_turn

CHAT = "c-fence"
SITE = Subject("site", "data.example.org")


def _opened(
    stores: Stores,
    clock: ManualClock,
    chat: str = CHAT,
    fence: TurnFence | None = None,
    turn_seq: int = 1,
) -> Offer:
    """A download approval opened in `chat` (by the turn holding `fence`, if given)."""
    return persist_pause(
        stores,
        chat_id=chat,
        user_id="alice",
        interrupt_id="v1:tool_call:t1:a",
        kind="approval",
        card={"card_id": "card-1", "type": "download", "sites": [SITE.name]},
        snapshot={"messages": []},
        turn_seq=turn_seq,
        now_ms=clock.now_ms(),
        fence=fence,
    )


def _admitted_on_a_settled_read(
    stores: Stores, clock: ManualClock, seen: ChatMeta, user: str = "alice"
) -> Any:
    """A turn admitted on `seen`, read as if it found no open request."""
    turn = {"role": "user", "text": "next"}
    return stores.turns.admit(seen, user, turn, clock.now_ms(), 60_000, request_settled=True)


def _claimed(stores: Stores, clock: ManualClock, worker: str = "w1") -> Any:
    opened = _opened(stores, clock)
    return stores.requests.claim(
        opened.request,
        opened.secret,
        worker,
        clock.now_ms(),
        answer=("approved", '{"decision":"approve"}'),
    ), opened


def _taken_over(
    stores: Stores,
    clock: ManualClock,
    opened: Offer,
    answer: tuple[str, str] = ("approved", '{"decision":"approve"}'),
) -> Any:
    clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS + 1)
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None
    return stores.requests.claim(current, opened.secret, "w2", clock.now_ms(), answer=answer)


def test_the_first_claim_records_the_answer_and_a_takeover_with_it_keeps_it(
    stores: Stores, clock: ManualClock
) -> None:
    first, opened = _claimed(stores, clock)
    assert (first.decision, first.response) == ("approved", '{"decision":"approve"}')
    stores.requests.record_step(first, 0, '{"k":"model","events":[]}', acting=False)

    second = _taken_over(stores, clock, opened)

    assert (second.decision, second.response) == ("approved", '{"decision":"approve"}')
    assert stores.requests.steps(second) == ['{"k":"model","events":[]}'], "the journal carries on"
    assert (second.claim_count, second.worker) == (2, "w2")
    assert second.fence != first.fence


def test_a_takeover_with_another_answer_replaces_one_nothing_acted_on(
    stores: Stores, clock: ManualClock
) -> None:
    # Given an approve whose run journaled a model response, but started nothing
    first, opened = _claimed(stores, clock)
    stores.requests.record_step(first, 0, '{"k":"model","events":[]}', acting=False)

    # When a Deny comes once the lease lapsed
    second = _taken_over(stores, clock, opened, answer=("rejected", '{"decision":"reject"}'))

    # Then the Deny is what the run continues with, and the approve's steps are gone
    assert (second.decision, second.response) == ("rejected", '{"decision":"reject"}')
    assert stores.requests.steps(second) == [] and not second.acted_on
    stored = stores.requests.get(CHAT, clock.now_ms())
    assert stored is not None and stored.decision == "rejected"
    assert stores.requests.steps(stored) == []
    assert stored.decided_by == "api" and stored.decided_at_ms == clock.now_ms()


def test_a_takeover_with_another_answer_is_refused_once_the_answer_was_acted_on(
    stores: Stores, clock: ManualClock
) -> None:
    # Given an approve whose run called a tool (the step marked it acted on)
    first, opened = _claimed(stores, clock)
    stores.requests.record_step(first, 0, '{"k":"model","events":[]}', acting=True)
    before = stores.requests.get(CHAT, clock.now_ms())

    # When a Deny comes once the lease lapsed
    with pytest.raises(errors.DecisionBinding, match="Approved by") as refused:
        _taken_over(stores, clock, opened, answer=("rejected", '{"decision":"reject"}'))

    # Then it is refused naming the binding approve, and nothing changed
    assert refused.value.current.decision == "approved"
    assert stores.requests.get(CHAT, clock.now_ms()) == before


def test_an_old_claim_can_write_nothing(stores: Stores, clock: ManualClock) -> None:
    old, opened = _claimed(stores, clock)
    new = _taken_over(stores, clock, opened)

    with pytest.raises(errors.LeaseLost):
        stores.outbox.put_once(f"{CHAT}#t9", {"to": "x"}, clock.now_ms(), fence=old.fence)
    with pytest.raises(errors.LeaseLost):
        stores.approvals.grant(CHAT, "alice", [SITE], "card-1", clock.now_ms(), fence=old.fence)
    with pytest.raises(errors.LeaseLost):
        stores.requests.record_step(old, 0, '{"k":"model","events":[]}', acting=False)
    with pytest.raises(errors.LeaseLost):
        stores.requests.release(old, clock.now_ms(), reset=True)
    with pytest.raises(errors.LeaseLost):
        stores.requests.end_claimed(old, "gone")

    assert stores.outbox.get(f"{CHAT}#t9") is None
    assert stores.approvals.for_user(CHAT, "alice", clock.now_ms()) == []
    assert stores.requests.get(CHAT, clock.now_ms()) == new


def test_the_holder_writes_and_an_effect_marks_the_request_acted(
    stores: Stores, clock: ManualClock
) -> None:
    claim, _ = _claimed(stores, clock)

    stores.requests.record_step(claim, 0, '{"k":"tool","id":"t1","result":{}}', acting=False)
    assert stores.outbox.put_once(f"{CHAT}#t2", {"to": "x"}, clock.now_ms(), fence=claim.fence)
    assert not stores.outbox.put_once(f"{CHAT}#t2", {"to": "y"}, clock.now_ms(), fence=claim.fence)
    stores.approvals.grant(CHAT, "alice", [SITE], "card-1", clock.now_ms(), fence=claim.fence)

    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None
    assert stores.requests.steps(current) == ['{"k":"tool","id":"t1","result":{}}']
    assert current.acted and current.fence == claim.fence
    assert stores.outbox.get(f"{CHAT}#t2") == {"to": "x"}
    assert stores.approvals.withdraw_card(CHAT, "alice", "card-1", fence=claim.fence) == 1


def test_a_release_resets_only_what_was_not_acted_on(stores: Stores, clock: ManualClock) -> None:
    claim, opened = _claimed(stores, clock)
    stores.approvals.grant(CHAT, "alice", [SITE], "card-1", clock.now_ms(), fence=claim.fence)
    grants = stores.approvals.withdraw_entries(CHAT, "alice", "card-1")

    # Nothing recorded yet: pending again, uncounted, the answer forgotten, grants gone
    reset = stores.requests.release(claim, clock.now_ms(), reset=True, also=grants)
    assert (reset.state, reset.claim_count) == (RequestState.PENDING, 0)
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None and (current.decision, current.response) == (None, None)
    assert reset == current, "the release returns the record as it stored it"
    assert stores.approvals.for_user(CHAT, "alice", clock.now_ms()) == []

    # A model response recorded, and nothing started on it: still reset
    again = stores.requests.claim(current, opened.secret, "w3", clock.now_ms(), ("approved", "{}"))
    stores.requests.record_step(again, 0, '{"k":"model","events":[]}', acting=False)
    reset = stores.requests.release(again, clock.now_ms(), reset=True)
    assert reset.state is RequestState.PENDING
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None and current.journal_id is None

    # A step that calls a tool recorded: the answer stands, only the lease is given back
    again = stores.requests.claim(current, opened.secret, "w3", clock.now_ms(), ("approved", "{}"))
    stores.requests.record_step(again, 0, '{"k":"model","events":[]}', acting=True)
    kept = stores.requests.release(again, clock.now_ms(), reset=True)
    assert (kept.state, kept.decision, kept.claim_count) == (RequestState.CLAIMED, "approved", 0)
    assert kept.lease_lapsed(clock.now_ms()) and kept.fence != again.fence


def test_a_request_acted_on_cannot_be_cancelled(stores: Stores, clock: ManualClock) -> None:
    claim, _ = _claimed(stores, clock)
    stores.outbox.put_once(f"{CHAT}#t2", {"to": "x"}, clock.now_ms(), fence=claim.fence)
    clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS + 1)
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None

    with pytest.raises(errors.InterlockError):
        stores.requests.cancel(current, "changed my mind", clock.now_ms())
    assert stores.requests.get(CHAT, clock.now_ms()).state is RequestState.CLAIMED  # type: ignore[union-attr]


def test_admission_lets_one_turn_run_and_saves_its_prompt(
    stores: Stores, clock: ManualClock
) -> None:
    seen = stores.chats.meta("c-turn")
    fence, seq = stores.turns.admit(
        seen, "alice", {"role": "user", "text": "hi"}, clock.now_ms(), 60_000
    )
    assert seq == 1

    # A second turn read the same chat: it is refused, whoever sends it
    with pytest.raises(errors.TurnRunning):
        stores.turns.admit(seen, "alice", {"role": "user", "text": "again"}, clock.now_ms(), 60_000)
    with pytest.raises(errors.Forbidden):
        stores.turns.admit(
            stores.chats.meta("c-turn"),
            "bob",
            {"role": "user", "text": "mine"},
            clock.now_ms(),
            60_000,
        )

    # The turn's answer releases the chat, in the same write
    assert (
        stores.turns.complete(fence, seq, {"role": "assistant", "text": "hello"}, clock.now_ms())
        == 2
    )
    meta = stores.chats.meta("c-turn")
    assert (meta.owner, meta.last_turn, meta.run_token) == ("alice", 2, None)
    assert [t["text"] for t in stores.chats.turns("c-turn")] == ["hi", "hello"]
    with pytest.raises(errors.LeaseLost):
        stores.turns.complete(fence, seq, {"role": "assistant", "text": "twice"}, clock.now_ms())


def test_a_dead_turns_lease_lapses_and_the_next_turn_takes_the_chat(
    stores: Stores, clock: ManualClock
) -> None:
    dead, _ = stores.turns.admit(
        ChatMeta("c-dead"), "alice", {"role": "user", "text": "a"}, clock.now_ms(), 1_000
    )
    clock.advance(ms=1_001 + CLOCK_SKEW_MS)  # its lease is over by every clock

    fence, seq = stores.turns.admit(
        stores.chats.meta("c-dead"), "alice", {"role": "user", "text": "b"}, clock.now_ms(), 1_000
    )

    assert seq == 2
    with pytest.raises(errors.LeaseLost):
        stores.turns.complete(dead, 1, {"role": "assistant", "text": "late"}, clock.now_ms())
    stores.turns.abandon(dead)  # a no-op: the chat is the new turn's
    assert stores.chats.meta("c-dead").run_token == fence.run_token


def test_admission_refuses_a_chat_with_an_open_request(stores: Stores, clock: ManualClock) -> None:
    _opened(stores, clock)

    with pytest.raises(errors.ChatBusy):
        stores.turns.admit(
            stores.chats.meta(CHAT), "alice", {"role": "user", "text": "x"}, clock.now_ms(), 1_000
        )
    assert stores.chats.turns(CHAT) == []


def test_a_settled_read_still_refuses_a_turn_admitted_after_it(
    stores: Stores, clock: ManualClock
) -> None:
    # The read found no request and no running turn, so the admission leaves the pointer
    # check out; a turn admitted (and paused) after that read still wins.
    seen = stores.chats.meta("c-settled")
    other, seq = stores.turns.admit(
        seen, "alice", {"role": "user", "text": "first"}, clock.now_ms(), 60_000
    )
    _opened(stores, clock, "c-settled", fence=other, turn_seq=seq)

    with pytest.raises(errors.TurnRunning):
        _admitted_on_a_settled_read(stores, clock, seen)
    assert [t["text"] for t in stores.chats.turns("c-settled")] == ["first"]


def test_a_settled_admission_still_tells_a_second_user_the_chat_is_not_theirs(
    stores: Stores, clock: ManualClock
) -> None:
    # With the pointer check left out, the chat's own refusal is the one read back.
    seen = stores.chats.meta("c-new")
    stores.turns.admit(seen, "alice", {"role": "user", "text": "mine"}, clock.now_ms(), 60_000)

    with pytest.raises(errors.Forbidden):
        _admitted_on_a_settled_read(stores, clock, seen, user="bob")


def test_a_turns_read_settles_only_an_absent_or_ended_pointer(
    stores: Stores, clock: ManualClock
) -> None:
    assert stores.requests.read_for_turn(CHAT, clock.now_ms())[2] is True
    opened = _opened(stores, clock)
    request, meta, settled = stores.requests.read_for_turn(CHAT, clock.now_ms())
    assert (request, meta.chat_id, settled) == (opened.request, CHAT, False)

    # Past its TTL a pointer reads as gone, yet one left open settles nothing
    clock.advance(seconds=opened.request.ttl - clock.now_ms() // 1000 + 1)
    assert stores.requests.read_for_turn(CHAT, clock.now_ms())[::2] == (None, False)

    stores.requests.expire(opened.request, "timed out", clock.now_ms())
    assert stores.requests.read_for_turn(CHAT, clock.now_ms())[2] is True


def test_a_read_that_saw_a_running_turn_keeps_the_pointer_check(
    stores: Stores, clock: ManualClock
) -> None:
    # A turn whose lease lapsed may still pause after the next turn's read: that read
    # settles nothing, and the admission checks the pointer itself.
    dead, seq = stores.turns.admit(
        ChatMeta("c-zombie"), "alice", {"role": "user", "text": "slow"}, clock.now_ms(), 1_000
    )
    clock.advance(ms=1_001 + CLOCK_SKEW_MS)
    seen = stores.chats.meta("c-zombie")
    _opened(stores, clock, "c-zombie", fence=dead, turn_seq=seq)

    with pytest.raises(errors.ChatBusy):
        _admitted_on_a_settled_read(stores, clock, seen)
    assert [t["text"] for t in stores.chats.turns("c-zombie")] == ["slow"]


def test_finish_commits_the_answer_and_its_turn_together(
    stores: Stores, clock: ManualClock
) -> None:
    claim, _ = _claimed(stores, clock)
    turn = {"role": "assistant", "text": "done"}

    # The transcript moved on since the card: nothing of the finish is written
    append_turn(stores, CHAT, {"role": "user", "text": "one"}, clock.now_ms())
    append_turn(stores, CHAT, {"role": "user", "text": "two"}, clock.now_ms())
    with pytest.raises(errors.StoreError):
        stores.requests.finish(
            claim,
            answer_key="k",
            decision="approved",
            now_ms=clock.now_ms(),
            also=stores.turns.answer_entries(CHAT, claim.turn_seq, turn, clock.now_ms()),
        )
    assert stores.requests.get(CHAT, clock.now_ms()).state is RequestState.CLAIMED  # type: ignore[union-attr]
    assert [t["text"] for t in stores.chats.turns(CHAT)] == ["one", "two"]


def test_a_tool_audit_event_is_written_only_while_its_claim_holds(
    stores: Stores, clock: ManualClock
) -> None:
    old, opened = _claimed(stores, clock)
    stores.chats.record(CHAT, "tool_used", "alice", clock.now_ms(), fence=old.fence)
    _taken_over(stores, clock, opened)

    with pytest.raises(errors.LeaseLost):
        stores.chats.record(CHAT, "tool_used", "alice", clock.now_ms(), fence=old.fence)

    assert [e.type for e in stores.chats.events(CHAT)] == ["tool_used"]


def test_an_expiry_withdraws_a_dead_claims_grants_with_it_or_not_at_all(
    stores: Stores, clock: ManualClock
) -> None:
    # Given a claim that granted the card's site, still live
    claim, _ = _claimed(stores, clock)
    stores.approvals.grant(CHAT, "alice", [SITE], "card-1", clock.now_ms(), fence=claim.fence)
    withdrawal = stores.approvals.withdraw_entries(CHAT, "alice", "card-1")

    # When an expiry with the withdrawal is refused (the claim is live), nothing changes
    with pytest.raises(errors.ResumeInProgress):
        stores.requests.expire(claim, "a check failed", clock.now_ms(), also=withdrawal)
    assert [a.subject for a in stores.approvals.for_user(CHAT, "alice", clock.now_ms())] == [SITE]

    # And once the claim lapsed, the expiry and the withdrawal land together
    clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS + 1)
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None
    ended = stores.requests.expire(current, "a check failed", clock.now_ms(), also=withdrawal)
    assert ended.state is RequestState.EXPIRED
    assert stores.approvals.for_user(CHAT, "alice", clock.now_ms()) == []


def test_a_step_over_the_inline_size_is_an_object_of_its_writers_own(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    from interlock import steps

    # Given a worker whose lease lapsed before it recorded its first step, and the
    # takeover that recorded that step: a tool result over the inline size (so in S3)
    first, opened = _claimed(stores, clock)
    second = _taken_over(stores, clock, opened)
    big = '{"k":"tool","id":"t1","result":"' + "x" * stores.policy.inline_bytes + '"}'
    steps.recorder(stores, second)(0, big, False)

    # When the first worker, still running, records its own step 0
    with pytest.raises(errors.LeaseLost):
        steps.recorder(stores, first)(0, big.replace("x", "y"), False)

    # Then its object (put before its fenced item was refused) went beside the winner's,
    # not over it: a later takeover reads the winner's step back whole
    third = _taken_over(stores, clock, opened)
    assert steps.recorded(stores, third) == [big]
    listed = aws["s3"].list_objects_v2(Bucket=aws["bucket"], Prefix="steps/")["Contents"]
    names = sorted(o["Key"] for o in listed)
    assert len(names) == 2
    assert {t for t in (first.fence.lease_token, second.fence.lease_token) for n in names if t in n}


def test_a_step_object_that_is_not_the_one_recorded_stops_the_takeover(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    from interlock import steps

    first, opened = _claimed(stores, clock)
    big = '{"k":"tool","id":"t1","result":"' + "x" * stores.policy.inline_bytes + '"}'
    steps.recorder(stores, first)(0, big, False)
    (found,) = aws["s3"].list_objects_v2(Bucket=aws["bucket"], Prefix="steps/")["Contents"]
    aws["s3"].put_object(Bucket=aws["bucket"], Key=found["Key"], Body=b"not the step")

    second = _taken_over(stores, clock, opened)
    with pytest.raises(errors.StoreError, match="not the one recorded"):
        steps.recorded(stores, second)


def test_a_step_of_the_inline_size_stays_in_its_item(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    from interlock import steps

    first, opened = _claimed(stores, clock)
    wrapper = '{"k":"tool","id":"t1","result":""}'
    small = wrapper[:-2] + "x" * (stores.policy.inline_bytes - len(wrapper)) + '"}'
    assert len(small.encode()) == stores.policy.inline_bytes
    steps.recorder(stores, first)(0, small, False)

    assert "Contents" not in aws["s3"].list_objects_v2(Bucket=aws["bucket"], Prefix="steps/")
    assert steps.recorded(stores, _taken_over(stores, clock, opened)) == [small]
