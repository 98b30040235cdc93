"""Running a turn, and settling any run: pause (snapshot → pointer → card) or complete.

`run_turn` and `resume_turn` (in `interlock.resume`) are the service functions the
Lambda handlers and the local server wrap; they share the settling logic here. Every
write after admission is fenced: a new turn's by its running-turn token, a resumed
run's by its claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from strands.agent.agent_result import AgentResult

from interlock import access, errors
from interlock.admission import Held, PauseRefused, admitted, ask_slot_riders
from interlock.audit import audit, audit_entry
from interlock.caller import Caller as Caller  # re-exported beside run_turn
from interlock.context import RequestContext, request_scope
from interlock.deps import Runtime as Runtime  # re-exported beside run_turn
from interlock.deps import TurnLimits as TurnLimits
from interlock.harness.agent import BuiltAgent, build_agent, model_failure
from interlock.harness.progress import ProgressRelay
from interlock.outcomes import TurnResult
from interlock.pause import PAUSE_FAILED as PAUSE_FAILED
from interlock.pause import offer
from interlock.ports import OutboxStore
from interlock.progress import Progress, Started, ignore
from interlock.records import Fence, RequestRecord, Subject, TurnFence
from interlock.transcript import (
    answer_message_id,
    answer_turn,
    history,
    model_messages,
    summary,
    text_message_id,
)

__all__ = ["PAUSE_FAILED", "Caller", "Runtime", "TurnLimits", "conclude", "run_turn"]


def run_turn(
    rt: Runtime, caller: Caller, chat_id: str, prompt: str, progress: Progress = ignore
) -> TurnResult:
    """Run one turn of the chat; pause durably if a tool asks a person.

    `progress` hears `Started` once the turn is admitted, then the run as it goes.

    Raises:
        InvalidInput: empty or oversized prompt, bad chat id.
        Forbidden: the chat belongs to another user.
        ChatBusy: the chat has an open request; answer or cancel it first.
        TurnRunning: another turn of this chat is running.
        LimitExceeded: the user's concurrency slots or daily budget are spent.
    """
    now = rt.clock.now_ms()
    if not isinstance(prompt, str) or not prompt.strip():
        raise errors.InvalidInput("the prompt must be non-empty text")
    if len(prompt) > rt.limits.max_prompt_chars:
        raise errors.InvalidInput(f"the prompt is over {rt.limits.max_prompt_chars} characters")
    stores = rt.stores
    open_request, seen, settled = stores.requests.read_for_turn(chat_id, now)
    # Cheap early refusals; the admission write below is what decides.
    access.require_owner(caller, seen.owner)
    if open_request is not None and open_request.blocks_new_request(now):
        raise errors.ChatBusy("answer or cancel the open request first", open_request)
    if seen.running(now):
        raise errors.TurnRunning("a turn is already running in this chat; wait for its answer")
    # A chat's first turn has no history to read.
    earlier = history(stores, chat_id) if seen.last_turn else []
    # A pointer read absent or ended, as of the chat's meta item, needs no second look.
    admission = admitted(rt, caller, seen, prompt, now, request_settled=settled)
    with admission as (fence, turn_seq, held):
        try:
            progress(Started())
            relay = ProgressRelay(progress, partial(text_message_id, chat_id, turn_seq, None))
            built = build_agent(rt, caller, chat_id, history=earlier, progress=relay)
            context = request_context(rt, caller, chat_id, fence=fence)
            # The agent appends to the list it was given: measure where this turn starts now.
            started = len(built.agent.messages)
            with request_scope(context):
                result = built.agent(prompt)
            ended = conclude(
                rt,
                caller,
                chat_id,
                built,
                result,
                turn_seq,
                started=started,
                fence=fence,
                held=held,
            )
        except BaseException as failure:
            failed = model_failure(failure)
            reason = failed.code if failed is not None else type(failure).__name__
            failing = audit_entry(rt, caller, chat_id, "turn_failed", turn=turn_seq, reason=reason)
            # The chat is free again, and the trail says why; nothing else was saved.
            stores.turns.abandon(fence, also=[failing])
            if failed is not None:
                raise failed from failure
            raise
    if ended.offer is not None and rt.notifier is not None:
        rt.notifier.opened(ended.offer.request)
    return ended


@dataclass(frozen=True)
class FencedOutbox:
    """The outbox as a tool sees it: every record is fenced by the run's claim or turn."""

    outbox: OutboxStore
    fence: Fence

    def put_once(self, key: str, payload: dict[str, Any], now_ms: int) -> bool:
        return self.outbox.put_once(key, payload, now_ms, fence=self.fence)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.outbox.get(key)


def request_context(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    *,
    fence: Fence,
    resuming: RequestRecord | None = None,
    granted: frozenset[Subject] = frozenset(),
) -> RequestContext:
    """The context tools see. Approvals are read fresh from the store, when a tool first
    needs one that is not among those this run's own answer `granted`."""
    approvals = rt.stores.approvals
    return RequestContext(
        user_id=caller.user_id,
        chat_id=chat_id,
        roles=caller.roles,
        approved=granted,
        look_up=lambda subjects: approvals.approved_among(
            chat_id, caller.user_id, subjects, rt.clock.now_ms()
        ),
        can_ask_a_human=caller.can_ask_a_human,
        resume_cards=tuple(a.card for a in resuming.asked) if resuming else (),
        trace_id=caller.trace_id,
        outbox=FencedOutbox(rt.stores.outbox, fence),
        fetch=rt.fetch,
        now_ms=rt.clock.now_ms,
        audit=lambda event, detail: audit(rt, caller, chat_id, event, fence=fence, **detail),
    )


def conclude(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    built: BuiltAgent,
    result: AgentResult,
    turn_seq: int,
    *,
    started: int,
    fence: TurnFence | None = None,
    claim: RequestRecord | None = None,
    decision: str | None = None,
    held: Held | None = None,
) -> TurnResult:
    """Turn a finished run into a result: a durable offer, or a stored final answer.

    A new turn (`fence`) opens its request or saves its answer in the same transaction
    that releases the chat. A resumed run (`claim`) chains its next request in place or
    finishes with its answer and transcript in one transaction, fenced by the claim.
    The run's slot (`held`) is given back in that same transaction.
    """
    riders = held.riders(rt) if held else []
    calls, usage = summary(built, result, started)
    if built.limit.tripped:
        audit(rt, caller, chat_id, "model_call_limit", limit=built.limit.max_calls)
    interrupt_id = claim.interrupt_id if claim else None
    # The model's last message streamed under its own id; a note of Interlock's own
    # (no answer, a pause refused) has the run's answer id.
    text = str(result).strip()
    message_id = text_message_id(
        chat_id, turn_seq, interrupt_id, model_messages(built, started) - 1
    )
    if not text:
        text, message_id = "(no answer)", answer_message_id(chat_id, turn_seq, interrupt_id)
    if result.stop_reason == "interrupt":
        try:
            made = offer(
                rt, caller, chat_id, built, result, turn_seq, fence=fence, claim=claim, also=riders
            )
            if held:
                held.released = True
            return TurnResult(
                chat_id, "interrupted", offer=made, tool_calls=calls, usage=usage, decision=decision
            )
        except PauseRefused as refused:
            text, message_id = refused.message, answer_message_id(chat_id, turn_seq, interrupt_id)
    now = rt.clock.now_ms()
    turn = answer_turn(text, calls)
    # The event commits with the answer it describes; a resumed run's also names the
    # worker that finished it (its finished pointer keeps no lease).
    ran_by = {"worker": rt.worker_id} if claim is not None else {}
    completed = audit_entry(
        rt,
        caller,
        chat_id,
        "turn_completed",
        turn=turn_seq,
        model_calls=usage.model_calls,
        **ran_by,
    )
    if claim is not None:
        # A small answer is stored in the finish itself; a large one in S3 first, under a
        # key naming this claim's fence, so a worker that lost its claim can never
        # overwrite the winner's answer: only the finish records which one counts.
        rest = {"tool_calls": calls, "message_id": message_id}
        answer_key = None
        if not rt.stores.requests.answer_fits(claim, text, rest):
            answer_key = rt.stores.blobs.put_answer(
                chat_id, claim.interrupt_id, {"text": text, **rest}, version=claim.fence.token
            )
        rt.stores.requests.finish(
            claim,
            answer_key=answer_key,
            answer=rest if answer_key is None else None,
            decision=decision or "answered",
            final_text=text,
            now_ms=now,
            also=[
                *rt.stores.turns.answer_entries(chat_id, claim.turn_seq, turn, now),
                completed,
                *riders,
                *ask_slot_riders(rt, claim),
            ],
        )
    else:
        assert fence is not None, "a new turn always holds its admission fence"
        rt.stores.turns.complete(fence, turn_seq, turn, now, also=[completed, *riders])
    if held:
        held.released = True
    return TurnResult(
        chat_id,
        "completed",
        text=text,
        tool_calls=calls,
        usage=usage,
        decision=decision,
        message_id=message_id,
    )
