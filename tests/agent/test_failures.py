"""Failures after a claim release the request cleanly instead of stranding it.

- an unusable snapshot (missing, corrupt, modified, incompatible) settles the request as
  expired with the reason, withdraws what the answer granted and frees the chat;
- any other failure gives the claim back without counting it: answerable afresh when
  nothing was acted on yet, or continued with the recorded answer when something was,
  which then binds (another answer is refused with `decision_binding`, naming it).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest

from examples.analyst.script import DEMO_SCENARIOS
from interlock import errors, keys
from interlock.api.errors import STATUS
from interlock.manage import cancel_request
from interlock.ports import Stores
from interlock.records import RequestRecord, RequestState, Subject
from interlock.resume import resume_turn
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, run_turn
from tests.agent.support import Models, Transport
from tests.faults.wrapper import Faulty

CHAT = "chat-f"
SITE = Subject("site", "data.example.org")
APPROVE = {"decision": "approve"}


class Flaky(Models):
    """The demo models, except that a model call fails while `failing` is set (after
    `failing_after` more calls went through)."""

    def __init__(self) -> None:
        super().__init__(DEMO_SCENARIOS)
        self.failing = False
        self.failing_after = 0

    def __call__(self) -> Any:
        model = super().__call__()
        stream = model.stream

        async def failing_stream(*args: Any, **kwargs: Any) -> Any:
            if self.failing and self.failing_after:
                self.failing_after -= 1
            elif self.failing:
                raise RuntimeError("the model service is down")
            async for event in stream(*args, **kwargs):
                yield event

        model.stream = failing_stream  # type: ignore[method-assign]
        return model


@pytest.fixture
def flaky() -> Flaky:
    return Flaky()


@pytest.fixture
def rt(stores: Stores, clock: ManualClock, transport: Transport, flaky: Flaky) -> Runtime:
    from interlock.turns import TurnLimits

    return Runtime(
        stores,
        flaky,
        clock=clock,
        fetch=transport,
        limits=TurnLimits(heartbeat_s=60),
        worker_id="w",
    )


def _pause(rt: Runtime, alice: Caller, prompt: str) -> tuple[str, str]:
    result = run_turn(rt, alice, CHAT, prompt)
    assert result.offer is not None
    return result.offer.request.interrupt_id, result.offer.secret


def _answer(
    rt: Runtime, alice: Caller, interrupt_id: str, secret: str, payload: Any = APPROVE
) -> Any:
    return resume_turn(
        rt,
        alice,
        CHAT,
        interrupt_id=interrupt_id,
        secret=secret,
        status="resolved",
        payload=payload,
    )


def _item_key() -> dict[str, Any]:
    return {"pk": {"S": f"CHAT#{CHAT}"}, "sk": {"S": "REQUEST"}}


def _rewrite(aws: dict[str, Any], request: RequestRecord, body: bytes) -> None:
    """Replace the stored snapshot's bytes."""
    aws["s3"].put_object(Bucket=aws["bucket"], Key=request.snapshot_key, Body=body)


def _gzip(value: Any) -> bytes:
    return gzip.compress(json.dumps(value).encode(), mtime=0)


def _corrupt(aws: dict[str, Any], request: RequestRecord) -> None:
    _rewrite(aws, request, b"\x1f\x8b not really gzip")


def _modified(aws: dict[str, Any], request: RequestRecord) -> None:
    _rewrite(aws, request, _gzip({"interlock_schema": 1, "strands": {"tampered": True}}))


def _missing(aws: dict[str, Any], request: RequestRecord) -> None:
    aws["s3"].delete_object(Bucket=aws["bucket"], Key=request.snapshot_key)


def _incompatible(aws: dict[str, Any], request: RequestRecord) -> None:
    # A snapshot of another schema, recorded as the pointer's own (digest and all).
    body = _gzip({"interlock_schema": 99, "strands": {}})
    _rewrite(aws, request, body)
    aws["dynamodb"].update_item(
        TableName=aws["table"],
        Key=_item_key(),
        UpdateExpression="SET snapshot_digest = :d",
        ExpressionAttributeValues={":d": {"S": hashlib.sha256(body).hexdigest()}},
    )


SPOILERS = {
    "corrupt": (_corrupt, errors.SnapshotLost),
    "modified": (_modified, errors.SnapshotLost),
    "missing": (_missing, errors.SnapshotLost),
    "incompatible": (_incompatible, errors.IncompatibleSnapshot),
}


@pytest.mark.parametrize("spoil", SPOILERS, ids=list(SPOILERS))
def test_an_unusable_snapshot_settles_the_request_with_a_clear_error(
    rt: Runtime,
    alice: Caller,
    stores: Stores,
    clock: ManualClock,
    aws: dict[str, Any],
    spoil: str,
) -> None:
    # Given a paused download whose snapshot is then spoiled, where it is kept
    interrupt_id, secret = _pause(rt, alice, "please download the table")
    request = stores.requests.get(CHAT, clock.now_ms())
    assert request is not None
    assert request.snapshot_key is not None
    spoiler, error = SPOILERS[spoil]
    spoiler(aws, request)

    # When the person approves
    with pytest.raises(error) as refused:
        _answer(rt, alice, interrupt_id, secret)

    # Then it is a 410 with the reason, the request is settled and nothing stays granted
    assert STATUS[refused.value.code] == 410
    ended = stores.requests.get(CHAT, clock.now_ms())
    assert ended is not None and ended.state is RequestState.EXPIRED
    assert ended.ended_reason == str(refused.value)
    assert stores.approvals.for_user(CHAT, "alice", clock.now_ms()) == []
    assert not stores.requests.get(CHAT, clock.now_ms()).blocks_new_request(clock.now_ms())  # type: ignore[union-attr]
    # And the chat goes on: a new turn is admitted
    assert run_turn(rt, alice, CHAT, "hello").outcome == "completed"


def test_a_failure_before_anything_was_acted_on_makes_the_request_answerable_again(
    rt: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    # Given a paused download, and a bucket that fails every read of the snapshot
    interrupt_id, secret = _pause(rt, alice, "please download the table")
    broken = replace(rt, stores=replace(stores, blobs=Faulty(stores.blobs, fail={"read_snapshot"})))

    # When the person approves, more times than the claim cap allows
    for _ in range(stores.policy.max_claims + 1):
        with pytest.raises(errors.RunFailed) as failed:
            _answer(broken, alice, interrupt_id, secret)
        assert STATUS[failed.value.code] == 503

        # Then each time the request is pending again, uncounted, its grant withdrawn
        request = stores.requests.get(CHAT, clock.now_ms())
        assert request is not None
        assert (request.state, request.claim_count, request.decision) == (
            RequestState.PENDING,
            0,
            None,
        )
        assert stores.approvals.for_user(CHAT, "alice", clock.now_ms()) == []

    # And once the bucket is back, a different answer is still possible
    done = _answer(rt, alice, interrupt_id, secret, {"decision": "reject"})
    assert (done.outcome, done.decision) == ("completed", "rejected")


def test_a_run_that_keeps_failing_before_it_acts_is_given_up_at_the_cap(
    rt: Runtime, alice: Caller, stores: Stores, clock: ManualClock, flaky: Flaky
) -> None:
    # Given an approved download whose model fails every time right after the answer
    interrupt_id, secret = _pause(rt, alice, "please download the table")
    flaky.failing = True

    # When the person answers again and again: each failure resets the request (nothing
    # was acted on), and each one counts
    for failures in range(1, stores.policy.max_failures + 1):
        with pytest.raises(errors.RunFailed):
            _answer(rt, alice, interrupt_id, secret)
        request = stores.requests.get(CHAT, clock.now_ms())
        assert request is not None
        assert (request.state, request.failures) == (RequestState.PENDING, failures)

    # Then the next answer finds it given up, not another run
    with pytest.raises(errors.RequestExpired):
        _answer(rt, alice, interrupt_id, secret)
    ended = stores.requests.get(CHAT, clock.now_ms())
    assert ended is not None and ended.state is RequestState.EXPIRED
    assert stores.approvals.for_user(CHAT, "alice", clock.now_ms()) == []


def test_a_failure_after_a_recorded_step_keeps_the_answer_and_repeats_nothing(
    rt: Runtime,
    alice: Caller,
    stores: Stores,
    clock: ManualClock,
    flaky: Flaky,
    transport: Transport,
) -> None:
    # Given an approved download whose resumed run recorded the model's fetch and the
    # fetched table, then its model failed on the summary
    interrupt_id, secret = _pause(rt, alice, "please download the table")
    flaky.failing, flaky.failing_after = True, 1
    with pytest.raises(errors.RunFailed):
        _answer(rt, alice, interrupt_id, secret)
    held = stores.requests.get(CHAT, clock.now_ms())
    assert held is not None
    # (The approval's own answer is not a step: it follows from the card and the answer)
    assert (held.state, held.decision) == (RequestState.CLAIMED, "approved")
    assert len(stores.requests.steps(held)) == 2
    assert {a.subject for a in stores.approvals.for_user(CHAT, "alice", clock.now_ms())} == {SITE}

    # When the model is back and the person answers again
    flaky.failing = False
    calls_before = flaky.calls
    done = _answer(rt, alice, interrupt_id, secret)

    # Then the run went on from its journal: the model was asked only what was left,
    # and the table was not fetched again
    assert (done.outcome, done.decision) == ("completed", "approved")
    assert flaky.calls - calls_before == 1  # the summary
    assert transport.urls == ["https://data.example.org/reference/table.csv"]


def test_a_failure_after_an_effect_keeps_the_answer_and_a_takeover_finishes_it(
    rt: Runtime, alice: Caller, stores: Stores, clock: ManualClock, flaky: Flaky
) -> None:
    # Given an approved report that was sent, then the model failed on the next step
    interrupt_id, secret = _pause(rt, alice, "please send the weekly report")
    request = stores.requests.get(CHAT, clock.now_ms())
    assert request is not None
    key = f"{CHAT}#{request.card['tool_use_id']}"
    flaky.failing = True
    with pytest.raises(errors.RunFailed):
        _answer(rt, alice, interrupt_id, secret)
    assert stores.outbox.get(key) is not None

    # Then the request keeps its recorded approval, released to the next taker, and it
    # cannot be cancelled any more (the report is out)
    held = stores.requests.get(CHAT, clock.now_ms())
    assert held is not None
    assert (held.state, held.decision, held.acted) == (RequestState.CLAIMED, "approved", True)
    assert held.lease_lapsed(clock.now_ms()) and held.claim_count == 0
    with pytest.raises(errors.InterlockError):
        cancel_request(stores, alice, CHAT, clock.now_ms())

    # When the person tries to answer differently once the model is back
    flaky.failing = False
    with pytest.raises(errors.DecisionBinding, match="Approved by alice") as refused:
        _answer(rt, alice, interrupt_id, secret, {"decision": "reject"})
    assert STATUS[refused.value.code] == 409
    assert stores.requests.get(CHAT, clock.now_ms()) == held, "the refusal changed nothing"

    # Then only the recorded answer carries it on
    done = _answer(rt, alice, interrupt_id, secret)

    # Then the run finished on the recorded approval, and the report went out once
    assert (done.outcome, done.decision) == ("completed", "approved")
    assert "Report sent" in (done.text or "") or "already sent" in (done.text or "")
    finished = stores.requests.get(CHAT, clock.now_ms())
    assert finished is not None and finished.state is RequestState.DONE
    assert stores.outbox.get(key) is not None
    assert stores.outbox.put_once(key, {}, clock.now_ms()) is False, "one record under the key"


def test_a_run_with_a_runaway_step_is_settled_not_retried_forever(
    rt: Runtime, alice: Caller, stores: Stores, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import interlock.harness.journal as journal

    # Given a bound on one step that even the first step is over
    interrupt_id, secret = _pause(rt, alice, "please download the table")
    monkeypatch.setattr(journal, "MAX_STEP_BYTES", 100)

    # When the person approves
    with pytest.raises(errors.RequestExpired, match="could not be recorded"):
        _answer(rt, alice, interrupt_id, secret)

    # Then the request is settled with the reason, and nothing stays granted
    ended = stores.requests.get(CHAT, clock.now_ms())
    assert ended is not None and ended.state is RequestState.EXPIRED
    assert "could not be recorded" in (ended.ended_reason or "")
    assert stores.approvals.for_user(CHAT, "alice", clock.now_ms()) == []


def test_a_run_that_keeps_failing_after_it_acted_is_given_up_not_looped(
    rt: Runtime, alice: Caller, stores: Stores, clock: ManualClock, flaky: Flaky
) -> None:
    # Given an approved report that was sent, and a model that keeps failing afterwards
    interrupt_id, secret = _pause(rt, alice, "please send the weekly report")
    flaky.failing = True

    # When the person keeps answering
    for _ in range(stores.policy.max_failures):
        with pytest.raises(errors.RunFailed):
            _answer(rt, alice, interrupt_id, secret)

    # Then the next answer is refused with the reason and the request is settled
    with pytest.raises(errors.RequestExpired, match="again and again"):
        _answer(rt, alice, interrupt_id, secret)
    ended = stores.requests.get(CHAT, clock.now_ms())
    assert ended is not None and ended.state is RequestState.EXPIRED


def test_an_unreadable_journal_settles_the_request(
    rt: Runtime,
    alice: Caller,
    stores: Stores,
    clock: ManualClock,
    flaky: Flaky,
    aws: dict[str, Any],
) -> None:
    # Given a request whose run recorded its steps, then failed; a step is then garbled
    interrupt_id, secret = _pause(rt, alice, "please download the table")
    flaky.failing, flaky.failing_after = True, 1
    with pytest.raises(errors.RunFailed):
        _answer(rt, alice, interrupt_id, secret)
    held = stores.requests.get(CHAT, clock.now_ms())
    assert held is not None and held.journal_id is not None
    aws["dynamodb"].update_item(
        TableName=aws["table"],
        Key={"pk": {"S": f"CHAT#{CHAT}"}, "sk": {"S": keys.step_sk(held.journal_id, 0)}},
        UpdateExpression="SET entry = :j",
        ExpressionAttributeValues={":j": {"S": "{not json"}},
    )
    flaky.failing = False

    with pytest.raises(errors.RequestExpired, match="journal cannot be read"):
        _answer(rt, alice, interrupt_id, secret)
    ended = stores.requests.get(CHAT, clock.now_ms())
    assert ended is not None and ended.state is RequestState.EXPIRED
    assert stores.approvals.for_user(CHAT, "alice", clock.now_ms()) == []


def test_a_recovery_that_finds_a_step_gone_ends_the_request_and_says_so(
    clock: ManualClock, transport: Transport, aws: dict[str, Any], alice: Caller
) -> None:
    import threading

    from interlock.adapters.factory import build_stores
    from interlock.api.views import request_view
    from interlock.sweeper import sweep
    from interlock.timing import StorePolicy
    from interlock.turns import TurnLimits
    from tests.faults.wrapper import Faulty

    # Given steps kept as S3 objects, and a worker that approved, downloaded, recorded
    # its steps and then froze before storing its end
    policy = StorePolicy(inline_bytes=16)
    stores = build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"], policy)

    def runtime(of: Stores) -> Runtime:
        return Runtime(
            of, Models(), clock=clock, fetch=transport, limits=TurnLimits(heartbeat_s=600)
        )

    interrupt_id, secret = _pause(runtime(stores), alice, "please download the table")
    frozen = Faulty(stores.requests, stall={"finish"})
    told: list[str] = []

    def approve() -> None:
        try:
            _answer(runtime(replace(stores, requests=frozen)), alice, interrupt_id, secret)
        except errors.InterlockError as lost:
            told.append(lost.code)

    worker = threading.Thread(target=approve, daemon=True)
    worker.start()
    assert frozen.reached["finish"].wait(10)
    steps = aws["s3"].list_objects_v2(Bucket=aws["bucket"], Prefix="steps/").get("Contents", [])
    assert steps, "the run's steps are S3 objects"
    assert transport.urls, "the download ran"

    # When a step's object is gone by the time the sweeper recovers the stranded claim
    aws["s3"].delete_object(Bucket=aws["bucket"], Key=steps[0]["Key"])
    clock.advance(ms=policy.lease_ms + policy.recovery_grace_ms + 30_000)
    report = sweep(runtime(stores), clock.now_ms())
    frozen.release()
    worker.join(30)

    # Then it is ended at once, saying why and that the answer was acted on, never
    # "will be continued"; the trail says the journal was unreadable
    assert report.failed == 1
    ended = stores.requests.get(CHAT, clock.now_ms())
    assert ended is not None and ended.state is RequestState.EXPIRED
    assert ended.ended_reason is not None
    assert "journal cannot be read" in ended.ended_reason
    assert "after acting on the answer" in ended.ended_reason
    view = json.dumps(request_view(ended, clock.now_ms(), None))
    assert "journal cannot be read" in view and "continued" not in view
    kinds = [e.type for e in stores.chats.events(CHAT, limit=100)]
    assert "journal_unreadable" in kinds and "run_failed" not in kinds
    assert len(transport.urls) == 1, "nothing ran twice"


def test_the_lease_is_kept_from_the_claim_while_the_run_is_being_set_up(
    stores: Stores, clock: ManualClock, transport: Transport, alice: Caller
) -> None:
    import threading
    import time

    from interlock.turns import TurnLimits

    # Given a worker whose heartbeat beats fast, and whose snapshot read is slow (as a
    # slow MCP handshake would be): it approved and holds the claim
    def runtime(of: Stores, beat_s: float) -> Runtime:
        return Runtime(
            of, Models(), clock=clock, fetch=transport, limits=TurnLimits(heartbeat_s=beat_s)
        )

    interrupt_id, secret = _pause(runtime(stores, 60), alice, "please download the table")
    slow = Faulty(stores.blobs, stall={"read_snapshot"})
    approved: list[Any] = []
    worker = threading.Thread(
        target=lambda: approved.append(
            _answer(runtime(replace(stores, blobs=slow), 0.02), alice, interrupt_id, secret)
        ),
        daemon=True,
    )
    worker.start()
    assert slow.reached["read_snapshot"].wait(10)

    # When more than a lease passes while it is still setting up, a beat at a time
    for _ in range(4):
        before = stores.requests.get(CHAT, clock.now_ms())
        assert before is not None and before.lease_expires_at_ms is not None
        clock.advance(ms=stores.policy.lease_ms // 2)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            now = stores.requests.get(CHAT, clock.now_ms())
            assert now is not None
            if (now.lease_expires_at_ms or 0) > before.lease_expires_at_ms:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the lease was not renewed while the run was being set up")

    # Then nobody can take it over meanwhile (a Deny is told it is in progress), and
    # the approve runs to its end once set up
    with pytest.raises(errors.ResumeInProgress):
        _answer(runtime(stores, 60), alice, interrupt_id, secret, {"decision": "reject"})
    slow.release()
    worker.join(30)
    assert approved and approved[0].outcome == "completed"
    assert len(transport.urls) == 1
