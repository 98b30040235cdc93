"""Resuming a paused run exactly once, under faults.

The checks run in this order (`resume_turn`, then `_claimed`) and nothing before the
claim takes ownership; a failed check refuses, or expires the request when the world
has changed under it:

1. owner, pointer, id, hashed secret (refuse; a done request replays its stored answer)
2. the answer fits the cards        (refuse, request untouched)
3. it does not undo an answer that was acted on (`DecisionBinding`, untouched)
4. the chat is unchanged            (a newer turn: expire)
5. roles still allow the paused batch's tools (lost: expire)
6. not given up                     (too many claims in a row that added nothing to
                                       the journal, or failures: expire, saying so;
                                       `records.given_up`)
7. slots and budget                 (refuse, request still answerable)
8. claim                            (the loser hears "in progress")

The first claim records the answer; a takeover (the same request claimed again after
its worker died) continues with that recorded answer and the run's journal, so it
repeats no model call, tool body or side effect; when the takeover brings another
answer and nothing was acted on yet, that answer replaces the recorded one, and when
something was, it is refused as `DecisionBinding` before anything is written
(`records.answer_rule`). Every write after the claim is fenced by it, and no tool body
starts once the heartbeat knows the lease is gone. A failure after the claim releases
the request instead of stranding it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final, TypeVar

from strands.types.interrupt import InterruptResponseContent

from interlock import access, errors, steps
from interlock.admission import (
    Held,
    expire_and_release,
    give_up,
    release_ask_slot,
    reserved,
    reserved_in,
)
from interlock.answers import (
    Answers,
    Reply,
    Status,
    agent_response,
    decide_all,
    kind_of,
    recorded_answers,
)
from interlock.audit import audit, audit_entry
from interlock.caller import Caller
from interlock.cards import DOWNLOAD, Decision, args_hash, card_subjects, edit_record, redact
from interlock.channels import chosen_text
from interlock.context import request_scope
from interlock.deps import Runtime
from interlock.harness.agent import (
    BuiltAgent,
    build_agent,
    inputs_for,
    lost_tools,
    model_failure,
)
from interlock.harness.journal import Journal
from interlock.harness.progress import ProgressRelay
from interlock.harness.snapshot import load_snapshot
from interlock.harness.tools import ASKING_KINDS, ASKING_TOOLS
from interlock.heartbeat import Heartbeat
from interlock.interrupts import guards_call, is_own, tool_use_id_of
from interlock.outcomes import TurnResult
from interlock.ports import Entry, NotPending
from interlock.progress import Progress, Started, ignore
from interlock.records import (
    AnswerRule,
    ChatMeta,
    RequestRecord,
    RequestState,
    answer_rule,
    binding_refusal,
    decided_text,
    given_up,
    refusal,
)
from interlock.transcript import answer_message_id, text_message_id
from interlock.turns import conclude, request_context

logger = logging.getLogger(__name__)

Caused = TypeVar("Caused", bound=errors.InterlockError)


def resume_turn(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    *,
    interrupt_id: str,
    secret: str,
    status: Status,
    payload: Any,
    more: Sequence[Reply] = (),
    progress: Progress = ignore,
    source: str = "api",
) -> TurnResult:
    """Answer the chat's open request and continue the paused run, exactly once.

    `interrupt_id`, `status` and `payload` answer one interrupt; a run that paused on
    several at once is answered in one resume, the others in `more` (AG-UI 1.0).
    `progress` hears `Started` once this worker holds the claim, then the run.
    `source` names where the answer came from (api, slack, telegram), for the trail.

    Raises:
        InvalidInput: the answer does not fit the card (the request stays answerable).
        IncompleteResume: an interrupt of the request is left unanswered.
        UnknownRequest, SecretRefused, Forbidden: refused; nothing changed.
        RequestExpired, RequestCancelled: the request can no longer be answered (a
            cancel of it is accepted instead, as `abandoned`, and changes nothing).
        SnapshotLost, IncompatibleSnapshot: the paused run cannot be restored; expired.
        LimitExceeded: no slot or budget now; the request stays answerable.
        ResumeInProgress: another worker holds the claim.
        LeaseLost: this worker lost its claim mid-run; it stopped without acting.
        RunFailed: the run failed after the claim; the request was released.
    """
    now = rt.clock.now_ms()
    stores = rt.stores
    record, meta = stores.requests.get_with_chat(chat_id, now)
    access.require_answerer(caller, meta.owner, record)
    problem = refusal(record, interrupt_id, secret, now)
    if isinstance(problem, errors.AlreadyAnswered):
        replies = [Reply(interrupt_id, status, payload), *more]
        if (conflict := _other_answer(problem.current, replies)) is not None:
            raise conflict
        return replay(rt, problem.current)
    if _abandons(problem, status, more):
        # AG-UI's way past an interrupt nobody can answer any more: cancel it. The request
        # already ended, so nothing is written; the client's thread is free again.
        return TurnResult(chat_id, "abandoned", text=str(problem), decision="cancelled")
    if problem is not None:
        raise problem
    assert record is not None
    answers = decide_all(record, [Reply(interrupt_id, status, payload), *more])
    conflict = binding_conflict(record, answers)
    if conflict is not None:
        raise conflict  # before anything is reserved or written
    waited_ms = now - record.created_at * 1000
    try:
        _check_chat(rt, record, meta, now)
        _check_roles(rt, caller, record, now)

        decisions = partial(_decision_details, rt, record, waited_ms, source)
        ask = _Answering(rt, caller, secret, answers, decisions, source)
        with _claimed(ask, record) as claimed:
            progress(Started())
            claim, answers = claimed.claim, claimed.answers
            result = continue_claimed(
                rt, caller, claim, answers, progress, held=claimed.held, granted=claimed.granted
            )
            if rt.notifier is not None:
                rt.notifier.settled(
                    chat_id,
                    record.interrupt_ids,
                    answers.label,
                    caller.user_id,
                    source,
                    chosen_text(record, answers.responses),
                )
                if result.offer is not None:
                    rt.notifier.opened(result.offer.request)
            return replace(result, waited_ms=waited_ms)
    except errors.AlreadyAnswered as done:
        # Another worker finished between our read and a write: show its answer.
        return replay(rt, done.current)


def resume_replies(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    *,
    secret: str,
    replies: Sequence[Reply],
    progress: Progress = ignore,
) -> TurnResult:
    """`resume_turn` for a resume as AG-UI sends it: one entry per open interrupt."""
    if not replies:
        raise errors.IncompleteResume("a resume must answer the open interrupts")
    first, *more = replies
    return resume_turn(
        rt,
        caller,
        chat_id,
        interrupt_id=first.interrupt_id,
        secret=secret,
        status=first.status,
        payload=first.payload,
        more=more,
        progress=progress,
    )


def replay(rt: Runtime, done: RequestRecord) -> TurnResult:
    """The stored outcome of an answered request: never a second run.

    It also frees the open-request slot, in case the worker that finished died before
    it could (releasing is idempotent).
    """
    release_ask_slot(rt, done)
    stored = (
        rt.stores.blobs.get_answer(done.answer_key)
        if done.answer_key
        else (json.loads(done.answer) if done.answer else None)
    )
    text = done.final_text or (stored or {}).get("text")
    return TurnResult(
        done.chat_id,
        "replayed",
        text=text,
        decision=done.decision,
        answered_at=done.answered_at,
        tool_calls=list((stored or {}).get("tool_calls", [])),
        message_id=(stored or {}).get("message_id")
        or answer_message_id(done.chat_id, done.turn_seq, done.interrupt_id),
    )


def continue_claimed(
    rt: Runtime,
    caller: Caller,
    claim: RequestRecord,
    answers: Answers,
    progress: Progress = ignore,
    held: Held | None = None,
    granted: bool = False,
    answered_afresh: bool = True,
) -> TurnResult:
    """Continue a claimed request's paused run with `answers`, and store its end
    (giving back the run's slot, `held`, in the same write).

    With `answered_afresh` (a person waits on the run), a failure before anything was
    acted on makes the request answerable again; without it (the sweeper's runs, which
    nobody waits on) the recorded answer is kept for the next pass to continue.

    The run continues as the chat's owner (a rerouted request may be answered by an
    operator of another role; the approvals still belong to the owner). A failure is
    turned into a clean release (see `_released`), never a stranded claim.
    """
    if caller.user_id != claim.user_id:
        caller = Caller(claim.user_id, _owner_roles(caller, claim), trace_id=caller.trace_id)
    # The lease is kept from the claim on, not from the first model call: reading the
    # snapshot and building the agent (an MCP server's handshake) may take a while.
    renew = lambda: rt.stores.requests.renew(claim, rt.clock.now_ms())  # noqa: E731
    with Heartbeat(renew, rt.limits.heartbeat_s, until_ms=claim.lease_expires_at_ms) as beat:
        return _continue(rt, caller, claim, answers, progress, held, granted, answered_afresh, beat)


def _continue(
    rt: Runtime,
    caller: Caller,
    claim: RequestRecord,
    answers: Answers,
    progress: Progress,
    held: Held | None,
    granted: bool,
    answered_afresh: bool,
    heartbeat: Heartbeat,
) -> TurnResult:
    """`continue_claimed`'s work, under the claim's heartbeat."""
    try:
        journal = Journal(
            steps.recorded(rt.stores, claim),
            steps.recorder(rt.stores, claim),
            recomputed=_answered_by_card(claim),
            acted=claim.acted_on,
            mark_acted=lambda: rt.stores.requests.mark_acted(claim.fence),
        )
    except (ValueError, KeyError, TypeError, errors.JournalLost) as unreadable:
        # For good: every later attempt would read the same journal. Said as it is,
        # never "will be continued".
        what = str(unreadable) if isinstance(unreadable, errors.JournalLost) else None
        reason = f"the run's journal cannot be read: {what or type(unreadable).__name__}"
        if claim.acted_on:
            reason += "; it was stopped after acting on the answer"
        _end_unusable(rt, caller, claim, answers, reason, event="journal_unreadable")
        raise errors.RequestExpired(reason) from unreadable
    except errors.StoreError as failure:  # the steps could not be read: try again later
        released = _released(rt, caller, claim, answers, failure, reset=answered_afresh)
        raise errors.RunFailed(_failed_text(claim, released)) from failure
    try:
        _apply_approvals(rt, caller, claim, answers, grant=not granted)
        snapshot = rt.stores.blobs.read_snapshot(claim.stored_snapshot)
        relay = ProgressRelay(
            progress, partial(text_message_id, claim.chat_id, claim.turn_seq, claim.interrupt_id)
        )
        built = build_agent(rt, caller, claim.chat_id, journal=journal, progress=relay)
        load_snapshot(built.agent, snapshot)
        result, started = _run(rt, caller, claim, built, answers, journal, heartbeat)
        return conclude(
            rt,
            caller,
            claim.chat_id,
            built,
            result,
            claim.turn_seq,
            started=started,
            claim=claim,
            decision=answers.label,
            held=held,
        )
    except errors.IncompatibleSnapshot as unusable:
        _end_unusable(rt, caller, claim, answers, str(unusable))
        raise
    except Exception as failure:
        lost = _cause(failure, errors.LeaseLost)
        if lost is not None:
            raise lost from failure  # someone else holds it now: touch nothing
        changed = _cause(failure, errors.CallChanged)
        if changed is not None:
            # Fail closed, for good: the approval binds one call, and no retry would run
            # it. The person, every surface and the trail are told why.
            reason = f"not run: {changed}; the approval binds only the call it was given for"
            _end_unusable(rt, caller, claim, answers, reason, event="call_changed")
            raise errors.RequestExpired(reason) from failure
        outgrown = _cause(failure, errors.TooLarge)
        if outgrown is not None:
            # Every retry would fail at the same step: end it rather than loop.
            reason = f"the run could not be recorded: {outgrown}"
            _end_unusable(rt, caller, claim, answers, reason, event="journal_full")
            raise errors.RequestExpired(reason) from failure
        released = _released(rt, caller, claim, answers, failure, reset=answered_afresh)
        cause = model_failure(failure)  # a model that could not answer is named
        raise errors.RunFailed(_failed_text(claim, released, cause)) from failure


def binding_conflict(record: RequestRecord, answers: Answers) -> errors.DecisionBinding | None:
    """The refusal of `answers` when `record` holds another answer that was acted on
    (`records.answer_rule`); None when they may be carried out."""
    if answer_rule(record, _recordable(answers)[1]) is AnswerRule.BINDING:
        return binding_refusal(record)
    return None


def _other_answer(done: RequestRecord, replies: Sequence[Reply]) -> errors.InterlockError | None:
    """The refusal of an answer to a finished request that is not the one it finished
    with (None for the same answer again, which replays): the recorded one stands, and
    the client is told so instead of being handed it as if it were its own."""
    if done.response is None:
        return None  # finished without a recorded answer (an old record): replay it
    if done.decision == "timed_out":
        # Cancelling what timed out is AG-UI's way past it: it is told how it ended.
        if all(r.status == "cancelled" for r in replies):
            return None
        return errors.RequestTimedOut("nobody answered this request in time; it has ended")
    try:
        given = _recordable(decide_all(done, list(replies)))[1]
    except errors.InterlockError as unfit:
        return unfit
    return None if given == done.response else binding_refusal(done)


def _abandons(problem: errors.InterlockError | None, status: str, more: Sequence[Reply]) -> bool:
    """A cancel of every interrupt of a request that expired or was cancelled."""
    ended = isinstance(problem, errors.RequestExpired | errors.RequestCancelled)
    return ended and status == "cancelled" and all(r.status == "cancelled" for r in more)


def _check_chat(rt: Runtime, record: RequestRecord, meta: ChatMeta, now: int) -> None:
    if meta.last_turn != record.turn_seq:
        reason = "a newer turn was saved in this chat since this was asked"
        expire_and_release(rt, record, reason, now)
        raise errors.RequestExpired(reason)


def _check_roles(rt: Runtime, caller: Caller, record: RequestRecord, now: int) -> None:
    owner = Caller(record.user_id, _owner_roles(caller, record), trace_id=caller.trace_id)
    inputs = inputs_for(rt, owner, record.chat_id)
    then = frozenset(record.owner_roles)
    lost = lost_tools(rt.agent, inputs, record.card.get("batch_tools", []), then)
    if lost:
        expire_and_release(rt, record, f"the user may no longer use {', '.join(lost)}", now)
        raise errors.RequestExpired("your roles changed since this was asked")


def _owner_roles(caller: Caller, record: RequestRecord) -> frozenset[str]:
    """The roles the run continues with: the owner's live ones when the owner answers;
    otherwise (an operator answering a rerouted request) the owner's roles as they were
    when the run paused, never the operator's."""
    if caller.user_id == record.user_id:
        return caller.roles
    return frozenset(record.owner_roles)


def _check_not_given_up(rt: Runtime, caller: Caller, record: RequestRecord) -> int:
    """Give `record` up (expired, on the trail, `RequestExpired`) when its retries ran
    out; else the steps its journal holds, counted before the claim that takes it over
    (`records.given_up`: only claims that added none count against the cap)."""
    policy = rt.stores.policy
    seen = steps.count(rt.stores, record)
    reason = given_up(
        record,
        policy.max_claims,
        policy.max_failures,
        max_total_claims=policy.max_total_claims,
        steps=seen,
    )
    if reason:
        give_up(rt, record, reason, rt.clock.now_ms(), caller, steps=seen)
        raise errors.RequestExpired(reason)
    return seen


def _decision_details(
    rt: Runtime, record: RequestRecord, waited_ms: int, source: str, recorded: Answers
) -> list[dict[str, Any]]:
    """One `decision` event's detail per interrupt of `record`, for the answers the claim
    recorded: each with its own answer, source and answerer."""
    takeover = record.state is RequestState.CLAIMED
    replaced = takeover and record.response is not None and recorded.label != record.decision
    return [
        {
            "interrupt_id": asked.interrupt_id,
            "kind": kind_of(asked.card),
            "card_id": asked.card.get("card_id"),
            "decision": recorded.decisions[asked.interrupt_id].label,
            "interrupts": len(record.asked),
            "reason": recorded.decisions[asked.interrupt_id].reason,
            "suggestion": recorded.decisions[asked.interrupt_id].suggestion,
            "args_hash": args_hash(asked.card),
            "waited_ms": waited_ms,
            "worker": rt.worker_id,
            "takeover": takeover,
            **({"replaced": record.decision} if replaced else {}),
            "source": source,
            # What was answered, for the history (sensitive fields masked), with the
            # arguments the person changed and the fingerprint execution is held to.
            "answer": _answer_summary(recorded.responses[asked.interrupt_id]),
            **edit_record(asked.card, recorded.decisions[asked.interrupt_id]),
            **_fingerprint_of(recorded.responses[asked.interrupt_id]),
        }
        for asked in record.asked
    ]


def _fingerprint_of(response: Any) -> dict[str, Any]:
    found = response.get("fingerprint") if isinstance(response, Mapping) else None
    return {"fingerprint": found} if found else {}


@dataclass(frozen=True)
class _Answering:
    """Who answers, with what, and how their `decision` events read: what every way of
    claiming a request needs besides the request itself."""

    rt: Runtime
    caller: Caller
    secret: str
    answers: Answers
    decisions: Callable[[Answers], list[dict[str, Any]]]
    source: str


@dataclass(frozen=True)
class _Claimed:
    claim: RequestRecord
    answers: Answers  # as the claim recorded them
    held: Held
    granted: bool  # the approval rows were written with the claim


# A transaction holds 100 entries: the claim, a slot, the budget and the events (one
# per interrupt) leave room for the rest of them as granted rows; a card with more has
# them written after the claim.
_TRANSACTION_ENTRIES: Final = 96
_RESERVATION_ENTRIES: Final = 2  # the slot and the budget unit (`reserved_in`)


@contextmanager
def _claimed(ask: _Answering, record: RequestRecord) -> Iterator[_Claimed]:
    """Claim `record` holding a concurrency slot and a unit of daily budget.

    A pending request is claimed in one transaction with everything that belongs with
    the claim (`_claim_pending`). One still claimed by a worker whose lease lapsed, or
    found so by that transaction, is taken over (`_take_over`).
    """
    seen = _check_not_given_up(ask.rt, ask.caller, record)
    with ExitStack() as held:
        claimed = None
        if record.state is RequestState.PENDING and record.journal_id is None:
            try:
                claimed = held.enter_context(_claim_pending(ask, record))
            except NotPending as changed:
                # Raised by the claim's own write, before anything was held: the request
                # was claimed meanwhile and that claim lapsed. Take it over instead.
                record = changed.current
                seen = _check_not_given_up(ask.rt, ask.caller, record)
        if claimed is None:
            claimed = held.enter_context(_take_over(ask, record, seen))
        yield claimed


@contextmanager
def _claim_pending(ask: _Answering, record: RequestRecord) -> Iterator[_Claimed]:
    """Claim a pending request in one transaction with its slot, budget, `decision`
    events and the rows its approvals grant (when they fit beside the rest)."""
    rt = ask.rt

    def write(reservation: list[Entry]) -> RequestRecord:
        return rt.stores.requests.claim_with(
            record,
            ask.secret,
            rt.worker_id,
            rt.clock.now_ms(),
            _recordable(ask.answers),
            partial(_claim_riders, ask, record, reservation),
            by=ask.caller.user_id,
            via=ask.source,
        )

    with reserved_in(rt, ask.caller, write) as (claim, slot):
        recorded = _recorded(claim, ask.answers)
        granted = _grant_entries(rt, claim, recorded, _room(record)) is not None
        yield _Claimed(claim, recorded, slot, granted=granted)


def _claim_riders(
    ask: _Answering, record: RequestRecord, reservation: list[Entry], claimed: RequestRecord
) -> list[Entry]:
    """What commits with the claim of a pending request: the slot and budget, a
    `decision` event per interrupt, and the granted rows unless there are too many."""
    recorded = _recorded(claimed, ask.answers)
    events = [
        audit_entry(ask.rt, ask.caller, record.chat_id, "decision", **detail)
        for detail in ask.decisions(recorded)
    ]
    rows = _grant_entries(ask.rt, claimed, recorded, _room(record)) or []
    return [*reservation, *events, *rows]


def _room(record: RequestRecord) -> int:
    """How many granted rows fit in the claim's transaction beside the claim itself, the
    slot, the budget and one `decision` event per interrupt."""
    return _TRANSACTION_ENTRIES - _RESERVATION_ENTRIES - len(record.asked)


@contextmanager
def _take_over(ask: _Answering, record: RequestRecord, seen: int) -> Iterator[_Claimed]:
    """Claim a request whose earlier claim lapsed: take the slot first, then claim with
    one conditional update that reads back what the earlier claim recorded. When this
    answer differs and nothing was acted on, it replaces the recorded one, and what the
    earlier answer granted is withdrawn in the same write. `seen` is how many journal
    steps were counted before it (`steps.count`), which the claim records."""
    rt, recordable = ask.rt, _recordable(ask.answers)
    with reserved(rt, ask.caller) as slot:
        replacing = answer_rule(record, recordable[1]) is AnswerRule.REPLACE
        withdrawn = _withdrawals(rt, record) if replacing else []
        # A claim that lands records this answer (kept, recorded or replacing: the rule
        # refused the one other case), so its events are known before it is written
        # and ride in its write: a worker that dies right after leaves none missing.
        events = [
            audit_entry(rt, ask.caller, record.chat_id, "decision", **detail)
            for detail in ask.decisions(ask.answers)
        ]
        claim = rt.stores.requests.claim(
            record,
            ask.secret,
            rt.worker_id,
            rt.clock.now_ms(),
            answer=recordable,
            replaces=withdrawn,
            also=events,
            by=ask.caller.user_id,
            via=ask.source,
            journal_steps=seen,
        )
        yield _Claimed(claim, _recorded(claim, ask.answers), slot, granted=False)


def _withdrawals(rt: Runtime, record: RequestRecord) -> list[Entry]:
    """The deletes of what the recorded answer granted, to commit with the claim that
    replaces it (the new answer's own grants follow in `continue_claimed`)."""
    if record.response is None:
        return []
    earlier = recorded_answers(record, json.loads(record.response))
    return [
        entry
        for asked in _approved_downloads(record, earlier)
        for entry in rt.stores.approvals.withdraw_entries(
            record.chat_id, record.user_id, asked.card["card_id"]
        )
    ]


def _grant_entries(
    rt: Runtime, claim: RequestRecord, answers: Answers, room: int
) -> list[Entry] | None:
    """The rows the approved download cards grant the chat's owner, as claim entries;
    None when there are more than `room` for the claim's transaction."""
    now = rt.clock.now_ms()
    rows = [
        row
        for asked in _approved_downloads(claim, answers)
        for row in rt.stores.approvals.grant_entries(
            claim.chat_id,
            claim.user_id,
            card_subjects(asked.card, answers.decisions[asked.interrupt_id]),
            asked.card["card_id"],
            now,
        )
    ]
    return rows if len(rows) <= room else None


def _run(
    rt: Runtime,
    caller: Caller,
    claim: RequestRecord,
    built: BuiltAgent,
    answers: Answers,
    journal: Journal,
    heartbeat: Heartbeat,
) -> tuple[Any, int]:
    """Answer every interrupt and run to the end under the claim's heartbeat; no tool
    body starts once it knows the lease is gone (`Heartbeat.holds`)."""
    started = len(built.agent.messages)
    # What this answer granted is known: a tool about to use it needs no read.
    granted = frozenset(
        subject
        for asked in _approved_downloads(claim, answers)
        for subject in card_subjects(asked.card, answers.decisions[asked.interrupt_id])
    )
    context = request_context(
        rt, caller, claim.chat_id, fence=claim.fence, resuming=claim, granted=granted
    )
    context.resume_answers = {
        str(asked.card.get("card_id")): answers.responses[asked.interrupt_id]
        for asked in claim.asked
    }
    answer: list[InterruptResponseContent] = [
        {
            "interruptResponse": {
                "interruptId": asked.interrupt_id,
                "response": agent_response(asked.card, answers.responses[asked.interrupt_id]),
            }
        }
        for asked in claim.asked
    ]
    if not heartbeat.holds(rt.clock.now_ms()):
        raise errors.LeaseLost("the claim's lease lapsed before the run started")

    def guard() -> None:
        if not heartbeat.holds(rt.clock.now_ms()):
            raise errors.LeaseLost("the claim's lease lapsed; the tool was not started")

    journal.guard = guard
    with request_scope(context):
        result = built.agent(answer)
    if heartbeat.lost.is_set():
        raise errors.LeaseLost("the claim was lost while the run continued; it stopped")
    return result, started


def _apply_approvals(
    rt: Runtime, caller: Caller, claim: RequestRecord, answers: Answers, *, grant: bool = True
) -> None:
    """Grant (unless the claim already did: `grant`) or withdraw each download card's
    rows, fenced by the claim (idempotent: a takeover writes the same rows stamped with
    the same card)."""
    approvals = rt.stores.approvals
    for asked in claim.asked:
        card = asked.card
        if card.get("type") != DOWNLOAD:
            continue
        decision = answers.decisions[asked.interrupt_id]
        if decision.approved:
            if not grant:
                continue
            subjects = card_subjects(card, decision)
            now = rt.clock.now_ms()
            approvals.grant(
                claim.chat_id, caller.user_id, subjects, card["card_id"], now, fence=claim.fence
            )
        else:
            approvals.withdraw_card(
                claim.chat_id, caller.user_id, card["card_id"], fence=claim.fence
            )


def _released(
    rt: Runtime,
    caller: Caller,
    claim: RequestRecord,
    answers: Answers,
    failure: Exception,
    *,
    reset: bool,
) -> RequestRecord | None:
    """Give the claim back after a failure that is not the request's fault.

    With `reset`, when nothing was acted on yet (no step or effect recorded), the grants
    are withdrawn and the request is pending again, to be answered afresh (in one
    transaction).
    Otherwise the recorded answer stands and the request is left for a takeover to
    continue from its journal, repeating nothing.
    """
    logger.warning(
        "chat_id=<%s>, error=<%s> | resumed run failed; releasing its claim",
        claim.chat_id,
        type(failure).__name__,
    )
    stores = rt.stores
    try:
        grants: list[Entry] = []
        for asked in _approved_downloads(claim, answers) if reset else []:
            grants += stores.approvals.withdraw_entries(
                claim.chat_id, claim.user_id, asked.card["card_id"]
            )
        released = stores.requests.release(claim, rt.clock.now_ms(), reset=reset, also=grants)
    except errors.InterlockError:
        logger.warning("chat_id=<%s> | release failed; the lease will lapse", claim.chat_id)
        return None
    reset = released.state is RequestState.PENDING
    audit(rt, caller, claim.chat_id, "run_failed", error=type(failure).__name__, reset=reset)
    return released


def _failed_text(
    claim: RequestRecord, released: RequestRecord | None, cause: errors.ModelFailed | None = None
) -> str:
    """What a person is told when the run failed after their answer: why, when the model
    was the cause, and the truth about what happens to that answer next."""
    said = f"{cause}; " if cause is not None else ""
    if released is None:
        return (
            f"{said}the run failed after it was answered; it will be picked up again shortly, "
            "with your answer unless nothing was acted on yet"
        )
    if released.state is RequestState.PENDING:
        return (
            f"{said}the run failed before it acted on your answer; "
            "the request can be answered again"
        )
    return (
        f"{said}the run failed after acting on the answer ({decided_text(released)}); "
        "it will be continued with that answer, which can no longer be changed"
    )


def _answered_by_card(claim: RequestRecord) -> frozenset[str]:
    """The calls of Interlock's asking tools that this claim answers. Each re-runs its
    answer branch from its card and the answer the claim recorded, so its result is
    not journaled: a takeover computes the same one (and saves a write per resume)."""
    return frozenset(
        use
        for one in claim.asked
        if is_own(str(one.card.get("interrupt_name", "")))
        and one.card.get("type") in ASKING_KINDS
        and one.card.get("tool") in ASKING_TOOLS
        # Raised by the tool itself, not by a gate before it (whose card names the tool)
        and not guards_call(one.interrupt_id)
        and (use := tool_use_id_of(one.interrupt_id)) is not None
    )


def _end_unusable(
    rt: Runtime,
    caller: Caller,
    claim: RequestRecord,
    answers: Answers,
    reason: str,
    event: str = "snapshot_unusable",
) -> None:
    """Settle a request whose paused run can never be restored (or never recorded):
    expired, with why."""
    try:
        if _approved_downloads(claim, answers):
            rejected = {a.interrupt_id: Decision("rejected") for a in claim.asked}
            _apply_approvals(rt, caller, claim, Answers(rejected, answers.responses))
        ended = rt.stores.requests.end_claimed(claim, reason)
    except errors.InterlockError:
        return
    release_ask_slot(rt, ended)
    audit(rt, caller, claim.chat_id, event, reason=reason)


def _cause(failure: BaseException, kind: type[Caused]) -> Caused | None:
    """`failure` or what caused it, if of `kind` (Strands wraps errors raised in hooks)."""
    seen: BaseException | None = failure
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _approved_downloads(claim: RequestRecord, answers: Answers) -> list[Any]:
    return [
        asked
        for asked in claim.asked
        if asked.card.get("type") == DOWNLOAD and answers.decisions[asked.interrupt_id].approved
    ]


def _answer_summary(response: Any) -> Any:
    if isinstance(response, dict):
        return redact(response)
    return redact({"answer": response})["answer"]


def _recordable(answers: Answers) -> tuple[str, str]:
    """The label and the responses (by interrupt id) the claim records."""
    return answers.label, json.dumps(dict(answers.responses), separators=(",", ":"), sort_keys=True)


def _recorded(claim: RequestRecord, answers: Answers) -> Answers:
    """The answers the run continues with: the ones the first claim recorded."""
    if claim.response is None:
        return answers
    return recorded_answers(claim, json.loads(claim.response))
