"""run_turn and resume_turn on moto: the pause protocol and the six resume checks."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from interlock import errors
from interlock.adapters.factory import Stores, build_stores
from interlock.outcomes import TurnResult
from interlock.records import RequestState, Subject
from interlock.resume import resume_turn
from interlock.timing import CLOCK_SKEW_MS, ManualClock, StorePolicy
from interlock.turns import PAUSE_FAILED, Caller, Runtime, TurnLimits, run_turn
from tests.agent.support import Models, Transport, scenario
from tests.turns import append_turn

CHAT = "chat-1"
SITE = Subject("site", "data.example.org")


def pause(rt: Runtime, caller: Caller, prompt: str = "please download the table") -> TurnResult:
    result = run_turn(rt, caller, CHAT, prompt)
    assert result.outcome == "interrupted", result.text
    return result


def answer(
    rt: Runtime,
    caller: Caller,
    paused: TurnResult,
    payload: Any = None,
    status: str = "resolved",
    secret: str | None = None,
) -> TurnResult:
    assert paused.offer is not None
    return resume_turn(
        rt,
        caller,
        CHAT,
        interrupt_id=paused.offer.request.interrupt_id,
        secret=secret or paused.offer.secret,
        status=status,  # type: ignore[arg-type]
        payload={"decision": "approve"} if payload is None else payload,
    )


def pointer(stores: Stores, clock: ManualClock) -> Any:
    return stores.requests.get(CHAT, clock.now_ms())


def events(stores: Stores) -> list[str]:
    return [e.type for e in stores.chats.events(CHAT)]


# -- pausing -------------------------------------------------------------------------------


def test_a_turn_pauses_with_a_durable_card(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = pause(runtime, alice)

    request = pointer(stores, clock)
    assert request == paused.offer.request  # type: ignore[union-attr]
    assert request.card["sites"] == ["data.example.org"]
    assert request.card["batch_tools"] == ["request_approval"]
    # The paused run, small as it is, is an S3 object the pointer names
    assert request.snapshot_key is not None and request.snapshot_key.startswith("snapshots/")
    assert stores.blobs.read_snapshot(request.stored_snapshot)["interlock_schema"] == 1
    assert events(stores) == ["paused"]
    paused_event = stores.chats.events(CHAT)[0]
    assert paused_event.detail["turn"] == 1  # the turn it ends; its prompt's row began it
    assert [t["role"] for t in stores.chats.turns(CHAT)] == ["user"]


def test_a_pause_that_cannot_be_saved_ends_as_an_ordinary_message(
    aws: dict[str, Any],
    stores: Stores,
    clock: ManualClock,
    transport: Transport,
    models: Models,
    alice: Caller,
) -> None:
    # Given stores on the same table and bucket that accept only a 10-byte snapshot
    tiny = build_stores(
        aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"], StorePolicy(max_snapshot_bytes=10)
    )
    rt = Runtime(tiny, models, clock=clock, fetch=transport, limits=TurnLimits(heartbeat_s=60))

    result = run_turn(rt, alice, CHAT, "please download the table")

    assert (result.outcome, result.text, result.offer) == ("completed", PAUSE_FAILED, None)
    assert pointer(stores, clock) is None
    assert "pause_failed" in events(stores)
    assert run_turn(rt, alice, CHAT, "hello").outcome == "completed", "the chat is not blocked"


def test_a_new_turn_is_refused_while_a_request_is_open_and_nothing_is_written(
    runtime: Runtime, alice: Caller, stores: Stores
) -> None:
    pause(runtime, alice)
    before = (stores.chats.meta(CHAT), stores.chats.events(CHAT))

    with pytest.raises(errors.ChatBusy):
        run_turn(runtime, alice, CHAT, "something else")

    assert (stores.chats.meta(CHAT), stores.chats.events(CHAT)) == before


def test_another_users_chat_is_forbidden(runtime: Runtime, alice: Caller) -> None:
    paused = pause(runtime, alice)
    mallory = Caller("mallory", frozenset({"reporter"}))
    with pytest.raises(errors.Forbidden):
        run_turn(runtime, mallory, CHAT, "hi")
    with pytest.raises(errors.Forbidden):
        answer(runtime, mallory, paused)


def test_bad_prompts_are_refused(runtime: Runtime, alice: Caller, stores: Stores) -> None:
    for prompt in ("", "   ", "x" * 9000):
        with pytest.raises(errors.InvalidInput):
            run_turn(runtime, alice, CHAT, prompt)
    assert stores.chats.meta(CHAT).last_turn == 0


# -- resuming --------------------------------------------------------------------------------


def test_approving_resumes_the_same_run_and_records_the_decision(
    runtime: Runtime,
    alice: Caller,
    stores: Stores,
    clock: ManualClock,
    transport: Transport,
    models: Models,
) -> None:
    paused = pause(runtime, alice)
    calls_before = models.calls

    done = answer(runtime, alice, paused)

    assert done.outcome == "completed" and "1,42" in (done.text or "")
    assert transport.urls == ["https://data.example.org/reference/table.csv"]
    assert models.calls - calls_before == 2, "only the steps after the pause"
    request = pointer(stores, clock)
    assert (request.state, request.decision) == (RequestState.DONE, "approved")
    rows = stores.approvals.for_user(CHAT, "alice", clock.now_ms())
    assert [(r.subject, r.card_id) for r in rows] == [(SITE, request.card["card_id"])]
    assert events(stores)[-2:] == ["decision", "turn_completed"]
    decision = stores.chats.events(CHAT)[-2]
    assert decision.detail["trace_id"] == "trace-1" and decision.actor == "alice"
    assert [t["role"] for t in stores.chats.turns(CHAT)] == ["user", "assistant"]


def test_answering_again_replays_and_never_reruns(
    runtime: Runtime, alice: Caller, transport: Transport, models: Models
) -> None:
    paused = pause(runtime, alice)
    done = answer(runtime, alice, paused)
    calls = models.calls

    # The same answer again is the stored outcome, never a second run
    again = answer(runtime, alice, paused)
    assert (again.outcome, again.text, again.decision) == ("replayed", done.text, "approved")
    assert again.answered_at is not None

    # A different one is refused, naming the answer that stands: never handed the
    # first one back as if it were its own
    with pytest.raises(errors.DecisionBinding, match="Approved by alice"):
        answer(runtime, alice, paused, payload={"decision": "reject"})
    assert models.calls == calls and len(transport.urls) == 1


def test_a_deny_withdraws_only_that_cards_rows_and_the_run_goes_on(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock, transport: Transport
) -> None:
    stores.approvals.grant(
        CHAT, "alice", [Subject("site", "other.example.org")], "older-card", clock.now_ms()
    )
    paused = pause(runtime, alice)

    done = answer(
        runtime,
        alice,
        paused,
        {"decision": "reject", "reason": "untrusted", "suggestion": "use the cached copy"},
    )

    assert done.outcome == "completed" and done.decision == "rejected_with_feedback"
    assert "Suggestion: use the cached copy" in (done.text or "")
    assert transport.urls == []
    rows = stores.approvals.for_user(CHAT, "alice", clock.now_ms())
    assert [r.card_id for r in rows] == ["older-card"]


def test_a_cancelled_answer_is_reported_to_the_agent(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = pause(runtime, alice)
    done = answer(runtime, alice, paused, payload={}, status="cancelled")
    assert done.decision == "cancelled"
    assert "cancelled the request" in (done.text or "")
    assert pointer(stores, clock).state is RequestState.DONE


def test_a_bad_answer_is_refused_and_the_request_stays_answerable(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = pause(runtime, alice)
    before = pointer(stores, clock)
    with pytest.raises(errors.InvalidInput):
        answer(runtime, alice, paused, {"decision": "approve", "packages": "pandas"})
    with pytest.raises(errors.InvalidInput):
        answer(runtime, alice, paused, {"decision": "approve", "packages": ["bad name!"]})
    with pytest.raises(errors.InvalidInput):
        answer(runtime, alice, paused, status="maybe")
    assert pointer(stores, clock) == before
    assert answer(runtime, alice, paused).outcome == "completed"


def test_wrong_secret_and_unknown_id_change_nothing(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = pause(runtime, alice)
    before = pointer(stores, clock)
    with pytest.raises(errors.SecretRefused):
        answer(runtime, alice, paused, secret="guess")
    with pytest.raises(errors.UnknownRequest):
        resume_turn(
            runtime,
            alice,
            CHAT,
            interrupt_id="v1:tool_call:x:y",
            secret="s",
            status="resolved",
            payload={"decision": "approve"},
        )
    assert pointer(stores, clock) == before


def test_an_expired_request_reports_expired(
    runtime: Runtime, alice: Caller, clock: ManualClock
) -> None:
    paused = pause(runtime, alice)
    clock.advance(seconds=runtime.stores.policy.request_ttl_s)
    with pytest.raises(errors.RequestTimedOut):
        answer(runtime, alice, paused)


def test_a_newer_turn_expires_the_request(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = pause(runtime, alice)
    append_turn(stores, CHAT, {"role": "user", "text": "typed elsewhere"}, clock.now_ms())
    with pytest.raises(errors.RequestExpired, match="newer turn"):
        answer(runtime, alice, paused)
    assert pointer(stores, clock).state is RequestState.EXPIRED


def test_a_card_whose_runs_keep_dying_is_denied_and_its_slot_freed(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    from interlock.config import assemble

    rt = replace(runtime, config=assemble({}, {"max_open_requests": 1}))
    paused = run_turn(rt, alice, CHAT, "download the table")
    assert paused.offer is not None
    record = paused.offer.request
    # Each claim's worker dies: its lease lapses with the run unfinished.
    for n in range(stores.policy.max_claims):
        record = stores.requests.claim(record, paused.offer.secret, f"w{n}", clock.now_ms())
        clock.advance(ms=stores.policy.lease_ms + CLOCK_SKEW_MS)

    with pytest.raises(errors.RequestExpired, match="too many attempts"):
        answer(rt, alice, paused)
    assert pointer(stores, clock).state is RequestState.EXPIRED
    # The expiry frees the open-request slot too.
    assert run_turn(rt, alice, "other", "download the table").outcome == "interrupted"


def test_a_lost_role_expires_the_request(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = pause(runtime, alice, "send the report")
    demoted = replace(alice, roles=frozenset())

    with pytest.raises(errors.RequestExpired, match="roles changed"):
        answer(runtime, demoted, paused)

    assert pointer(stores, clock).ended_reason == "the user may no longer use send_report"
    assert stores.outbox.get(f"{CHAT}#{paused.offer.request.card['tool_use_id']}") is None  # type: ignore[union-attr]


def test_budget_exhaustion_refuses_without_touching_the_request(
    stores: Stores, clock: ManualClock, transport: Transport, models: Models, alice: Caller
) -> None:
    rt = Runtime(
        stores,
        models,
        clock=clock,
        fetch=transport,
        limits=TurnLimits(heartbeat_s=60, daily_turns=1),
    )
    paused = pause(rt, alice)
    before = pointer(stores, clock)

    with pytest.raises(errors.LimitExceeded):
        answer(rt, alice, paused)

    assert pointer(stores, clock) == before
    clock.advance(seconds=86_400 - clock.now_ms() // 1000 % 86_400)  # a new budget day
    assert answer(rt, alice, paused).outcome == "completed"


def test_a_second_interrupt_chains_in_place_with_a_fresh_secret(
    stores: Stores, clock: ManualClock, transport: Transport, alice: Caller
) -> None:
    first, second = "https://data.example.org/a.csv", "https://mirror.example.net/b.csv"
    script = scenario(
        [{"tool": "request_approval", "input": {"reason": "a", "urls": [first]}}],
        [{"tool": "request_approval", "input": {"reason": "b", "urls": [second]}}],
        lambda results: [{"text": "FINAL " + " | ".join(results)}],
    )
    rt = Runtime(
        stores, Models([script]), clock=clock, fetch=transport, limits=TurnLimits(heartbeat_s=60)
    )
    paused = pause(rt, alice, "go")

    chained = answer(rt, alice, paused)

    assert chained.outcome == "interrupted" and chained.offer is not None
    successor = pointer(stores, clock)
    assert successor.interrupt_id == chained.offer.request.interrupt_id
    assert successor.interrupt_id != paused.offer.request.interrupt_id  # type: ignore[union-attr]
    assert (successor.state, successor.claim_count) == (RequestState.PENDING, 0)
    assert successor.card["sites"] == ["mirror.example.net"]
    with pytest.raises(errors.UnknownRequest):
        answer(rt, alice, paused)
    done = answer(rt, alice, chained)
    assert done.outcome == "completed" and "FINAL Approved" in (done.text or "")


def test_the_model_call_limit_trip_is_audited(
    stores: Stores, clock: ManualClock, transport: Transport, alice: Caller
) -> None:
    rt = Runtime(
        stores,
        Models(),
        clock=clock,
        fetch=transport,
        limits=TurnLimits(heartbeat_s=60, max_model_calls=3),
    )
    stores.approvals.grant(CHAT, "alice", [SITE], "card-0", clock.now_ms())

    result = run_turn(rt, alice, CHAT, "loop forever")

    assert result.outcome == "completed" and result.usage.model_calls == 3
    limit = [e for e in stores.chats.events(CHAT) if e.type == "model_call_limit"]
    assert limit and limit[0].detail["limit"] == 3


def test_a_request_keeps_its_clamped_expiry(runtime: Runtime, alice: Caller) -> None:
    paused = pause(runtime, alice)
    policy: StorePolicy = runtime.stores.policy
    request = paused.offer.request  # type: ignore[union-attr]
    assert request.ttl == request.expires_at + policy.retention_s


def test_a_reader_that_lost_the_race_replays_the_winners_answer(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    # Given a worker that read the pointer while it was still pending
    paused = pause(runtime, alice)
    stale = pointer(stores, clock)
    slow = copy.copy(stores.requests)
    slow.get = lambda chat_id, now_ms: stale  # type: ignore[method-assign]
    late = replace(runtime, stores=replace(stores, requests=slow), worker_id="late")

    # When another worker answers and finishes first (saving a newer turn)
    done = answer(runtime, alice, paused)
    replayed = answer(late, alice, paused)

    # Then the late worker's chat check does not expire it: it replays the answer
    assert (replayed.outcome, replayed.text) == ("replayed", done.text)
    assert pointer(stores, clock).state is RequestState.DONE


def test_a_question_is_asked_answered_and_validated_on_the_server(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = pause(runtime, alice, "pick regions")
    request = pointer(stores, clock)
    assert (request.kind, request.card["question_type"]) == ("question", "multiple_choice")

    with pytest.raises(errors.InvalidInput, match="choose 1-2 options"):
        answer(runtime, alice, paused, {"answer": ["North", "South", "East"]})
    assert pointer(stores, clock) == request, "a bad answer leaves the request answerable"

    done = answer(runtime, alice, paused, {"answer": ["North", "East"]})
    assert done.decision == "answered" and "go with: North, East." in (done.text or "")


def test_an_information_request_reaches_the_agent_with_typed_values(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = pause(runtime, alice, "run the export")
    assert pointer(stores, clock).kind == "info"
    with pytest.raises(errors.InvalidInput, match="retention_days"):
        answer(runtime, alice, paused, {"bucket_name": "b", "retention_days": 999})
    done = answer(runtime, alice, paused, {"bucket_name": "b", "retention_days": 30})
    assert "retention days: 30" in (done.text or "")


def test_a_cancelled_question_is_reported_to_the_agent(runtime: Runtime, alice: Caller) -> None:
    paused = pause(runtime, alice, "write a summary")
    done = answer(runtime, alice, paused, payload={}, status="cancelled")
    assert done.decision == "cancelled" and "cancelled the question" in (done.text or "")


def test_unattended_questions_use_their_default_or_continue_without(
    runtime: Runtime, stores: Stores
) -> None:
    robot = Caller("robot", can_ask_a_human=False)
    with_default = run_turn(runtime, robot, "c-default", "write a summary")
    assert with_default.outcome == "completed" and "default applies" in (with_default.text or "")
    without = run_turn(runtime, robot, "c-without", "pick regions")
    assert without.outcome == "completed" and "Nobody can answer" in (without.text or "")


def test_backpressure_caps_open_requests_per_user_and_frees_them(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    from interlock import manage
    from interlock.admission import TOO_MANY_OPEN
    from interlock.config import assemble

    rt = replace(runtime, config=assemble({}, {"max_open_requests": 1}))
    first = run_turn(rt, alice, "c-a", "download the table")
    assert first.outcome == "interrupted"

    refused = run_turn(rt, alice, "c-b", "download the table")
    assert (refused.outcome, refused.text) == ("completed", TOO_MANY_OPEN)
    assert stores.requests.get("c-b", clock.now_ms()) is None
    assert "pause_refused" in [e.type for e in stores.chats.events("c-b")]

    manage.cancel_request(stores, alice, "c-a", clock.now_ms())
    assert run_turn(rt, alice, "c-c", "download the table").outcome == "interrupted"
    resume_turn(
        rt,
        alice,
        "c-c",
        interrupt_id=pointer_of(stores, clock, "c-c").interrupt_id,
        secret=manage.open_request(stores, alice, "c-c", clock.now_ms()).secret or "",
        status="resolved",
        payload={"decision": "approve"},
    )
    assert run_turn(rt, alice, "c-d", "download the table").outcome == "interrupted"


def test_backpressure_caps_how_fast_requests_are_opened(
    runtime: Runtime, alice: Caller, clock: ManualClock
) -> None:
    from interlock.admission import TOO_MANY_OPEN
    from interlock.config import assemble

    rt = replace(runtime, config=assemble({}, {"asks_per_minute": 2}))
    outcomes = [run_turn(rt, alice, f"c-{n}", "download the table").text for n in range(3)]
    assert outcomes[:2] == [None, None] and outcomes[2] == TOO_MANY_OPEN
    clock.advance(seconds=60)
    assert run_turn(rt, alice, "c-later", "download the table").outcome == "interrupted"


def pointer_of(stores: Stores, clock: ManualClock, chat: str) -> Any:
    return stores.requests.get(chat, clock.now_ms())


def test_every_decision_is_audited_with_its_full_record(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    paused = pause(runtime, alice)
    clock.advance(seconds=42)
    answer(runtime, alice, paused, {"decision": "reject", "reason": "no", "suggestion": "cache"})

    decision = next(e for e in stores.chats.events(CHAT) if e.type == "decision")
    detail = decision.detail
    assert decision.actor == "alice"
    assert (detail["kind"], detail["decision"], detail["reason"], detail["suggestion"]) == (
        "approval",
        "rejected_with_feedback",
        "no",
        "cache",
    )
    assert detail["interrupt_id"] == paused.offer.request.interrupt_id  # type: ignore[union-attr]
    assert len(detail["args_hash"]) == 64 and detail["waited_ms"] >= 42_000
    assert detail["trace_id"] == "trace-1"
    assert detail["config_version"] == runtime.config.version
    assert all("config_version" in e.detail for e in stores.chats.events(CHAT))


def test_a_saved_turn_keeps_its_tool_activity(
    runtime: Runtime, alice: Caller, stores: Stores
) -> None:
    paused = pause(runtime, alice)
    answer(runtime, alice, paused)
    last = stores.chats.turns(CHAT)[-1]
    assert last["role"] == "assistant"
    # Each call with what the thread names it by and its result's first line
    assert last["tools"] == [
        {
            "name": "request_approval",
            "status": "success",
            "input": {"reason": "Download the reference table the analysis needs."},
            "result": "Approved by the user: sites data.example.org. Run the step again now.",
        },
        {
            "name": "fetch_url",
            "status": "success",
            "input": {"url": "https://data.example.org/reference/table.csv"},
            "result": "id,value",
        },
    ]


def test_a_second_interrupt_that_cannot_be_saved_finishes_the_claim(
    aws: dict[str, Any], stores: Stores, clock: ManualClock, transport: Transport, alice: Caller
) -> None:
    script = scenario(
        [
            {
                "tool": "request_approval",
                "input": {"reason": "a", "urls": ["https://a.example.org/x"]},
            }
        ],
        [
            {
                "tool": "request_approval",
                "input": {"reason": "b", "urls": ["https://b.example.org/y"]},
            }
        ],
    )
    rt = Runtime(
        stores, Models([script]), clock=clock, fetch=transport, limits=TurnLimits(heartbeat_s=60)
    )
    paused = pause(rt, alice, "go")
    # The second snapshot will not fit
    tiny = build_stores(
        aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"], StorePolicy(max_snapshot_bytes=10)
    )
    rt = replace(rt, stores=replace(stores, blobs=tiny.blobs))

    done = answer(rt, alice, paused)

    assert (done.outcome, done.text) == ("completed", PAUSE_FAILED)
    assert pointer(stores, clock).state is RequestState.DONE


def test_an_early_expiry_frees_the_open_request_slot(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    from interlock.config import assemble

    rt = replace(runtime, config=assemble({}, {"max_open_requests": 1}))
    paused = run_turn(rt, alice, CHAT, "download the table")
    append_turn(stores, CHAT, {"role": "user", "text": "typed elsewhere"}, clock.now_ms())
    with pytest.raises(errors.RequestExpired):
        answer(rt, alice, paused)
    assert run_turn(rt, alice, "other", "download the table").outcome == "interrupted"


def test_a_turn_that_fails_says_so_in_the_trail_and_frees_the_chat(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    def broken(results: list[str]) -> list[dict[str, Any]]:
        raise RuntimeError("the model went away")

    rt = replace(runtime, model_factory=Models([scenario(broken)]))
    with pytest.raises(RuntimeError):
        run_turn(rt, alice, CHAT, "hello")

    [failed] = stores.chats.events(CHAT)
    assert (failed.type, failed.detail["turn"], failed.detail["reason"]) == (
        "turn_failed",
        1,
        "RuntimeError",
    )
    assert stores.chats.meta(CHAT).run_token is None
    assert [t["role"] for t in stores.chats.turns(CHAT)] == ["user"]


def test_a_turn_whose_worker_died_is_named_by_the_turn_that_takes_the_chat_after_it(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    # A worker admitted turn 1 and died: no end was written, its lease just lapses
    _, seen, _ = stores.requests.read_for_turn(CHAT, clock.now_ms())
    lease = runtime.limits.run_lease_ms
    stores.turns.admit(seen, "alice", {"role": "user", "text": "hi"}, clock.now_ms(), lease)
    assert events(stores) == []
    clock.advance(ms=lease + CLOCK_SKEW_MS + 1)  # over by every clock

    run_turn(runtime, alice, CHAT, "hello again")

    lapsed = stores.chats.events(CHAT)[0]
    assert (lapsed.type, lapsed.detail["turn"]) == ("turn_lapsed", 1)
    assert events(stores) == ["turn_lapsed", "turn_completed"]


def test_a_lapsed_turn_whose_late_end_lands_first_is_not_reported_lapsed(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock, monkeypatch: Any
) -> None:
    import interlock.turns

    _, seen, _ = stores.requests.read_for_turn(CHAT, clock.now_ms())
    lease = runtime.limits.run_lease_ms
    turn = {"role": "user", "text": "hi"}
    fence, seq = stores.turns.admit(seen, "alice", turn, clock.now_ms(), lease)
    clock.advance(ms=lease + CLOCK_SKEW_MS + 1)  # over by every clock
    read_history = interlock.turns.history

    def late_end(*args: Any, **kwargs: Any) -> Any:
        # Turn 1's slow worker fails after the next turn read its lapsed lease
        failed = stores.chats.event_entry(CHAT, "turn_failed", "alice", clock.now_ms(), turn=seq)
        stores.turns.abandon(fence, also=[failed])
        return read_history(*args, **kwargs)

    monkeypatch.setattr(interlock.turns, "history", late_end)
    with pytest.raises(errors.TurnRunning, match="send it again"):
        run_turn(runtime, alice, CHAT, "hello again")
    monkeypatch.setattr(interlock.turns, "history", read_history)
    run_turn(runtime, alice, CHAT, "hello again")

    assert events(stores) == ["turn_failed", "turn_completed"]
