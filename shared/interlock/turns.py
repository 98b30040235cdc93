"""Running a turn, and settling any run: pause (snapshot → pointer → card) or complete.

`run_turn` and `resume_turn` (in `interlock.resume`) are the service functions the
Lambda handlers and the local server wrap; they share the settling logic here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from strands.agent.agent_result import AgentResult
from strands.models.model import Model

from interlock import errors
from interlock.adapters.factory import Stores
from interlock.answers import kind_of
from interlock.caller import Caller as Caller  # re-exported beside run_turn
from interlock.config import InterlockConfig
from interlock.context import FetchPort, RequestContext, request_scope
from interlock.outcomes import Offer, TurnResult, Usage
from interlock.pause import persist_pause
from interlock.records import PendingRequest
from interlock.runtime.agent import BuiltAgent, build_agent
from interlock.runtime.snapshot import paused_batch_tools, take_snapshot
from interlock.timing import Clock, SystemClock
from interlock.tokens import new_token

logger = logging.getLogger(__name__)

PAUSE_FAILED: Final = (
    "I need a decision from you to go on, but this run could not be saved to wait for "
    "it, so I stopped here. Please ask again."
)
TOO_MANY_OPEN: Final = (
    "I need a decision from you to go on, but you have too many open requests (or opened "
    "them too quickly). Answer or cancel some, then ask again."
)
ASK_POOL: Final = "ASK"
HISTORY_TURNS: Final = 50


@dataclass(frozen=True)
class TurnLimits:
    """Per-user limits and run bounds a turn and a resume both respect."""

    max_concurrent: int = 4
    slot_hold_ms: int = 15 * 60_000
    daily_turns: int = 500
    max_model_calls: int = 12
    heartbeat_s: float = 10.0
    max_prompt_chars: int = 8000


@dataclass(frozen=True)
class Runtime:
    """What the service functions need: stores, a model factory, a clock, limits."""

    stores: Stores
    model_factory: Callable[[], Model]
    clock: Clock = field(default_factory=SystemClock)
    fetch: FetchPort | None = None
    limits: TurnLimits = field(default_factory=TurnLimits)
    worker_id: str = field(default_factory=new_token)
    config: InterlockConfig = field(default_factory=InterlockConfig)


def run_turn(rt: Runtime, caller: Caller, chat_id: str, prompt: str) -> TurnResult:
    """Run one turn of the chat; pause durably if a tool asks a person.

    Raises:
        InvalidInput: empty or oversized prompt, bad chat id.
        Forbidden: the chat belongs to another user.
        ChatBusy: the chat has an open request; answer or cancel it first.
        LimitExceeded: the user's concurrency slots or daily budget are spent.
    """
    now = rt.clock.now_ms()
    if not isinstance(prompt, str) or not prompt.strip():
        raise errors.InvalidInput("the prompt must be non-empty text")
    if len(prompt) > rt.limits.max_prompt_chars:
        raise errors.InvalidInput(f"the prompt is over {rt.limits.max_prompt_chars} characters")
    stores = rt.stores
    owner = stores.chats.meta(chat_id).owner
    if owner not in (None, caller.user_id):
        raise errors.Forbidden("this chat belongs to another user")
    open_request = stores.requests.get(chat_id, now)
    if open_request is not None and open_request.blocks_new_request(now):
        raise errors.ChatBusy("answer or cancel the open request first", open_request)
    with reserved(rt, caller):
        stores.chats.claim_owner(chat_id, caller.user_id)
        history = _history(stores, chat_id)
        turn_seq = stores.chats.append_turn(chat_id, {"role": "user", "text": prompt}, now)
        audit(rt, caller, chat_id, "turn_started", turn=turn_seq)
        built = build_agent(
            rt.model_factory(),
            roles=caller.roles,
            messages=history,
            max_model_calls=rt.limits.max_model_calls,
            config=rt.config,
        )
        context = request_context(rt, caller, chat_id)
        # The agent appends to the list it was given: measure where this turn starts now.
        started = len(built.agent.messages)
        with request_scope(context):
            result = built.agent(prompt)
        return settle(rt, caller, chat_id, built, result, turn_seq, started=started)


@contextmanager
def reserved(rt: Runtime, caller: Caller) -> Iterator[None]:
    """Hold one concurrency slot and one unit of daily budget for the block."""
    now = rt.clock.now_ms()
    holder = new_token()
    limits = rt.limits
    slot = rt.stores.limits.reserve_slot(
        caller.user_id, holder, cap=limits.max_concurrent, hold_ms=limits.slot_hold_ms, now_ms=now
    )
    try:
        day = _day(now)
        rt.stores.limits.spend(
            caller.user_id, day, 1, cap=limits.daily_turns, ttl=now // 1000 + 3 * 86_400
        )
        yield
    finally:
        rt.stores.limits.release_slot(caller.user_id, holder, slot)


def request_context(
    rt: Runtime, caller: Caller, chat_id: str, resuming: PendingRequest | None = None
) -> RequestContext:
    """The context tools see, read fresh from the store (approvals may have changed)."""
    now = rt.clock.now_ms()
    return RequestContext(
        user_id=caller.user_id,
        chat_id=chat_id,
        roles=caller.roles,
        approved=rt.stores.approvals.approved_subjects(chat_id, caller.user_id, now),
        can_ask_a_human=caller.can_ask_a_human,
        resume_card=resuming.card if resuming else None,
        resume_interrupt_id=resuming.interrupt_id if resuming else None,
        trace_id=caller.trace_id,
        outbox=rt.stores.outbox,
        fetch=rt.fetch,
        now_ms=rt.clock.now_ms,
        audit=lambda event, detail: audit(rt, caller, chat_id, event, **detail),
    )


def settle(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    built: BuiltAgent,
    result: AgentResult,
    turn_seq: int,
    *,
    started: int,
    claim: PendingRequest | None = None,
    decision: str | None = None,
) -> TurnResult:
    """Turn a finished run into a result: a durable offer, or a stored final answer.

    With `claim` (a resume), an offer replaces the claimed request in place and a
    final answer finishes it; every write is conditional on still holding the lease.
    """
    calls, usage = _summary(built, result, started)
    if built.limit.tripped:
        audit(rt, caller, chat_id, "model_call_limit", limit=built.limit.max_calls)
    text = str(result).strip() or "(no answer)"
    if result.stop_reason == "interrupt":
        try:
            offer = _offer(rt, caller, chat_id, built, result, turn_seq, claim)
            return TurnResult(
                chat_id,
                "interrupted",
                offer=offer,
                tool_calls=calls,
                usage=usage,
                decision=decision,
            )
        except PauseRefused as refused:
            text = refused.message
    now = rt.clock.now_ms()
    if claim is not None:
        # The answer's key names this claim's lease, so a worker that lost its lease
        # can never overwrite the winner's answer; only the finish records which counts.
        answer_key = rt.stores.blobs.put_answer(
            chat_id,
            claim.interrupt_id,
            {"text": text, "tool_calls": calls},
            version=claim.lease_token,
        )
        rt.stores.requests.finish(
            claim,
            answer_key=answer_key,
            decision=decision or "answered",
            first_answer=text,
            now_ms=now,
        )
        release_ask_slot(rt, claim)
    # The turn keeps a summary of its tool activity so a reloaded thread can show it.
    tools = [{"name": c["name"], "status": c["status"]} for c in calls]
    rt.stores.chats.append_turn(chat_id, {"role": "assistant", "text": text, "tools": tools}, now)
    audit(rt, caller, chat_id, "turn_completed", turn=turn_seq, model_calls=usage.model_calls)
    return TurnResult(
        chat_id, "completed", text=text, tool_calls=calls, usage=usage, decision=decision
    )


class PauseRefused(Exception):
    """The pause cannot be offered; the turn ends with `message` instead of a card."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _offer(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    built: BuiltAgent,
    result: AgentResult,
    turn_seq: int,
    claim: PendingRequest | None,
) -> Offer:
    """Persist the pause (snapshot first, pointer second), or raise `PauseRefused`."""
    if not result.interrupts:
        raise PauseRefused(PAUSE_FAILED)
    interrupt = result.interrupts[0]
    snapshot = take_snapshot(built.agent, {"chat_id": chat_id, "turn_seq": turn_seq})
    card = {
        **dict(interrupt.reason or {}),
        "interrupt_name": interrupt.name,
        "batch_tools": paused_batch_tools(snapshot),
    }
    now = rt.clock.now_ms()
    if claim is not None:
        try:
            offer = _chain(rt, claim, interrupt.id, card, snapshot, now)
        except (errors.TooLarge, errors.StoreError) as exc:
            # The claim is finished with an ordinary message instead of being left
            # claimed for the next click to re-run the agent against.
            audit(rt, caller, chat_id, "pause_failed", reason=exc.code)
            raise PauseRefused(PAUSE_FAILED) from exc
    else:
        ask_slot = _admit(rt, caller, chat_id, now)
        try:
            opened = persist_pause(
                rt.stores,
                chat_id=chat_id,
                user_id=caller.user_id,
                interrupt_id=interrupt.id,
                kind=kind_of(card),
                card=card,
                snapshot=snapshot,
                turn_seq=turn_seq,
                now_ms=now,
                ask_slot=ask_slot,
                owner_roles=tuple(caller.roles),
            )
        except (errors.TooLarge, errors.StoreError) as exc:
            logger.warning("chat_id=<%s>, reason=<%s> | pause could not be saved", chat_id, exc)
            rt.stores.limits.release_slot(caller.user_id, chat_id, ask_slot, pool=ASK_POOL)
            audit(rt, caller, chat_id, "pause_failed", reason=exc.code)
            raise PauseRefused(PAUSE_FAILED) from exc
        offer = Offer(opened.request, opened.secret)
    audit(
        rt,
        caller,
        chat_id,
        "paused",
        interrupt_id=interrupt.id,
        card_id=card.get("card_id"),
        kind=kind_of(card),
        chained=claim is not None,
    )
    return offer


def release_ask_slot(rt: Runtime, request: PendingRequest) -> None:
    """Free the owner's open-request slot once the request has ended."""
    if request.ask_slot is not None:
        rt.stores.limits.release_slot(
            request.user_id, request.chat_id, request.ask_slot, pool=ASK_POOL
        )


def expire_and_release(rt: Runtime, request: PendingRequest, reason: str, now: int) -> None:
    """Expire an answerable request and free its open-request slot."""
    rt.stores.requests.expire(request, reason, now)
    release_ask_slot(rt, request)


def _admit(rt: Runtime, caller: Caller, chat_id: str, now: int) -> int:
    """Backpressure: cap a user's open requests and how fast new ones are opened.

    Returns the user's open-request slot this chat's request holds (one per chat, so
    the chat id is the holder and a chained request keeps it).
    """
    config = rt.config
    try:
        minute = time.strftime("%Y%m%d%H%M", time.gmtime(now // 1000))
        rt.stores.limits.spend(
            caller.user_id, f"asks-{minute}", 1, cap=config.asks_per_minute, ttl=now // 1000 + 120
        )
        expires_at, _ = rt.stores.policy.expiry(now)
        return rt.stores.limits.reserve_slot(
            caller.user_id,
            chat_id,
            cap=config.max_open_requests,
            hold_ms=expires_at * 1000 - now,
            now_ms=now,
            pool=ASK_POOL,
        )
    except errors.LimitExceeded as exc:
        audit(rt, caller, chat_id, "pause_refused", reason=str(exc))
        raise PauseRefused(TOO_MANY_OPEN) from exc


def _chain(
    rt: Runtime,
    claim: PendingRequest,
    interrupt_id: str,
    card: dict[str, Any],
    snapshot: dict[str, Any],
    now: int,
) -> Offer:
    successor, secret = rt.stores.requests.new_request(
        chat_id=claim.chat_id,
        interrupt_id=interrupt_id,
        kind=kind_of(card),
        card=card,
        user_id=claim.user_id,
        turn_seq=claim.turn_seq,
        now_ms=now,
        ask_slot=claim.ask_slot,
        owner_roles=claim.owner_roles,
    )
    rt.stores.blobs.put_snapshot(claim.chat_id, interrupt_id, snapshot)
    rt.stores.requests.chain(claim, successor)
    return Offer(successor, secret)


def audit(rt: Runtime, caller: Caller, chat_id: str, event: str, **detail: Any) -> None:
    """Append an audit event carrying the trace id."""
    rt.stores.chats.record(
        chat_id,
        event,
        caller.user_id,
        rt.clock.now_ms(),
        trace_id=caller.trace_id,
        config_version=rt.config.version,
        **detail,
    )


def _history(stores: Stores, chat_id: str) -> list[Any]:
    """Earlier turns as alternating text messages (same-role neighbours merged)."""
    messages: list[Any] = []
    turns = stores.chats.turns(chat_id, limit=1000)[-HISTORY_TURNS:]
    for turn in turns:
        if messages and messages[-1]["role"] == turn["role"]:
            messages[-1]["content"].append({"text": turn["text"]})
        else:
            messages.append({"role": turn["role"], "content": [{"text": turn["text"]}]})
    while messages and messages[0]["role"] != "user":
        messages.pop(0)
    return messages


def _summary(built: BuiltAgent, result: AgentResult, started: int) -> tuple[list[Any], Usage]:
    messages = built.agent.messages
    names = {
        block["toolUse"]["toolUseId"]: block["toolUse"]
        for message in messages
        for block in message["content"]
        if "toolUse" in block
    }
    results = {
        block["toolResult"]["toolUseId"]: block["toolResult"]
        for message in messages
        for block in message["content"]
        if "toolResult" in block
    }
    calls = []
    for message in messages[started:]:
        for block in message["content"]:
            # A call appears once: with its result, or as pending (paused) when it has none.
            use = block.get("toolUse")
            done = block.get("toolResult")
            if use and use["toolUseId"] not in results:
                calls.append({**_call(use), "status": "pending", "result": None})
            elif done and done["toolUseId"] in names:
                text = " ".join(c.get("text", "") for c in done.get("content", []))
                calls.append(
                    {
                        **_call(names[done["toolUseId"]]),
                        "status": done.get("status"),
                        "result": text,
                    }
                )
    tokens = result.metrics.accumulated_usage
    usage = Usage(
        model_calls=min(built.limit.calls, built.limit.max_calls),
        input_tokens=int(tokens.get("inputTokens", 0)),
        output_tokens=int(tokens.get("outputTokens", 0)),
        tool_executions=built.meter.tool_executions,
    )
    return calls, usage


def _call(use: Any) -> dict[str, Any]:
    return {"id": use["toolUseId"], "name": use["name"], "input": use["input"]}


def _day(now_ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC).strftime("%Y-%m-%d")
