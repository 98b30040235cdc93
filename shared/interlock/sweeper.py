"""The expiry sweeper: settles requests nobody answered, by each kind's timeout policy.

It also continues the runs whose worker died after its claim (found through the
sparse `by_lease` index once the lease ran out a grace ago), with the answer the claim
recorded: a person's answer is carried out without anybody clicking again.

It finds overdue requests through the sparse `by_expiry` index and, per the policy of
the request's kind, either reroutes it once to another role's queue with more time, or
resumes the paused run with an explicit timed-out result (or the question's default)
so the agent ends its turn gracefully. Settling uses the same claim as a person's
answer, so two sweepers racing over one request settle it exactly once; a request a
person already answered (its worker died) is continued with that recorded answer.
Each claim reads the clock when it is made, so a lease is never born expired, and a
sweep stops taking new requests before its own deadline. Expiries and leases were
written by other workers' clocks: the sweeper takes a request only once they are over
by every clock (`timing.CLOCK_SKEW_MS` after they read as over by its own), so a person
answering until the stated expiry, or within the grace, is never pre-empted.

Deployed, finding and settling are apart: a scheduled finder puts one message per
overdue request on a queue (`interlock.fanout`) and queue consumers settle each with
`settle_message`. `sweep` does both in one process (tests, tools), through the same
per-request step, `settle_counted`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Final

from interlock import errors, keys, steps
from interlock.admission import expire_and_release, give_up
from interlock.answers import kind_of, recorded_answers
from interlock.audit import audit, audit_entry
from interlock.caller import Caller
from interlock.channels import chosen_text
from interlock.deps import Runtime
from interlock.fanout import SettleMessage, overdue_chats
from interlock.ports import Entry
from interlock.records import RequestRecord, RequestState, given_up
from interlock.resume import continue_claimed

# Stop claiming when less than this is left before the sweep's deadline: settling one
# request (rebuild the agent, run to the end) must fit in what remains.
DEADLINE_MARGIN_MS: Final = 30_000

logger = logging.getLogger(__name__)


@dataclass
class SweepReport:
    """What one sweep did."""

    found: int = 0
    timed_out: int = 0
    defaulted: int = 0
    rerouted: int = 0
    skipped: int = 0
    failed: int = 0
    deferred: int = 0
    continued: int = 0
    superseded: int = 0
    # Claims whose worker died before the expiry: continued with their recorded answer.
    recovered: int = 0
    # Overdue requests found still claimed by a worker whose lease lapsed (it died
    # mid-run): each is settled like the others, and counted for the alarm.
    stuck: int = 0
    # Channel posts and edits retried by this pass: delivered, failed again (each is due
    # again later), or given up on once their retention ran out.
    notices_delivered: int = 0
    notices_failed: int = 0
    notices_abandoned: int = 0
    chats: list[str] = field(default_factory=list)


def sweep(
    rt: Runtime, now_ms: int, limit_per_shard: int = 100, deadline_ms: int | None = None
) -> SweepReport:
    """Settle every overdue request the index shows (up to a limit per shard).

    With `deadline_ms`, requests found when too little time is left are counted as
    `deferred` and left for the next sweep.
    """
    report = SweepReport()
    grace_ms = rt.stores.policy.recovery_grace_ms
    notices = rt.stores.channels if rt.notifier is not None else None
    for chat_id in overdue_chats(rt.stores.requests, now_ms, limit_per_shard, grace_ms, notices):
        report.found += 1
        if deadline_ms is not None and rt.clock.now_ms() + DEADLINE_MARGIN_MS > deadline_ms:
            report.deferred += 1
            continue
        settle_counted(rt, chat_id, report)
    return report


def settle_message(rt: Runtime, body: str, report: SweepReport) -> str:
    """Settle the request one settle-queue message names, counted in `report`.

    Raises:
        InvalidInput: the body is not a settle message.
        InterlockError: the request could not be read (a store failure, an unknown
            stored state); the queue then delivers the message again.
    """
    message = SettleMessage.parse(body)
    report.found += 1
    return settle_counted(rt, message.chat_id, report)


def settle_counted(rt: Runtime, chat_id: str, report: SweepReport) -> str:
    """Settle one chat's overdue request now and count the outcome in `report`.

    The one per-request step of a sweep and of a queue consumer: a duplicate (a request
    already settled, or claimed by a live worker) is a skip, never a second settle.
    """
    outcome = settle_overdue(rt, chat_id, rt.clock.now_ms(), report)
    setattr(report, outcome, getattr(report, outcome) + 1)
    if outcome != "skipped":
        report.chats.append(chat_id)
    if rt.notifier is not None:
        # The chat may be here for its channel notices alone (a post or edit to retry).
        notices = rt.notifier.retry(chat_id)
        report.notices_delivered += notices.delivered
        report.notices_failed += notices.failed
        report.notices_abandoned += notices.abandoned
    return outcome


def settle_overdue(
    rt: Runtime, chat_id: str, now_ms: int, report: SweepReport | None = None
) -> str:
    """Settle one chat's overdue request, or continue its stranded claim; returns what
    was done (a report field)."""
    request = rt.stores.requests.get(chat_id, now_ms)
    if request is not None and request.stranded(now_ms, rt.stores.policy.recovery_grace_ms):
        return _recover(rt, request, now_ms)
    if request is None or not request.overdue(now_ms):
        return "skipped"  # answered, ended or renewed since the index was read
    if (
        report is not None
        and request.state is RequestState.CLAIMED
        and request.lease_lapsed(now_ms)
    ):
        report.stuck += 1
    policy = rt.config.timeouts[kind_of(request.card)]
    meta = rt.stores.chats.meta(chat_id)
    if meta.last_turn != request.turn_seq:
        # A newer turn started once this request was abandoned: its run is over.
        try:
            expire_and_release(rt, request, "a newer turn was saved in this chat", now_ms)
        except errors.InterlockError:
            return "skipped"
        _audit(rt, request, "superseded")
        return "superseded"
    try:
        seen = steps.count(rt.stores, request)
        reason = _given_up(rt, request, seen)
        if reason:
            # Earlier settlements died here: end it rather than retry it every minute.
            give_up(rt, request, reason, now_ms, Caller("sweeper"), policy=policy.action)
            return "failed"
        if policy.action == "reroute" and request.route_role is None:
            assert policy.reroute_role is not None
            rt.stores.requests.reroute(request, policy.reroute_role, policy.reroute_extra_s, now_ms)
            _audit(rt, request, "rerouted", role=policy.reroute_role)
            return "rerouted"
        timeouts = {
            asked.interrupt_id: _timeout_response(asked.card, policy.action)
            for asked in request.asked
        }
        statuses = {t["status"] for t in timeouts.values()}
        label = "defaulted" if statuses == {"default"} else "timed_out"
        answer = (label, json.dumps(timeouts, separators=(",", ":"), sort_keys=True))
        # An answer recorded by an earlier claim (a person's, or a timeout whose run
        # failed) wins over this timeout: the claim keeps it, and its event says so. The
        # event rides in the claim, so no recorded answer is ever without one.
        recorded = json.loads(request.response) if request.response else timeouts
        answers = recorded_answers(request, recorded)
        timed_out = answers.label in ("defaulted", "timed_out")
        outcome = answers.label if timed_out else "continued"
        event = "timed_out" if timed_out and request.response is None else "continued"
        told = _event(rt, request, event, decision=answers.label, policy=policy.action)
        # The clock is read at the claim itself: the lease starts now, not at the sweep's start.
        claim = rt.stores.requests.claim_overdue(
            request,
            f"sweeper:{rt.worker_id}",
            rt.clock.now_ms(),
            answer,
            also=[told],
            journal_steps=seen,
        )
    except errors.InterlockError as lost:
        logger.info(
            "chat_id=<%s>, reason=<%s> | overdue request settled elsewhere", chat_id, lost.code
        )
        return "skipped"
    try:
        # Nobody waits on this run: a failure keeps its answer for the next pass.
        continue_claimed(rt, _owner(request), claim, answers, answered_afresh=False)
    except Exception:
        # One request that cannot be settled must not stop the sweep of all the others;
        # its lease lapses and a later sweep retries it, up to the claim cap.
        logger.exception("chat_id=<%s> | settling an overdue request failed", chat_id)
        return "failed"
    if rt.notifier is not None:
        chosen = chosen_text(request, answers.responses)
        rt.notifier.settled(chat_id, request.interrupt_ids, answers.label, None, "sweeper", chosen)
    return outcome


def _recover(rt: Runtime, request: RequestRecord, now_ms: int) -> str:
    """Continue a run whose worker died after its claim, with the answer it recorded:
    the system's own pass, so a person's answer is carried out without another click.
    Under the usual fence and claim cap: a card whose workers keep dying before its run
    records a step is given up; one whose run moves on between deaths goes on."""
    try:
        seen = steps.count(rt.stores, request)
        reason = _given_up(rt, request, seen)
        if reason:
            give_up(rt, request, reason, now_ms, Caller("sweeper"), policy="recovery")
            return "failed"
        # The claim continues the recorded answer: its event is known now, and rides in it.
        answers = recorded_answers(request, json.loads(request.response or "{}"))
        lapsed_ms = now_ms - (request.lease_expires_at_ms or now_ms)
        told = _event(rt, request, "recovered", decision=answers.label, lapsed_ms=lapsed_ms)
        claim = rt.stores.requests.claim_lapsed(
            request, f"sweeper:{rt.worker_id}", rt.clock.now_ms(), also=[told], journal_steps=seen
        )
    except errors.InterlockError as lost:
        logger.info(
            "chat_id=<%s>, reason=<%s> | stranded claim taken elsewhere", request.chat_id, lost.code
        )
        return "skipped"
    try:
        # Nobody waits on this run: a failure keeps the person's answer for the next pass.
        continue_claimed(rt, _owner(request), claim, answers, answered_afresh=False)
    except Exception:
        logger.exception("chat_id=<%s> | continuing a stranded claim failed", request.chat_id)
        return "failed"
    if rt.notifier is not None:
        rt.notifier.settled(
            request.chat_id,
            request.interrupt_ids,
            answers.label,
            request.decided_by,
            "recovery",
            chosen_text(request, answers.responses),
        )
    return "recovered"


def _given_up(rt: Runtime, request: RequestRecord, seen: int) -> str | None:
    """Why `request` is given up (`records.given_up`), its journal holding `seen` steps."""
    policy = rt.stores.policy
    return given_up(
        request,
        policy.max_claims,
        policy.max_failures,
        max_total_claims=policy.max_total_claims,
        steps=seen,
    )


def _timeout_response(card: dict[str, Any], action: str) -> dict[str, Any]:
    default = card.get("default")
    if action == "default" and default is not None:
        return {"status": "default", "answer": default}
    return {"status": "timed_out"}


def _owner(request: RequestRecord) -> Caller:
    # The run resumes as its owner, with the roles they had when it paused; nothing is
    # approved on their behalf (the answer is a timeout).
    return Caller(
        request.user_id,
        frozenset(request.owner_roles),
        trace_id=f"sweep:{keys.checked_id(request.chat_id)}",
    )


def _event(rt: Runtime, request: RequestRecord, event: str, **detail: Any) -> Entry:
    """`_audit`'s event as an entry of the claim that it describes."""
    return audit_entry(
        rt,
        Caller("sweeper"),
        request.chat_id,
        event,
        interrupt_id=request.interrupt_id,
        kind=request.kind,
        **detail,
    )


def _audit(rt: Runtime, request: RequestRecord, event: str, **detail: Any) -> None:
    audit(
        rt,
        Caller("sweeper"),
        request.chat_id,
        event,
        interrupt_id=request.interrupt_id,
        kind=request.kind,
        **detail,
    )
