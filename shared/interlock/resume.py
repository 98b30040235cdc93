"""Resuming a paused run exactly once.

The checks run in a fixed order and nothing before the claim takes ownership; a failed
check refuses, or expires the request when the world has changed under it:

1. validate the answer        (refuse, request untouched)
2. pointer, id, hashed secret (refuse; a done request replays its stored answer)
3. the chat is unchanged      (hidden or a newer turn: expire)
4. slots and budget           (refuse, request still answerable)
5. roles still allow the paused batch's tools (lost: expire)
6. claim                      (the loser hears "in progress")

Then the snapshot is loaded, the interrupt answered and the run continued under a
heartbeat; its end is stored with writes conditional on the lease.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from strands.types.interrupt import InterruptResponseContent

from interlock import errors
from interlock.answers import decide
from interlock.caller import Caller
from interlock.cards import DOWNLOAD, Decision, args_hash, card_subjects
from interlock.context import request_scope
from interlock.heartbeat import Heartbeat
from interlock.outcomes import TurnResult
from interlock.records import PendingRequest, refusal
from interlock.runtime.agent import build_agent, lost_tools
from interlock.runtime.snapshot import load_snapshot
from interlock.turns import (
    Runtime,
    audit,
    expire_and_release,
    request_context,
    reserved,
    settle,
)

Status = Literal["resolved", "cancelled"]


def resume_turn(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    *,
    interrupt_id: str,
    secret: str,
    status: Status,
    payload: Any,
) -> TurnResult:
    """Answer the chat's open request and continue the paused run, exactly once.

    Raises:
        InvalidInput: the answer does not fit the card (the request stays answerable).
        UnknownRequest, SecretRefused, Forbidden: refused; nothing changed.
        RequestExpired, RequestCancelled: the request can no longer be answered.
        LimitExceeded: no slot or budget now; the request stays answerable.
        ResumeInProgress: another worker holds the claim.
        LeaseLost: this worker lost its claim mid-run; nothing of its run was stored.
    """
    now = rt.clock.now_ms()
    stores = rt.stores
    record = stores.requests.get(chat_id, now)
    if record is not None and not record.answerable_by(caller.user_id, caller.roles):
        raise errors.Forbidden("this request belongs to another user")
    problem = refusal(record, interrupt_id, secret, now)
    if isinstance(problem, errors.AlreadyAnswered):
        return replay(rt, problem.current)
    if problem is not None:
        raise problem
    assert record is not None
    decision, response = decide(record.card, status, payload)
    waited_ms = now - record.created_at * 1000
    try:
        _check_chat(rt, record, now)
        with reserved(rt, caller):
            _check_roles(rt, _owner_roles(caller, record), record, now)
            claim = stores.requests.claim(record, secret, rt.worker_id, now)
            audit(
                rt,
                caller,
                chat_id,
                "decision",
                interrupt_id=interrupt_id,
                kind=record.kind,
                card_id=record.card.get("card_id"),
                decision=decision.label,
                reason=decision.reason,
                suggestion=decision.suggestion,
                args_hash=args_hash(record.card),
                waited_ms=waited_ms,
                worker=rt.worker_id,
            )
            result = continue_claimed(rt, caller, claim, decision, response)
            return replace(result, waited_ms=waited_ms)
    except errors.AlreadyAnswered as done:
        # Another worker finished between our read and a write: show its answer.
        return replay(rt, done.current)


def replay(rt: Runtime, done: PendingRequest) -> TurnResult:
    """The stored outcome of an answered request: never a second run."""
    stored = rt.stores.blobs.get_answer(done.answer_key) if done.answer_key else None
    text = done.first_answer or (stored or {}).get("text")
    return TurnResult(
        done.chat_id,
        "replayed",
        text=text,
        decision=done.decision,
        answered_at=done.answered_at,
        tool_calls=list((stored or {}).get("tool_calls", [])),
    )


def continue_claimed(
    rt: Runtime, caller: Caller, claim: PendingRequest, decision: Decision, response: Any
) -> TurnResult:
    """Continue a claimed request's paused run with `response`, and store its end.

    The run continues as the chat's owner (a rerouted request may be answered by an
    operator of another role; the approvals still belong to the owner).
    """
    stores = rt.stores
    chat_id = claim.chat_id
    card = claim.card
    if caller.user_id != claim.user_id:
        caller = Caller(claim.user_id, _owner_roles(caller, claim), trace_id=caller.trace_id)
    if card.get("type") == DOWNLOAD:
        # Idempotent: a retaken resume writes the same rows stamped with the same card.
        if decision.approved:
            stores.approvals.grant(
                chat_id,
                caller.user_id,
                card_subjects(card, decision),
                card["card_id"],
                rt.clock.now_ms(),
            )
        else:
            stores.approvals.withdraw_card(chat_id, caller.user_id, card["card_id"])
    snapshot = stores.blobs.get_snapshot(claim.snapshot_key)
    built = build_agent(
        rt.model_factory(),
        roles=caller.roles,
        max_model_calls=rt.limits.max_model_calls,
        config=rt.config,
    )
    load_snapshot(built.agent, snapshot)
    started = len(built.agent.messages)
    context = request_context(rt, caller, chat_id, resuming=claim)
    answer: list[InterruptResponseContent] = [
        {"interruptResponse": {"interruptId": claim.interrupt_id, "response": response}}
    ]
    renew = lambda: stores.requests.renew(claim, rt.clock.now_ms())  # noqa: E731
    with Heartbeat(renew, rt.limits.heartbeat_s) as heartbeat, request_scope(context):
        result = built.agent(answer)
    if heartbeat.lost.is_set():
        raise errors.LeaseLost("the claim was lost while the run continued; nothing was stored")
    return settle(
        rt,
        caller,
        chat_id,
        built,
        result,
        claim.turn_seq,
        started=started,
        claim=claim,
        decision=decision.label,
    )


def _owner_roles(caller: Caller, record: PendingRequest) -> frozenset[str]:
    """The roles the run continues with: the owner's live ones when the owner answers;
    otherwise (an operator answering a rerouted request) the owner's roles as they were
    when the run paused, never the operator's."""
    if caller.user_id == record.user_id:
        return caller.roles
    return frozenset(record.owner_roles)


def _check_roles(rt: Runtime, roles: frozenset[str], record: PendingRequest, now: int) -> None:
    lost = lost_tools(roles, record.card.get("batch_tools", []))
    if lost:
        expire_and_release(rt, record, f"the user may no longer use {', '.join(lost)}", now)
        raise errors.RequestExpired("your roles changed since this was asked")


def _check_chat(rt: Runtime, record: PendingRequest, now: int) -> None:
    meta = rt.stores.chats.meta(record.chat_id)
    reason = None
    if meta.hidden:
        reason = "the chat was hidden"
    elif meta.last_turn != record.turn_seq:
        reason = "a newer turn was saved in this chat since this was asked"
    if reason:
        expire_and_release(rt, record, reason, now)
        raise errors.RequestExpired(reason)
