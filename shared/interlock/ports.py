"""The store ports the service functions depend on; adapters implement them.

Services (`turns`, `resume`, `sweeper`, `inbox`, ...) see only these Protocols, so any
implementation with the same semantics can stand in: the DynamoDB and S3 adapters in
`interlock.adapters`, the in-memory stores of `local.memory`, or a wrapper that fails or
stalls chosen calls in the fault tests. `tests/adapters` is the contract suite both
implementations pass.

`Entry` is a write that one store prepares and another commits in its own transaction (a
transcript turn riding on a claim's finish, a turn's release riding on its pause), so
that "all or nothing" never needs a second round trip. Services see only its `role`; a
refused transaction names the role of the entry that lost (`EntryRefused`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from interlock.channels import ChannelName, Link, Notice
from interlock.records import (
    Approval,
    AuditEvent,
    ChatMeta,
    ClaimFence,
    Fence,
    InboxCursor,
    InboxEntry,
    RequestRecord,
    StoredSnapshot,
    Subject,
    Surface,
    TurnFence,
)
from interlock.timing import StorePolicy


class Role(StrEnum):
    """What an entry of another store's transaction is for."""

    SLOT = "slot"  # taking a concurrency or open-request slot
    BUDGET = "budget"  # spending a unit of a budget
    TURN = "turn"  # the running turn's release, which holds only while the turn does
    TRANSCRIPT = "transcript"  # a resumed run's answer, saved as the chat's next turn
    EVENT = "event"  # an audit event
    GRANT = "grant"  # an approval row written or withdrawn
    RELEASE = "release"  # giving a slot back, best effort


@dataclass(frozen=True, slots=True)
class Entry:
    """One write for another store's transaction: its role, and the write itself, which
    only the adapter that made it (and the one that commits it) reads."""

    role: Role
    write: dict[str, Any]


class NotPending(Exception):
    """`claim_with` found the request claimed (a lapsed claim a takeover may continue):
    claim it with `claim`, which reads back what the earlier claim recorded."""

    def __init__(self, current: RequestRecord) -> None:
        super().__init__("the request is no longer pending")
        self.current = current


class EntryRefused(Exception):
    """An entry a caller passed in `also` lost its own condition; `role` says which kind
    (the first to lose, in the order given). Nothing of the transaction was written."""

    def __init__(self, role: Role) -> None:
        super().__init__(f"the transaction's {role} entry was refused")
        self.role = role


class RequestPort(Protocol):
    """The pointer: one open request per chat, claimed by exactly one worker."""

    def get(self, chat_id: str, now_ms: int) -> RequestRecord | None: ...

    def notified(
        self, chat_id: str, interrupt_id: str, *, posted: bool = False, now_ms: int = 0
    ) -> None: ...

    def edits_recorded(self, chat_id: str, interrupt_ids: Collection[str]) -> None: ...

    def get_with_chat(self, chat_id: str, now_ms: int) -> tuple[RequestRecord | None, ChatMeta]: ...

    def read_for_turn(
        self, chat_id: str, now_ms: int
    ) -> tuple[RequestRecord | None, ChatMeta, bool]: ...

    def open(
        self, request: RequestRecord, now_ms: int, also: list[Entry] | None = None
    ) -> None: ...

    def rotate_secret(
        self, request: RequestRecord, surface: Surface, secret_hash: str, now_ms: int
    ) -> RequestRecord: ...

    def claim(
        self,
        request: RequestRecord,
        secret: str,
        worker: str,
        now_ms: int,
        answer: tuple[str, str] = ...,
        *,
        by: str | None = None,
        via: str = "api",
        replaces: Sequence[Entry] = (),
        also: Sequence[Entry] = (),
        journal_steps: int | None = None,
    ) -> RequestRecord: ...

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
    ) -> RequestRecord: ...

    def renew(self, claim: RequestRecord, now_ms: int) -> int: ...

    def record_step(self, claim: RequestRecord, seq: int, entry: str, *, acting: bool) -> None: ...

    def steps(self, claim: RequestRecord) -> list[str]: ...

    def mark_acted(self, fence: ClaimFence) -> None: ...

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
    ) -> RequestRecord: ...

    def answer_fits(self, claim: RequestRecord, text: str, answer: dict[str, Any]) -> bool: ...

    def chain(
        self, claim: RequestRecord, successor: RequestRecord, also: list[Entry] | None = None
    ) -> None: ...

    def release(
        self, claim: RequestRecord, now_ms: int, *, reset: bool, also: list[Entry] | None = None
    ) -> RequestRecord: ...

    def end_claimed(self, claim: RequestRecord, reason: str) -> RequestRecord: ...

    def overdue(self, shard: str, now_ms: int, limit: int) -> list[str]: ...

    def lapsed(self, shard: str, before_ms: int, limit: int) -> list[str]: ...

    def claim_lapsed(
        self,
        request: RequestRecord,
        worker: str,
        now_ms: int,
        also: Sequence[Entry] = (),
        *,
        journal_steps: int | None = None,
    ) -> RequestRecord: ...

    def open_for(
        self, user_id: str, limit: int, after: InboxCursor | None = None
    ) -> list[InboxEntry]:
        """A user's open requests, newest first: at most `limit` of them, from just
        after `after` (the last entry of the page before)."""
        ...

    def claim_overdue(
        self,
        request: RequestRecord,
        worker: str,
        now_ms: int,
        answer: tuple[str, str],
        also: Sequence[Entry] = (),
        *,
        journal_steps: int | None = None,
    ) -> RequestRecord: ...

    def reroute(
        self, request: RequestRecord, role: str, extra_s: int, now_ms: int
    ) -> RequestRecord: ...

    def expire(
        self,
        request: RequestRecord,
        reason: str,
        now_ms: int,
        also: list[Entry] | None = None,
    ) -> RequestRecord: ...

    def cancel(
        self,
        request: RequestRecord,
        reason: str,
        now_ms: int,
        also: list[Entry] | None = None,
    ) -> RequestRecord: ...


class ChatPort(Protocol):
    """Per-chat records: the meta item, saved turns and the audit trail."""

    def meta(self, chat_id: str) -> ChatMeta: ...

    def turns(self, chat_id: str, after: int = 0, limit: int = 100) -> list[dict[str, Any]]: ...

    def latest_turns(self, chat_id: str, count: int) -> list[dict[str, Any]]: ...

    def record(
        self,
        chat_id: str,
        type: str,
        actor: str,
        now_ms: int,
        *,
        fence: Fence | None = None,
        **detail: Any,
    ) -> AuditEvent: ...

    def event_entry(
        self, chat_id: str, type: str, actor: str, now_ms: int, **detail: Any
    ) -> Entry: ...

    def events(self, chat_id: str, after: int = 0, limit: int = 100) -> list[AuditEvent]: ...


class TurnPort(Protocol):
    """Turn admission (one running turn per chat) and the transcript's fenced writes."""

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
    ) -> tuple[TurnFence, int]: ...

    def complete(
        self,
        fence: TurnFence,
        seq: int,
        turn: dict[str, Any],
        now_ms: int,
        also: list[Entry] | None = None,
    ) -> int: ...

    def end_run(self, fence: TurnFence) -> Entry: ...

    def abandon(self, fence: TurnFence, also: Sequence[Entry] = ()) -> None: ...

    def answer_entries(
        self, chat_id: str, seq: int, turn: dict[str, Any], now_ms: int
    ) -> list[Entry]: ...


class ApprovalPort(Protocol):
    """Approval rows per user and chat, and the administrator's list."""

    def grant(
        self,
        chat_id: str,
        user_id: str,
        subjects: Iterable[Subject],
        card_id: str,
        now_ms: int,
        fence: Fence | None = None,
    ) -> list[Approval]: ...

    def grant_entries(
        self, chat_id: str, user_id: str, subjects: Iterable[Subject], card_id: str, now_ms: int
    ) -> list[Entry]: ...

    def for_user(self, chat_id: str, user_id: str, now_ms: int) -> list[Approval]: ...

    def approved_among(
        self, chat_id: str, user_id: str, subjects: Collection[Subject], now_ms: int
    ) -> frozenset[Subject]: ...

    def revoke(self, chat_id: str, user_id: str, subject: Subject) -> bool: ...

    def withdraw_card(
        self, chat_id: str, user_id: str, card_id: str, fence: Fence | None = None
    ) -> int: ...

    def withdraw_entries(self, chat_id: str, user_id: str, card_id: str) -> list[Entry]: ...

    def admin_list(self) -> list[Approval]: ...

    def admin_grant(self, subjects: Iterable[Subject], by: str, now_ms: int) -> None: ...

    def admin_revoke(self, subject: Subject) -> bool: ...


class LimitPort(Protocol):
    """Concurrency slots and budgets per user."""

    def reserve_slot(
        self, user_id: str, holder: str, *, cap: int, hold_ms: int, now_ms: int, pool: str = ...
    ) -> int: ...

    def release_slot(self, user_id: str, holder: str, index: int, pool: str = ...) -> None: ...

    def release_entry(self, user_id: str, holder: str, index: int, pool: str = ...) -> Entry: ...

    def slot_entry(
        self,
        user_id: str,
        holder: str,
        index: int,
        *,
        hold_ms: int,
        now_ms: int,
        pool: str = ...,
    ) -> Entry: ...

    def spend_entry(self, user_id: str, day: str, amount: int, *, cap: int) -> Entry: ...

    def spend(self, user_id: str, day: str, amount: int, *, cap: int) -> int: ...

    def rate_entries(
        self, user_id: str, minute: int, amount: int, *, cap: int
    ) -> tuple[Entry, ...]: ...

    def refund(self, user_id: str, day: str, amount: int) -> None: ...


class OutboxStore(Protocol):
    """Put-once records of side effects, fenced by the writer's claim or turn."""

    def put_once(
        self, key: str, payload: dict[str, Any], now_ms: int, fence: Fence | None = None
    ) -> bool: ...

    def get(self, key: str) -> dict[str, Any] | None: ...


class BlobPort(Protocol):
    """Snapshots and answers as objects."""

    def put_snapshot(
        self,
        chat_id: str,
        interrupt_id: str,
        snapshot: dict[str, Any],
        version: str | None = None,
    ) -> StoredSnapshot: ...

    def read_snapshot(self, stored: StoredSnapshot) -> dict[str, Any]: ...

    def get_snapshot(self, key: str, digest: str | None = None) -> dict[str, Any]: ...

    def put_answer(
        self, chat_id: str, interrupt_id: str, answer: dict[str, Any], version: str | None = None
    ) -> str: ...

    def get_answer(self, key: str) -> dict[str, Any] | None: ...

    def put_step(
        self, chat_id: str, journal_id: str, seq: int, entry: str, version: str
    ) -> tuple[str, str]: ...

    def get_step(self, key: str, digest: str) -> str: ...


class ChannelPort(Protocol):
    """Channel accounts linked to users, webhook deliveries seen, and posted cards."""

    def link(self, link: Link, by: str, now_ms: int) -> None: ...

    def unlink(self, channel: ChannelName, external_id: str) -> Link | None: ...

    def linked(self, channel: ChannelName, external_id: str) -> Link | None: ...

    def links_of(self, user_id: str) -> list[Link]: ...

    def first_delivery(self, channel: ChannelName, delivery_id: str, now_ms: int) -> bool: ...

    def reserve_notice(self, chat_id: str, notice: Notice, now_ms: int, until_ms: int) -> bool: ...

    def notices(self, chat_id: str, interrupt_id: str | None = None) -> list[Notice]: ...

    def due_notices(self, shard: str, now_ms: int, limit: int) -> list[str]: ...

    def begin_notice(
        self, chat_id: str, notice: Notice, now_ms: int, until_ms: int
    ) -> Notice | None: ...

    def posted_notice(
        self, chat_id: str, notice: Notice, ref: dict[str, Any], watch_ms: int, now_ms: int
    ) -> Notice: ...

    def settle_notice(
        self, chat_id: str, notice: Notice, text: str, now_ms: int
    ) -> Notice | None: ...

    def retry_notice(self, chat_id: str, notice: Notice, due_ms: int) -> None: ...

    def finish_notice(self, chat_id: str, notice: Notice, now_ms: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Stores:
    """Every store the service functions use."""

    requests: RequestPort
    approvals: ApprovalPort
    chats: ChatPort
    turns: TurnPort
    limits: LimitPort
    outbox: OutboxStore
    blobs: BlobPort
    policy: StorePolicy
    channels: ChannelPort
