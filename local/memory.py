"""In-memory stores: every port of `interlock.ports`, with the moto adapters' semantics.

The service and handler tiers run on these (`memory_stores()`), the contract suite
(`tests/adapters`) holds them to the same tests as the DynamoDB and S3 adapters, and
the adapter, end-to-end, race and crash tiers keep moto, where the real wire matters.

All stores of one `Memory` share its state and one lock: each write is a transaction
(`Memory.commit`) whose checks all run before anything changes, so a write that loses
leaves every record as it was, as DynamoDB's conditional writes and transactions do. A
store's `Entry` for another store's transaction carries a `Write` (what it checks, what
it changes, and whether it only rides along), which the committing store runs with its
own. Records are kept as the domain's values; the pointer's size is reckoned on the item
the DynamoDB adapter would store, so the same card is too large in both.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from interlock import errors, keys
from interlock.adapters.blobs import BlobStore
from interlock.adapters.channelstore import checked_external
from interlock.adapters.requests import FINISHED, answer_fits, check_size, stored_size, text_fits
from interlock.channels import ChannelName, Link, Notice
from interlock.errors import LimitExceeded, StoreError
from interlock.ports import Entry, EntryRefused, NotPending, Role, Stores
from interlock.records import (
    OPEN_STATES,
    SECRET_FIELDS,
    AnswerRule,
    Approval,
    AuditEvent,
    ChatMeta,
    ClaimFence,
    Fence,
    InboxCursor,
    InboxEntry,
    RequestRecord,
    RequestState,
    Subject,
    Surface,
    TurnFence,
    answer_rule,
    binding_refusal,
    claim_progress,
    journal_of,
    refusal,
    unanswerable,
)
from interlock.timing import EDIT_HOLD_MS, StorePolicy, surely_passed
from interlock.tokens import new_token

MAX_TRANSACTION = 100  # DynamoDB's entries per transaction
ENDED = frozenset({RequestState.DONE, RequestState.EXPIRED, RequestState.CANCELLED})


@dataclass
class Write:
    """One entry of a transaction: whether its condition holds, what it changes, and
    the item it is about (DynamoDB refuses two entries on one item in a transaction)."""

    check: Callable[[], bool]
    apply: Callable[[], None]
    optional: bool = False  # rides along: when it loses, only it is dropped
    item: tuple[Any, ...] | None = None


class Refused(Exception):
    """A transaction's entry lost its condition; `index` counts the store's own writes
    first, then the entries of `also`. Nothing was written."""

    def __init__(self, index: int) -> None:
        super().__init__(f"entry {index} was refused")
        self.index = index


def entry(role: Role, write: Write) -> Entry:
    """An entry of another store's transaction, as the in-memory stores make it."""
    return Entry(role, {"memory": write})


def _write_of(given: Entry) -> Write:
    found = given.write.get("memory")
    if not isinstance(found, Write):
        raise TypeError("an in-memory store commits only entries in-memory stores made")
    return found


@dataclass
class Memory:
    """The state of one table and bucket, and the lock every transaction takes."""

    requests: dict[str, RequestRecord] = field(default_factory=dict)
    steps: dict[tuple[str, str], dict[int, str]] = field(default_factory=dict)
    metas: dict[str, ChatMeta] = field(default_factory=dict)
    turns: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    events: dict[str, dict[int, AuditEvent]] = field(default_factory=dict)
    approvals: dict[tuple[str, str], dict[Subject, Approval]] = field(default_factory=dict)
    admin: dict[Subject, Approval] = field(default_factory=dict)
    slots: dict[tuple[str, str, int], tuple[str, int]] = field(default_factory=dict)
    budgets: dict[tuple[str, str], int] = field(default_factory=dict)
    rates: dict[str, tuple[int, int]] = field(default_factory=dict)  # minute, opened in it
    outbox: dict[str, dict[str, Any]] = field(default_factory=dict)
    objects: dict[str, bytes] = field(default_factory=dict)
    links: dict[tuple[str, str], Link] = field(default_factory=dict)
    deliveries: set[tuple[str, str]] = field(default_factory=set)
    notices: dict[tuple[str, str, str], Notice] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def commit(self, own: Sequence[Write], also: Iterable[Entry] | None = ()) -> None:
        """Check every entry, then apply them all, or raise `Refused` naming the first
        that lost (not counting those that only ride along) and change nothing."""
        writes = [*own, *(_write_of(e) for e in also or ())]
        items = [w.item for w in writes if w.item is not None]
        if len(writes) > MAX_TRANSACTION or len(items) != len(set(items)):
            # DynamoDB refuses it whole (a ValidationException), as the adapters report it
            raise StoreError("write failed: ValidationException")
        with self.lock:
            lost = [i for i, w in enumerate(writes) if not w.check()]
            required = [i for i in lost if not writes[i].optional]
            if required:
                raise Refused(required[0])
            for index, write in enumerate(writes):
                if index not in lost:
                    write.apply()

    def fence_holds(self, fence: Fence) -> bool:
        """Whether `fence` is still held: the claim on the pointer, or the turn's token."""
        if isinstance(fence, ClaimFence):
            return _holds(self.requests.get(fence.chat_id), fence)
        return self.metas.get(fence.chat_id, ChatMeta(fence.chat_id)).run_token == (fence.run_token)

    def fence_check(self, fence: Fence, *, effect: bool = False) -> Write:
        """The write that holds only while `fence` does; with `effect`, a claim's check
        also marks the request acted on (as the DynamoDB adapter's `fenced`)."""

        def mark() -> None:
            if effect and isinstance(fence, ClaimFence):
                current = self.requests[fence.chat_id]
                self.requests[fence.chat_id] = current.with_changes(acted=True)

        item = ("REQUEST", fence.chat_id) if isinstance(fence, ClaimFence) else None
        return Write(lambda: self.fence_holds(fence), mark, item=item or ("META", fence.chat_id))

    def fenced(
        self, fence: Fence | None, writes: Sequence[Write], action: str, effect: bool = False
    ) -> None:
        """Commit `writes` behind `fence` (`LeaseLost` when it is not held, `Refused`
        indexed as `writes` when one of theirs lost)."""
        if fence is None:
            self.commit(writes)
            return
        try:
            self.commit([self.fence_check(fence, effect=effect), *writes])
        except Refused as refused:
            if refused.index == 0:
                raise errors.LeaseLost(
                    f"{action}: the claim or turn was lost; nothing written"
                ) from None
            raise Refused(refused.index - 1) from None


def memory_stores(policy: StorePolicy | None = None, memory: Memory | None = None) -> Stores:
    """Every store on one `Memory` (a new one unless given)."""
    policy = policy or StorePolicy()
    memory = memory or Memory()
    return Stores(
        requests=MemoryRequests(memory, policy),
        approvals=MemoryApprovals(memory, policy.approval_ttl_s),
        chats=MemoryChats(memory),
        turns=MemoryTurns(memory),
        limits=MemoryLimits(memory),
        outbox=MemoryOutbox(memory),
        blobs=BlobStore(MemoryBucket(memory), "memory", policy.max_snapshot_bytes),
        policy=policy,
        channels=MemoryChannels(memory, policy.retention_s * 10),
    )


# -- the pointer -------------------------------------------------------------------------


def _chat(chat_id: str) -> str:
    """The chat id, refused (`InvalidInput`) where the DynamoDB adapter's key would be."""
    keys.chat_pk(chat_id)
    return chat_id


def _user(user_id: str) -> str:
    keys.user_pk(user_id)
    return user_id


def _holds(current: RequestRecord | None, fence: ClaimFence) -> bool:
    return (
        current is not None
        and current.state is RequestState.CLAIMED
        and current.lease_token == fence.lease_token
        and current.claim_count == fence.claim_count
    )


def _lapsed(r: RequestRecord, now_ms: int) -> bool:
    """The DynamoDB adapter's `LEASE_LAPSED`: over by every clock (`surely_passed`)."""
    return (
        r.state is RequestState.CLAIMED
        and r.lease_expires_at_ms is not None
        and r.lease_expires_at_ms <= surely_passed(now_ms)
    )


def _past_expiry(r: RequestRecord, now_ms: int) -> bool:
    """The DynamoDB adapter's `PAST_EXPIRY`: past the stated expiry by every clock."""
    return r.expires_at <= surely_passed(now_ms) // 1000


def _pending_or_lapsed(r: RequestRecord, now_ms: int) -> bool:
    return r.state is RequestState.PENDING or _lapsed(r, now_ms)


def _overdue(r: RequestRecord, now_ms: int) -> bool:
    """The DynamoDB adapter's `NOT_OVERDUE`, negated: unanswered and past its expiry
    (by this clock: the person's side, as `NOT_EXPIRED`)."""
    return r.state is RequestState.PENDING and r.expires_at <= now_ms // 1000


def no_open_request(current: RequestRecord | None, now_ms: int) -> bool:
    """The DynamoDB adapter's `NO_OPEN_REQUEST`: absent, ended, or abandoned."""
    if current is None or current.state in ENDED:
        return True
    return _past_expiry(current, now_ms) and _pending_or_lapsed(current, now_ms)


def _changed(
    current: RequestRecord | None, interrupt_id: str, now_ms: int
) -> errors.InterlockError:
    return unanswerable(current, interrupt_id, now_ms) or errors.ResumeInProgress(
        "the request changed since it was read; retry", current
    )


class MemoryRequests:
    """`RequestPort` in memory: the pointer's transitions under the DynamoDB adapter's
    conditions, each one check-then-change under the lock."""

    def __init__(self, memory: Memory, policy: StorePolicy) -> None:
        self._m = memory
        self._policy = policy

    # -- reads

    def get(self, chat_id: str, now_ms: int) -> RequestRecord | None:
        with self._m.lock:
            found = copy.deepcopy(self._m.requests.get(_chat(chat_id)))
        return found if found is not None and found.ttl > now_ms // 1000 else None

    def get_with_chat(self, chat_id: str, now_ms: int) -> tuple[RequestRecord | None, ChatMeta]:
        with self._m.lock:
            meta = self._m.metas.get(chat_id, ChatMeta(chat_id))
            return self.get(chat_id, now_ms), meta

    def read_for_turn(
        self, chat_id: str, now_ms: int
    ) -> tuple[RequestRecord | None, ChatMeta, bool]:
        with self._m.lock:  # one instant, as the table's transactional read
            found = self._m.requests.get(_chat(chat_id))
            request, meta = self.get_with_chat(chat_id, now_ms)
            return request, meta, found is None or found.state not in OPEN_STATES

    # -- opening

    def open(self, request: RequestRecord, now_ms: int, also: list[Entry] | None = None) -> None:
        _chat(request.chat_id)
        check_size(self._policy, stored_size(request))
        m = self._m

        stored = copy.deepcopy(request)

        def put() -> None:
            m.requests[request.chat_id] = stored

        own = Write(
            lambda: no_open_request(m.requests.get(request.chat_id), now_ms),
            put,
            item=("REQUEST", request.chat_id),
        )
        with m.lock:  # a refusal names the record as it stood when the condition failed
            try:
                m.commit([own], also)
            except Refused as refused:
                if refused.index == 0:
                    current = copy.deepcopy(m.requests.get(request.chat_id))
                    raise errors.ChatBusy(
                        "this chat already has an open request", current
                    ) from None
                raise EntryRefused((also or [])[refused.index - 1].role) from None

    def notified(
        self, chat_id: str, interrupt_id: str, *, posted: bool = False, now_ms: int = 0
    ) -> None:
        with self._m.lock:
            current = self._m.requests.get(_chat(chat_id))
            if current is None or current.interrupt_id != interrupt_id:
                return
            if current.state in OPEN_STATES:
                self._m.requests[chat_id] = current.with_changes(
                    notify_due_ms=None, posted=current.posted or posted
                )
            elif posted and not current.owes_edits:
                # Ended by a write that knew of no post: their edit is owed from here.
                self._m.requests[chat_id] = current.with_changes(
                    posted=True, notify_due_ms=now_ms + EDIT_HOLD_MS
                )

    def edits_recorded(self, chat_id: str, interrupt_ids: Collection[str]) -> None:
        with self._m.lock:
            current = self._m.requests.get(_chat(chat_id))
            if (
                current is not None
                and current.interrupt_id in interrupt_ids
                and current.state in ENDED
                and current.notify_due_ms is not None
            ):
                self._m.requests[chat_id] = current.with_changes(notify_due_ms=None)

    def rotate_secret(
        self, request: RequestRecord, surface: Surface, secret_hash: str, now_ms: int
    ) -> RequestRecord:
        iid = request.interrupt_id
        return self._updated(
            request.chat_id,
            lambda r: (
                r.interrupt_id == iid
                and _pending_or_lapsed(r, now_ms)
                and r.expires_at > now_ms // 1000
            ),
            lambda r: r.with_changes(**{SECRET_FIELDS[surface]: secret_hash}),
            lost=lambda cur: _changed(cur, iid, now_ms),
        )

    # -- claim, lease, finish

    def claim(
        self,
        request: RequestRecord,
        secret: str,
        worker: str,
        now_ms: int,
        answer: tuple[str, str] = ("answered", "null"),
        *,
        by: str | None = None,
        via: str = "api",
        replaces: Sequence[Entry] = (),
        also: Sequence[Entry] = (),
        journal_steps: int | None = None,
    ) -> RequestRecord:
        problem = refusal(request, request.interrupt_id, secret, now_ms)
        if problem is not None:
            raise problem
        rule = answer_rule(request, answer[1])
        if rule is AnswerRule.BINDING:
            raise binding_refusal(request)
        replacing = rule is AnswerRule.REPLACE

        def holds(r: RequestRecord) -> bool:
            return self._claimable_as_read(r, request, secret, now_ms) and not (
                replacing and r.acted
            )

        def lost(cur: RequestRecord | None) -> errors.InterlockError:
            problem = refusal(cur, request.interrupt_id, secret, now_ms)
            if problem is None and cur is not None and replacing and cur.acted_on:
                return binding_refusal(cur)
            return problem or _changed(cur, request.interrupt_id, now_ms)

        progress = claim_progress(
            request, self._counted(request, journal_steps), new_journal=replacing
        )
        claimed = self._claimed_by(
            worker, now_ms, answer, by, via, progress=progress, replace=replacing
        )
        riders = [Entry(e.role, {"memory": _optional(_write_of(e))}) for e in replaces]
        return self._updated(
            request.chat_id,
            holds,
            claimed,
            lost=lost,
            also=[*(riders if replacing else []), *also],
        )

    def claim_with(
        self,
        request: RequestRecord,
        secret: str,
        worker: str,
        now_ms: int,
        answer: tuple[str, str],
        also: Callable[[RequestRecord], list[Entry]],
        *,
        by: str | None = None,
        via: str = "api",
    ) -> RequestRecord:
        if request.state is not RequestState.PENDING:
            raise ValueError("only a pending request is claimed in one transaction")
        problem = refusal(request, request.interrupt_id, secret, now_ms)
        if problem is not None:
            raise problem
        progress = claim_progress(request, 0, new_journal=True)  # a pending one has no journal
        change = self._claimed_by(worker, now_ms, answer, by, via, progress=progress)
        claimed = change(request)

        def holds() -> bool:
            r = self._m.requests.get(request.chat_id)
            return (
                r is not None
                and r.interrupt_id == request.interrupt_id
                and r.secret_field(secret) is not None
                and r.state is RequestState.PENDING
                and r.claim_count == request.claim_count
                and r.expires_at == request.expires_at
                and r.journal_id is None
            )

        def put() -> None:
            # The claim's own fields, on the record as it stands (a cleared notice mark
            # stays cleared), as the adapter's update sets only those.
            self._m.requests[request.chat_id] = change(self._m.requests[request.chat_id])

        riders = also(claimed)
        with self._m.lock:
            try:
                self._m.commit([Write(holds, put, item=("REQUEST", request.chat_id))], riders)
                return claimed
            except Refused as refused:
                if refused.index > 0:
                    raise EntryRefused(riders[refused.index - 1].role) from None
                current = copy.deepcopy(self._m.requests.get(request.chat_id))
        problem = refusal(current, request.interrupt_id, secret, now_ms)
        if problem is None and current is not None and current.state is RequestState.CLAIMED:
            raise NotPending(current) from None
        raise problem or _changed(current, request.interrupt_id, now_ms) from None

    def renew(self, claim: RequestRecord, now_ms: int) -> int:
        if claim.resume_deadline_ms is None:
            raise errors.LeaseLost("this record holds no claim")
        until = min(now_ms + self._policy.lease_ms, claim.resume_deadline_ms)
        fence = claim.fence
        self._updated(
            claim.chat_id,
            lambda r: (
                _holds(r, fence)
                and r.resume_deadline_ms is not None
                and r.resume_deadline_ms > now_ms
            ),
            lambda r: r.with_changes(lease_expires_at_ms=until),
            lost=lambda _: errors.LeaseLost("the lease was lost or reached its deadline"),
        )
        return until

    def record_step(self, claim: RequestRecord, seq: int, entry: str, *, acting: bool) -> None:
        journal_id = claim.journal_id
        if journal_id is None:
            raise ValueError("only a claim that recorded its answer has a journal")
        steps = self._m.steps

        def put() -> None:
            steps.setdefault((claim.chat_id, journal_id), {})[seq] = entry

        fresh = Write(
            lambda: seq not in steps.get((claim.chat_id, journal_id), {}),
            put,
            item=("STEP", claim.chat_id, journal_id, seq),
        )
        try:
            self._m.fenced(claim.fence, [fresh], "record step", effect=acting)
        except Refused:
            raise StoreError(f"record step failed: step {seq} was recorded") from None

    def steps(self, claim: RequestRecord) -> list[str]:
        if claim.journal_id is None:
            return []
        with self._m.lock:
            found = self._m.steps.get((claim.chat_id, claim.journal_id), {})
            return [found[seq] for seq in sorted(found)]

    def _counted(self, request: RequestRecord, journal_steps: int | None) -> int:
        return journal_steps if journal_steps is not None else len(self.steps(request))

    def mark_acted(self, fence: ClaimFence) -> None:
        try:
            self._m.commit([self._m.fence_check(fence, effect=True)])
        except Refused:
            raise errors.LeaseLost("the claim was lost; the tool did not start") from None

    def finish(
        self,
        claim: RequestRecord,
        *,
        answer_key: str | None,
        decision: str,
        now_ms: int,
        final_text: str | None = None,
        answer: dict[str, Any] | None = None,
        also: list[Entry] | None = None,
    ) -> RequestRecord:
        inline = (
            json.dumps(answer, separators=(",", ":"), sort_keys=True, default=str)
            if answer_key is None and answer is not None
            else None
        )
        if answer_key is None and (inline is None or final_text is None):
            raise ValueError("an answer is stored in S3 or inline, with its text")
        kept = (
            final_text
            if final_text is not None
            and (inline is not None or text_fits(self._policy, claim, final_text))
            else None
        )
        fence = claim.fence
        changes = {
            "state": RequestState.DONE,
            "decision": decision,
            "answered_at": now_ms // 1000,
            **FINISHED,
            **({"answer_key": answer_key} if answer_key is not None else {}),
            **({"answer": inline} if inline is not None else {}),
            **({"final_text": kept} if kept is not None else {}),
            **_edits_owed(claim, now_ms + EDIT_HOLD_MS),
        }
        try:
            done = self._updated(
                claim.chat_id,
                lambda r: _holds(r, fence),
                lambda r: r.with_changes(**changes),
                lost=lambda _: errors.LeaseLost("the claim was lost before the answer was stored"),
                also=also or (),
            )
        except EntryRefused:
            raise errors.StoreError("finish request failed: the transcript moved on") from None
        return done

    def answer_fits(self, claim: RequestRecord, text: str, answer: dict[str, Any]) -> bool:
        return answer_fits(self._policy, claim, text, answer)

    def chain(
        self, claim: RequestRecord, successor: RequestRecord, also: list[Entry] | None = None
    ) -> None:
        if claim.owes_edits:  # the claimed request ends here: see `RequestStore.chain`
            edits_due = (successor.created_ms or successor.created_at * 1000) + EDIT_HOLD_MS
            due = min(successor.notify_due_ms or edits_due, edits_due)
            successor = successor.with_changes(notify_due_ms=due)
        placed = copy.deepcopy(successor.with_changes(claim_count=0, stalls=0, journal_seen=0))
        check_size(self._policy, stored_size(placed))
        fence = claim.fence
        try:
            self._updated(
                claim.chat_id,
                lambda r: _holds(r, fence),
                lambda r: placed,
                lost=lambda _: _lost(),
                also=also,
            )
        except (errors.LeaseLost, EntryRefused):
            raise errors.LeaseLost("the claim was lost; the next request was not written") from None

    def release(
        self, claim: RequestRecord, now_ms: int, *, reset: bool, also: list[Entry] | None = None
    ) -> RequestRecord:
        fence = claim.fence
        token = new_token()
        if reset:
            try:
                return self._updated(
                    claim.chat_id,
                    lambda r: _holds(r, fence) and not r.acted,
                    lambda r: r.reset(token),
                    lost=lambda cur: (
                        _Kept() if cur and cur.lease_token == claim.lease_token else _lost()
                    ),
                    also=also or (),
                )
            except (_Kept, EntryRefused):
                pass  # acted on, or a grant changed under us: keep the answer
        return self._updated(
            claim.chat_id,
            lambda r: _holds(r, fence),
            lambda r: r.with_changes(
                lease_token=token,
                lease_expires_at_ms=surely_passed(now_ms),  # `RELEASE_SET`'s `:released_ms`
                claim_count=r.claim_count - 1,
                failures=r.failures + 1,
                stalls=max(r.stalls - 1, 0),
            ),
            lost=lambda _: _lost(),
        )

    def end_claimed(self, claim: RequestRecord, reason: str) -> RequestRecord:
        fence = claim.fence
        return self._updated(
            claim.chat_id,
            lambda r: _holds(r, fence),
            lambda r: r.with_changes(
                state=RequestState.EXPIRED,
                ended_reason=reason,
                journal_id=None,
                # As `RequestStore.end_claimed`: owed at once, from when it was claimed.
                **_edits_owed(claim, self._claimed_ms(claim)),
            ),
            lost=lambda _: errors.LeaseLost("the claim was already lost"),
        )

    def _claimed_ms(self, claim: RequestRecord) -> int:
        """When the claim was taken (or last renewed), by the claim's own clock."""
        return (claim.lease_expires_at_ms or self._policy.lease_ms) - self._policy.lease_ms

    # -- the sweeper

    def overdue(self, shard: str, now_ms: int, limit: int) -> list[str]:
        return self._due(shard, lambda r: r.expires_at, now_ms // 1000, limit)

    def lapsed(self, shard: str, before_ms: int, limit: int) -> list[str]:
        return self._due(shard, lambda r: r.lease_expires_at_ms, before_ms, limit)

    def _due(
        self, shard: str, sort: Callable[[RequestRecord], int | None], upto: int, limit: int
    ) -> list[str]:
        with self._m.lock:
            found = [
                (value, chat)
                for chat, r in self._m.requests.items()
                if r.state in OPEN_STATES
                and (value := sort(r)) is not None
                and value <= upto
                and keys.sweep_shard(chat, keys.SWEEP_SHARDS) == shard
            ]
        return [chat for _, chat in sorted(found)[:limit]]

    def claim_lapsed(
        self,
        request: RequestRecord,
        worker: str,
        now_ms: int,
        also: Sequence[Entry] = (),
        *,
        journal_steps: int | None = None,
    ) -> RequestRecord:
        recorded = (request.decision or "answered", request.response or "null")
        progress = claim_progress(request, self._counted(request, journal_steps))
        return self._updated(
            request.chat_id,
            lambda r: (
                r.interrupt_id == request.interrupt_id
                and _lapsed(r, now_ms)
                and r.claim_count == request.claim_count
            ),
            self._claimed_by(worker, now_ms, recorded, None, "recovery", progress=progress),
            lost=lambda cur: errors.ResumeInProgress("another worker took it over first", cur),
            also=also,
        )

    def open_for(
        self, user_id: str, limit: int, after: InboxCursor | None = None
    ) -> list[InboxEntry]:
        keys.checked_id(user_id, "user id")
        with self._m.lock:
            open_ones = [
                r
                for r in self._m.requests.values()
                # The inbox index's sort key: a record without one is not in it.
                if r.state in OPEN_STATES
                and r.user_id == user_id
                and r.created_ms
                and (after is None or (r.created_ms, r.chat_id) < after)
            ]
        # Newest first; the chat orders those opened in the same millisecond.
        open_ones.sort(key=lambda r: (r.created_ms, r.chat_id), reverse=True)
        return [
            InboxEntry(
                chat_id=r.chat_id,
                interrupt_id=r.interrupt_id,
                kind=r.kind,
                card=copy.deepcopy(r.card),
                created_at=r.created_at,
                expires_at=r.expires_at,
                state=r.state,
                questions=1 + len(r.also_asked),
                created_ms=r.created_ms,
            )
            for r in open_ones[:limit]
        ]

    def claim_overdue(
        self,
        request: RequestRecord,
        worker: str,
        now_ms: int,
        answer: tuple[str, str],
        also: Sequence[Entry] = (),
        *,
        journal_steps: int | None = None,
    ) -> RequestRecord:
        progress = claim_progress(request, self._counted(request, journal_steps))
        return self._updated(
            request.chat_id,
            lambda r: (
                r.interrupt_id == request.interrupt_id
                and _pending_or_lapsed(r, now_ms)
                and _past_expiry(r, now_ms)
                and r.claim_count == request.claim_count
            ),
            self._claimed_by(worker, now_ms, answer, None, "sweeper", progress=progress),
            lost=lambda cur: errors.ResumeInProgress("another worker settled it first", cur),
            also=also,
        )

    def reroute(
        self, request: RequestRecord, role: str, extra_s: int, now_ms: int
    ) -> RequestRecord:
        latest = request.created_at + self._policy.latest_expiry_s()
        expires_at = min(now_ms // 1000 + extra_s, latest)
        return self._updated(
            request.chat_id,
            lambda r: (
                r.interrupt_id == request.interrupt_id
                and r.state is RequestState.PENDING
                and _past_expiry(r, now_ms)
                and r.claim_count == request.claim_count
                and r.route_role is None
            ),
            lambda r: r.with_changes(
                route_role=role, expires_at=expires_at, ttl=expires_at + self._policy.retention_s
            ),
            lost=lambda cur: errors.ResumeInProgress("the request changed; not rerouted", cur),
        )

    # -- ending without an answer

    def expire(
        self,
        request: RequestRecord,
        reason: str,
        now_ms: int,
        also: list[Entry] | None = None,
    ) -> RequestRecord:
        return self._end(request, RequestState.EXPIRED, reason, now_ms, also=also or ())

    def cancel(
        self,
        request: RequestRecord,
        reason: str,
        now_ms: int,
        also: list[Entry] | None = None,
    ) -> RequestRecord:
        return self._end(
            request, RequestState.CANCELLED, reason, now_ms, acted_ok=False, also=also or ()
        )

    def _end(
        self,
        request: RequestRecord,
        state: RequestState,
        reason: str,
        now_ms: int,
        *,
        acted_ok: bool = True,
        also: Sequence[Entry] = (),
    ) -> RequestRecord:
        def lost(cur: RequestRecord | None) -> errors.InterlockError:
            if not acted_ok and cur is not None and cur.acted_on and cur.response is not None:
                return binding_refusal(cur)
            return _changed(cur, request.interrupt_id, now_ms)

        ended = self._updated(
            request.chat_id,
            lambda r: (
                r.interrupt_id == request.interrupt_id
                and _pending_or_lapsed(r, now_ms)
                and r.claim_count == request.claim_count
                and (acted_ok or not (r.acted or _overdue(r, now_ms)))
            ),
            lambda r: r.with_changes(
                state=state, ended_reason=reason, **_edits_owed(request, now_ms + EDIT_HOLD_MS)
            ),
            lost=lost,
            also=also,
        )
        # With riders, the adapter answers from the record as read, not as written.
        return request.with_changes(state=state, ended_reason=reason) if also else ended

    # -- plumbing

    def _claimable_as_read(
        self, r: RequestRecord, read: RequestRecord, secret: str, now_ms: int
    ) -> bool:
        return (
            r.interrupt_id == read.interrupt_id
            and r.secret_field(secret) is not None  # as `HASH_MATCHES`
            and _pending_or_lapsed(r, now_ms)
            and r.expires_at > now_ms // 1000
            and r.claim_count == read.claim_count
        )

    def _claimed_by(
        self,
        worker: str,
        now_ms: int,
        answer: tuple[str, str],
        by: str | None,
        via: str,
        *,
        progress: tuple[int, int],
        replace: bool = False,
    ) -> Callable[[RequestRecord], RequestRecord]:
        """The change a claim makes: `CLAIM_SET` (the first answer recorded, a takeover
        keeping it), or `CLAIM_REPLACE_SET` with `replace`; with `progress`, the stalls
        and journal steps seen that the claim records (`records.claim_progress`)."""
        token = new_token()
        decided_by = by if by is not None else via

        def claimed(r: RequestRecord) -> RequestRecord:
            lease = {
                "state": RequestState.CLAIMED,
                "worker": worker,
                "lease_token": token,
                "lease_expires_at_ms": now_ms + self._policy.lease_ms,
                "resume_deadline_ms": now_ms + self._policy.max_resume_ms,
                "claim_count": r.claim_count + 1,
                "stalls": progress[0],
                "journal_seen": progress[1],
            }
            if replace:
                return r.with_changes(
                    **lease,
                    decision=answer[0],
                    response=answer[1],
                    decided_by=decided_by,
                    decided_at_ms=now_ms,
                    decided_via=via,
                    journal_id=journal_of(token),
                )
            return r.with_changes(
                **lease,
                decision=r.decision if r.decision is not None else answer[0],
                response=r.response if r.response is not None else answer[1],
                decided_by=r.decided_by if r.decided_by is not None else decided_by,
                decided_at_ms=r.decided_at_ms if r.decided_at_ms is not None else now_ms,
                decided_via=r.decided_via if r.decided_via is not None else via,
                journal_id=r.journal_id if r.journal_id is not None else journal_of(token),
            )

        return claimed

    def _updated(
        self,
        chat_id: str,
        holds: Callable[[RequestRecord], bool],
        change: Callable[[RequestRecord], RequestRecord],
        *,
        lost: Callable[[RequestRecord | None], Exception],
        also: Iterable[Entry] | None = (),
    ) -> RequestRecord:
        """One conditional change of the pointer, with `also` in its transaction: the
        record as written; `lost(current)` raised when its condition failed, and
        `EntryRefused` when an entry of `also` did."""
        m = self._m
        written: list[RequestRecord] = []

        def check() -> bool:
            current = m.requests.get(chat_id)
            return current is not None and holds(current)

        def apply() -> None:
            written.append(change(m.requests[chat_id]))
            m.requests[chat_id] = written[0]

        riders = list(also or ())
        with m.lock:  # a refusal names the record as it stood when the condition failed
            try:
                m.commit([Write(check, apply, item=("REQUEST", chat_id))], riders)
            except Refused as refused:
                if refused.index > 0:
                    raise EntryRefused(riders[refused.index - 1].role) from None
                raise lost(copy.deepcopy(m.requests.get(chat_id))) from None
            return copy.deepcopy(written[0])


class _Kept(Exception):
    """A reset lost only because the answer was acted on: the claim is still held."""


def _lost() -> errors.LeaseLost:
    return errors.LeaseLost("the claim was already lost")


def _edits_owed(request: RequestRecord, due_ms: int) -> dict[str, Any]:
    """The DynamoDB adapter's `EDITS_OWED`, for a write ending `request` as read: the
    mark that its channel posts' edit is owed, due at `due_ms` (an ended pointer with
    the mark is in the notice index, as the adapter keeps its shard)."""
    return {"notify_due_ms": due_ms} if request.owes_edits else {}


def _optional(write: Write) -> Write:
    return Write(write.check, write.apply, optional=True, item=write.item)


# -- chats, turns and events ---------------------------------------------------------------


class MemoryChats:
    """`ChatPort` in memory: meta, saved turns, and events numbered in commit order."""

    def __init__(self, memory: Memory) -> None:
        self._m = memory

    def meta(self, chat_id: str) -> ChatMeta:
        with self._m.lock:
            return self._m.metas.get(_chat(chat_id), ChatMeta(chat_id))

    def turns(self, chat_id: str, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        with self._m.lock:
            saved = self._m.turns.get(_chat(chat_id), {})
            return [copy.deepcopy(saved[n]) for n in sorted(saved) if n > after][:limit]

    def latest_turns(self, chat_id: str, count: int) -> list[dict[str, Any]]:
        with self._m.lock:
            saved = self._m.turns.get(_chat(chat_id), {})
            return [copy.deepcopy(saved[n]) for n in sorted(saved)[-count:]] if count else []

    def record(
        self,
        chat_id: str,
        type: str,
        actor: str,
        now_ms: int,
        *,
        fence: Fence | None = None,
        **detail: Any,
    ) -> AuditEvent:
        write = _write_of(self.event_entry(chat_id, type, actor, now_ms, **detail))
        self._m.fenced(fence, [write], "write audit event")
        assert isinstance(write, _Event) and write.written is not None
        # Numbered as stored; its detail as given, as the adapter answers.
        return replace(write.written, detail=detail)

    def event_entry(self, chat_id: str, type: str, actor: str, now_ms: int, **detail: Any) -> Entry:
        events = self._m.events
        _chat(chat_id)
        # Details are stored as JSON text by the DynamoDB adapter: read back the same.
        stored = json.loads(json.dumps(detail, sort_keys=True, default=str))
        write = _Event(lambda: True, lambda: None)

        def append() -> None:
            chat = events.setdefault(chat_id, {})
            seq = max(chat, default=0) + 1
            chat[seq] = write.written = AuditEvent(chat_id, seq, type, now_ms, actor, stored)

        write.apply = append
        return entry(Role.EVENT, write)

    def events(self, chat_id: str, after: int = 0, limit: int = 100) -> list[AuditEvent]:
        with self._m.lock:
            chat = self._m.events.get(_chat(chat_id), {})
            return [copy.deepcopy(chat[n]) for n in sorted(chat) if n > after][:limit]


@dataclass
class _Event(Write):
    """An audit event's write: numbered after the chat's last event as it commits."""

    written: AuditEvent | None = None


def _turn_write(memory: Memory, chat_id: str, seq: int, turn: dict[str, Any], now_ms: int) -> Write:
    saved = {"seq": seq, "at_ms": now_ms, **json.loads(json.dumps(turn, default=str))}

    def put() -> None:
        memory.turns.setdefault(chat_id, {})[seq] = saved

    return Write(lambda: seq not in memory.turns.get(chat_id, {}), put, item=("TURN", chat_id, seq))


class MemoryTurns:
    """`TurnPort` in memory: admission, the answer and the lease in one transaction."""

    def __init__(self, memory: Memory) -> None:
        self._m = memory

    def admit(
        self,
        seen: ChatMeta,
        user_id: str,
        turn: dict[str, Any],
        now_ms: int,
        lease_ms: int,
        also: list[Entry] | None = None,
        *,
        request_settled: bool = False,
    ) -> tuple[TurnFence, int]:
        m, chat_id = self._m, _chat(seen.chat_id)
        keys.checked_id(user_id, "user id")
        fence = TurnFence(chat_id, new_token())
        seq = seen.last_turn + 1

        def meta() -> ChatMeta:
            return m.metas.get(chat_id, ChatMeta(chat_id))

        def admissible() -> bool:
            found = meta()
            return (
                found.owner in (None, user_id)
                and not found.running(now_ms)  # `NOT_RUNNING`: over by every clock
                and (chat_id not in m.metas or found.last_turn == seen.last_turn)
                and (seen.run_token is None or found.run_token == seen.run_token)
            )

        def take() -> None:
            found = meta()
            m.metas[chat_id] = ChatMeta(
                chat_id, found.owner or user_id, seq, fence.run_token, now_ms + lease_ms
            )

        # As the table's: a read that settled the pointer leaves its check out.
        skipped = 1 if request_settled and seen.run_token is None else 0
        own = [
            Write(
                lambda: no_open_request(m.requests.get(chat_id), now_ms),
                lambda: None,
                item=("REQUEST", chat_id),
            ),
            Write(admissible, take, item=("META", chat_id)),
            _turn_write(m, chat_id, seq, turn, now_ms),
        ][skipped:]
        try:
            m.commit(own, also)
        except Refused as refused:
            if refused.index >= len(own):
                raise EntryRefused((also or [])[refused.index - len(own)].role) from None
            if refused.index + skipped == 0:
                current = m.requests.get(chat_id)
                raise errors.ChatBusy("answer or cancel the open request first", current) from None
            found = meta()
            if found.owner not in (None, user_id):
                raise errors.Forbidden("this chat belongs to another user") from None
            if found.running(now_ms):
                raise errors.TurnRunning(
                    "a turn is already running in this chat; wait for its answer"
                ) from None
            raise errors.TurnRunning(
                "the chat changed meanwhile (another turn started or ended); send it again"
            ) from None
        return fence, seq

    def complete(
        self,
        fence: TurnFence,
        seq: int,
        turn: dict[str, Any],
        now_ms: int,
        also: list[Entry] | None = None,
    ) -> int:
        m, chat_id = self._m, _chat(fence.chat_id)

        def holds() -> bool:
            found = m.metas.get(chat_id)
            return (
                found is not None
                and found.run_token == fence.run_token
                and (found.last_turn == seq)
            )

        def advance() -> None:
            found = m.metas[chat_id]
            m.metas[chat_id] = ChatMeta(chat_id, found.owner, seq + 1)

        try:
            m.commit(
                [
                    Write(holds, advance, item=("META", chat_id)),
                    _turn_write(m, chat_id, seq + 1, turn, now_ms),
                ],
                also,
            )
        except Refused:
            raise errors.LeaseLost("the turn's lease was lost; its answer was not saved") from None
        return seq + 1

    def end_run(self, fence: TurnFence) -> Entry:
        m, chat_id = self._m, fence.chat_id

        def release() -> None:
            found = m.metas[chat_id]
            m.metas[chat_id] = ChatMeta(chat_id, found.owner, found.last_turn)

        return entry(
            Role.TURN, Write(lambda: m.fence_holds(fence), release, item=("META", chat_id))
        )

    def abandon(self, fence: TurnFence, also: Sequence[Entry] = ()) -> None:
        try:
            self._m.commit([_write_of(self.end_run(fence))], also)
        except Refused:
            return

    def answer_entries(
        self, chat_id: str, seq: int, turn: dict[str, Any], now_ms: int
    ) -> list[Entry]:
        m = self._m
        _chat(chat_id)

        def at_seq() -> bool:
            return chat_id not in m.metas or m.metas[chat_id].last_turn == seq

        def advance() -> None:
            found = m.metas.get(chat_id, ChatMeta(chat_id))
            m.metas[chat_id] = ChatMeta(
                chat_id, found.owner, seq + 1, found.run_token, found.run_until_ms
            )

        return [
            entry(Role.TRANSCRIPT, Write(at_seq, advance, item=("META", chat_id))),
            entry(Role.TRANSCRIPT, _turn_write(m, chat_id, seq + 1, turn, now_ms)),
        ]


# -- approvals, limits, the outbox ------------------------------------------------------------


class MemoryApprovals:
    """`ApprovalPort` in memory: rows per user and chat stamped with their card."""

    def __init__(self, memory: Memory, ttl_s: int) -> None:
        self._m = memory
        self._ttl_s = ttl_s

    def _rows(self, chat_id: str, user_id: str) -> dict[Subject, Approval]:
        return self._m.approvals.setdefault((_chat(chat_id), _user(user_id)), {})

    def _puts(
        self, chat_id: str, user_id: str, subjects: Iterable[Subject], card_id: str, now_ms: int
    ) -> list[Write]:
        _chat(chat_id), _user(user_id)
        now_s = now_ms // 1000
        made = []
        for subject in sorted(set(subjects), key=lambda s: (s.kind, s.name)):
            approval = Approval(subject, card_id, user_id, now_s, now_s + self._ttl_s)

            def put(approval: Approval = approval) -> None:
                self._rows(chat_id, user_id)[approval.subject] = approval

            made.append(Write(lambda: True, put, item=("APPROVAL", chat_id, user_id, subject)))
        return made

    def grant(
        self,
        chat_id: str,
        user_id: str,
        subjects: Iterable[Subject],
        card_id: str,
        now_ms: int,
        fence: Fence | None = None,
    ) -> list[Approval]:
        now_s = now_ms // 1000
        puts = self._puts(chat_id, user_id, subjects, card_id, now_ms)
        if puts:
            self._m.fenced(fence, puts, "grant")
        return sorted(
            (Approval(s, card_id, user_id, now_s, now_s + self._ttl_s) for s in set(subjects)),
            key=lambda a: (a.subject.kind, a.subject.name),
        )

    def grant_entries(
        self, chat_id: str, user_id: str, subjects: Iterable[Subject], card_id: str, now_ms: int
    ) -> list[Entry]:
        return [
            entry(Role.GRANT, w) for w in self._puts(chat_id, user_id, subjects, card_id, now_ms)
        ]

    def for_user(self, chat_id: str, user_id: str, now_ms: int) -> list[Approval]:
        with self._m.lock:
            rows = list(self._m.approvals.get((_chat(chat_id), _user(user_id)), {}).values())
        return sorted(
            (a for a in rows if a.ttl is None or a.ttl > now_ms // 1000),
            key=lambda a: (a.subject.kind, a.subject.name),
        )

    def approved_among(
        self, chat_id: str, user_id: str, subjects: Collection[Subject], now_ms: int
    ) -> frozenset[Subject]:
        if not subjects:
            return frozenset()
        with self._m.lock:
            rows = self._m.approvals.get((_chat(chat_id), _user(user_id)), {})
            found = [row for s in set(subjects) for row in (rows.get(s), self._m.admin.get(s))]
        return frozenset(
            a.subject for a in found if a is not None and (a.ttl is None or a.ttl > now_ms // 1000)
        )

    def revoke(self, chat_id: str, user_id: str, subject: Subject) -> bool:
        with self._m.lock:
            rows = self._m.approvals.get((_chat(chat_id), _user(user_id)), {})
            return rows.pop(subject, None) is not None

    def withdraw_card(
        self, chat_id: str, user_id: str, card_id: str, fence: Fence | None = None
    ) -> int:
        with self._m.lock:  # the rows read and deleted at one moment: none re-stamped between
            deletes = [_write_of(d) for d in self.withdraw_entries(chat_id, user_id, card_id)]
            if fence is None or not deletes:
                for write in deletes:
                    write.apply()
                return len(deletes)
            self._m.fenced(fence, deletes, "withdraw approvals")
            return len(deletes)

    def withdraw_entries(self, chat_id: str, user_id: str, card_id: str) -> list[Entry]:
        _chat(chat_id), _user(user_id)
        with self._m.lock:
            stamped = [
                a.subject
                for a in self._m.approvals.get((chat_id, user_id), {}).values()
                if a.card_id == card_id
            ]
        made = []
        for subject in sorted(stamped, key=lambda s: (s.kind, s.name)):

            def still(subject: Subject = subject) -> bool:
                row = self._m.approvals.get((chat_id, user_id), {}).get(subject)
                return row is not None and row.card_id == card_id

            def delete(subject: Subject = subject) -> None:
                self._rows(chat_id, user_id).pop(subject, None)

            made.append(
                entry(
                    Role.GRANT,
                    Write(still, delete, item=("APPROVAL", chat_id, user_id, subject)),
                )
            )
        return made

    def admin_list(self) -> list[Approval]:
        with self._m.lock:
            return sorted(self._m.admin.values(), key=lambda a: (a.subject.kind, a.subject.name))

    def admin_grant(self, subjects: Iterable[Subject], by: str, now_ms: int) -> None:
        with self._m.lock:
            for subject in set(subjects):
                self._m.admin[subject] = Approval(subject, None, by, now_ms // 1000)

    def admin_revoke(self, subject: Subject) -> bool:
        with self._m.lock:
            return self._m.admin.pop(subject, None) is not None


class MemoryLimits:
    """`LimitPort` in memory: leased slots and budgets."""

    def __init__(self, memory: Memory) -> None:
        self._m = memory

    def _take(
        self, user_id: str, holder: str, index: int, pool: str, now_ms: int, hold_ms: int
    ) -> Write:
        slots, key = self._m.slots, (_user(user_id), pool, index)

        def free() -> bool:
            held = slots.get(key)
            return held is None or held[1] <= now_ms or held[0] == holder

        def take() -> None:
            slots[key] = (holder, now_ms + hold_ms)

        return Write(free, take, item=("SLOT", *key))

    def reserve_slot(
        self,
        user_id: str,
        holder: str,
        *,
        cap: int,
        hold_ms: int,
        now_ms: int,
        pool: str = "SLOT",
    ) -> int:
        first = int(hashlib.sha256(holder.encode()).hexdigest(), 16) % cap
        for offset in range(cap):
            index = (first + offset) % cap
            try:
                self._m.commit([self._take(user_id, holder, index, pool, now_ms, hold_ms)])
            except Refused:
                continue
            return index
        raise LimitExceeded(f"all {cap} concurrent slots are in use")

    def _release(self, user_id: str, holder: str, index: int, pool: str) -> Write:
        slots, key = self._m.slots, (user_id, pool, index)
        return Write(
            lambda: key in slots and slots[key][0] == holder,
            lambda: slots.pop(key, None) and None,
            optional=True,
            item=("SLOT", *key),
        )

    def release_slot(self, user_id: str, holder: str, index: int, pool: str = "SLOT") -> None:
        self._m.commit([self._release(user_id, holder, index, pool)])

    def release_entry(self, user_id: str, holder: str, index: int, pool: str = "SLOT") -> Entry:
        return entry(Role.RELEASE, self._release(user_id, holder, index, pool))

    def slot_entry(
        self,
        user_id: str,
        holder: str,
        index: int,
        *,
        hold_ms: int,
        now_ms: int,
        pool: str = "SLOT",
    ) -> Entry:
        return entry(Role.SLOT, self._take(user_id, holder, index, pool, now_ms, hold_ms))

    def _spend(self, user_id: str, day: str, amount: int, cap: int) -> Write:
        budgets, key = self._m.budgets, (_user(user_id), day)

        def add() -> None:
            budgets[key] = budgets.get(key, 0) + amount

        return Write(lambda: budgets.get(key, 0) <= cap - amount, add, item=("BUDGET", *key))

    def spend_entry(self, user_id: str, day: str, amount: int, *, cap: int) -> Entry:
        if amount > cap:
            raise LimitExceeded("the request alone exceeds the daily budget")
        return entry(Role.BUDGET, self._spend(user_id, day, amount, cap))

    def rate_entries(
        self, user_id: str, minute: int, amount: int, *, cap: int
    ) -> tuple[Entry, ...]:
        if amount > cap:
            raise LimitExceeded("the request alone exceeds the budget")
        rates, key = self._m.rates, _user(user_id)

        def begun() -> bool:
            return key in rates and rates[key][0] >= minute

        def start() -> None:
            rates[key] = (minute, amount)

        def count() -> None:
            opened, count = rates[key]
            rates[key] = (opened, count + amount)

        starts = Write(lambda: not begun(), start, item=("RATE", key))
        counts = Write(lambda: begun() and rates[key][1] <= cap - amount, count, item=("RATE", key))
        return entry(Role.BUDGET, starts), entry(Role.BUDGET, counts)

    def spend(self, user_id: str, day: str, amount: int, *, cap: int) -> int:
        if amount > cap:
            raise LimitExceeded("the request alone exceeds the daily budget")
        try:
            self._m.commit([self._spend(user_id, day, amount, cap)])
        except Refused:
            raise LimitExceeded(f"the daily budget of {cap} is spent") from None
        with self._m.lock:
            return self._m.budgets[(user_id, day)]

    def refund(self, user_id: str, day: str, amount: int) -> None:
        key = (_user(user_id), day)
        with self._m.lock:
            if key in self._m.budgets:  # a day with nothing spent has nothing to give back
                self._m.budgets[key] -= amount


class MemoryOutbox:
    """`OutboxStore` in memory: put-once records, fenced by the writer's claim or turn."""

    def __init__(self, memory: Memory) -> None:
        self._m = memory

    def put_once(
        self, key: str, payload: dict[str, Any], now_ms: int, fence: Fence | None = None
    ) -> bool:
        keys.outbox_pk(key)
        rows = self._m.outbox
        stored = json.loads(json.dumps(payload, sort_keys=True))

        def put() -> None:
            rows[key] = stored

        try:
            fresh = Write(lambda: key not in rows, put, item=("OUTBOX", key))
            self._m.fenced(fence, [fresh], "outbox put", effect=True)
        except Refused:
            return False
        return True

    def get(self, key: str) -> dict[str, Any] | None:
        keys.outbox_pk(key)
        with self._m.lock:
            found = self._m.outbox.get(key)
        return copy.deepcopy(found) if found is not None else None


class MemoryBucket:
    """The two calls of an S3 client that `BlobStore` makes, on a dict: the blob port in
    memory is the real `BlobStore` (its keys, gzip and digests) over this bucket."""

    class exceptions:
        pass

    def __init__(self, memory: Memory) -> None:
        self._m = memory

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, **_: Any) -> dict[str, Any]:
        with self._m.lock:
            self._m.objects[Key] = bytes(Body)
        return {}

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        with self._m.lock:
            found = self._m.objects.get(Key)
        if found is None:
            raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")
        return {"Body": _Body(found)}


@dataclass
class _Body:
    data: bytes

    def read(self) -> bytes:
        return self.data


# -- channels ----------------------------------------------------------------------------------


class MemoryChannels:
    """`ChannelPort` in memory: links both ways, deliveries seen, and notices."""

    def __init__(self, memory: Memory, retention_s: int) -> None:
        self._m = memory
        self._retention_s = retention_s

    def link(self, link: Link, by: str, now_ms: int) -> None:
        keys.checked_id(link.user_id, "user id")
        checked_external(link.external_id)
        with self._m.lock:
            links = self._m.links
            for key, old in list(links.items()):
                same_user = old.user_id == link.user_id and old.channel == link.channel
                if key[0] == link.channel and (same_user or key[1] == link.external_id):
                    del links[key]
            links[(link.channel, link.external_id)] = Link(
                link.channel, link.external_id, link.user_id, frozenset(link.roles), link.address
            )

    def unlink(self, channel: ChannelName, external_id: str) -> Link | None:
        with self._m.lock:
            return self._m.links.pop((channel, checked_external(external_id)), None)

    def linked(self, channel: ChannelName, external_id: str) -> Link | None:
        with self._m.lock:
            return self._m.links.get((channel, checked_external(external_id)))

    def links_of(self, user_id: str) -> list[Link]:
        keys.user_links_pk(user_id)
        with self._m.lock:
            found = [link for link in self._m.links.values() if link.user_id == user_id]
        return sorted(found, key=lambda link: link.channel)

    def first_delivery(self, channel: ChannelName, delivery_id: str, now_ms: int) -> bool:
        key = (channel, checked_external(delivery_id))
        with self._m.lock:
            if key in self._m.deliveries:
                return False
            self._m.deliveries.add(key)
            return True

    def reserve_notice(self, chat_id: str, notice: Notice, now_ms: int, until_ms: int) -> bool:
        key = (_chat(chat_id), notice.interrupt_id, notice.channel)
        with self._m.lock:
            if key in self._m.notices:
                return False
            self._m.notices[key] = Notice(
                channel=notice.channel,
                interrupt_id=notice.interrupt_id,
                user_id=notice.user_id,
                tries=1,
                attempt_until_ms=until_ms,
                give_up_ms=notice.give_up_ms,
                due_ms=until_ms,
                title=notice.title,
                reserved_ms=now_ms,
            )
            return True

    def notices(self, chat_id: str, interrupt_id: str | None = None) -> list[Notice]:
        _chat(chat_id)
        with self._m.lock:
            found = [
                (f"NOTICE#{iid}#{channel}", n)
                for (chat, iid, channel), n in self._m.notices.items()
                if chat == chat_id and (interrupt_id is None or iid == interrupt_id)
            ]
        return [copy.deepcopy(n) for _, n in sorted(found, key=lambda pair: pair[0])]

    def due_notices(self, shard: str, now_ms: int, limit: int) -> list[str]:
        with self._m.lock:
            due = [
                (n.due_ms, chat)
                for (chat, _, _), n in self._m.notices.items()
                if n.due_ms is not None and not n.done and n.due_ms <= now_ms
            ] + [
                # An open pointer whose posts are owed, or an ended one owing their edit.
                (r.notify_due_ms, chat)
                for chat, r in self._m.requests.items()
                if r.notify_due_ms is not None and r.notify_due_ms <= now_ms
            ]
        inside = [(d, c) for d, c in due if keys.sweep_shard(c, keys.SWEEP_SHARDS) == shard]
        return list(dict.fromkeys(c for _, c in sorted(inside)[:limit]))

    def _update(
        self,
        chat_id: str,
        notice: Notice,
        holds: Callable[[Notice], bool],
        change: Callable[[Notice], Notice],
    ) -> Notice | None:
        key = (_chat(chat_id), notice.interrupt_id, notice.channel)
        with self._m.lock:
            current = self._m.notices.get(key)
            if current is None or not holds(current):
                return None
            self._m.notices[key] = changed = change(current)
            return copy.deepcopy(changed)

    def begin_notice(
        self, chat_id: str, notice: Notice, now_ms: int, until_ms: int
    ) -> Notice | None:
        return self._update(
            chat_id,
            notice,
            lambda n: not n.done and (n.attempt_until_ms is None or n.attempt_until_ms < now_ms),
            lambda n: _notice(n, attempt_until_ms=until_ms, due_ms=until_ms, tries=n.tries + 1),
        )

    def posted_notice(
        self, chat_id: str, notice: Notice, ref: dict[str, Any], watch_ms: int, now_ms: int
    ) -> Notice:
        stored = json.loads(json.dumps(ref, sort_keys=True))
        watched = self._update(
            chat_id,
            notice,
            lambda n: n.edit_text is None,
            lambda n: _notice(n, ref=stored, due_ms=watch_ms, attempt_until_ms=None),
        )
        if watched is not None:
            return watched
        settled = self._update(
            chat_id,
            notice,
            lambda n: True,
            lambda n: _notice(n, ref=stored, due_ms=now_ms, attempt_until_ms=None),
        )
        if settled is None:
            raise errors.StoreError("save notice failed: the notice is gone")
        return settled

    def settle_notice(self, chat_id: str, notice: Notice, text: str, now_ms: int) -> Notice | None:
        return self._update(
            chat_id,
            notice,
            lambda n: not n.done,
            lambda n: _notice(n, edit_text=text, due_ms=now_ms),
        )

    def retry_notice(self, chat_id: str, notice: Notice, due_ms: int) -> None:
        self._update(
            chat_id,
            notice,
            lambda n: not n.done,
            lambda n: _notice(n, due_ms=due_ms, attempt_until_ms=None),
        )

    def finish_notice(self, chat_id: str, notice: Notice, now_ms: int) -> None:
        self._update(
            chat_id,
            notice,
            lambda n: True,
            lambda n: _notice(n, done=True, attempt_until_ms=None, due_ms=None),
        )


def _notice(notice: Notice, **changes: Any) -> Notice:
    return replace(notice, **changes)
