"""The request context: who is asking, what they may do, and what this turn learned.

The API sets it (from the authorizer, never from a request body) before the agent runs;
tools and hooks read it with `current_request()`. Nothing in it comes from tool
arguments: a model-controlled argument is not an identity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from interlock.records import Subject


class OutboxPort(Protocol):
    """Where side-effecting tools record what they send, once per key."""

    def put_once(self, key: str, payload: dict[str, Any], now_ms: int) -> bool: ...

    def get(self, key: str) -> dict[str, Any] | None: ...


class FetchPort(Protocol):
    """The HTTP transport behind `fetch_url`; injected so tests never touch a network."""

    def __call__(self, url: str) -> str: ...


@dataclass
class RequestContext:
    """Everything a tool may know about the request it runs in.

    Attributes:
        user_id: The authenticated user.
        chat_id: The chat (AG-UI thread) this turn belongs to.
        roles: The user's roles, from the authorizer.
        approved: Sites and packages known approved for this user and chat without a
            read (on a resume, what its own answer granted).
        look_up: Reads which of some subjects are approved (the user's rows and the
            administrator list, by key), only for subjects not already known, so a run
            that never meets a gated site or package reads nothing.
        can_ask_a_human: False for unattended runs: tools must not interrupt.
        refused: Sites and packages refused this turn (filled by egress checks).
        resume_cards: On a resume, the stored cards of the request being answered.
        resume_answers: On a resume, each card's recorded answer, by its `card_id`.
        trace_id: Correlates logs and audit events of this request.
        outbox: Put-once record of side effects.
        fetch: The HTTP transport for `fetch_url`.
        now_ms: The clock.
        audit: Records an audit event from inside the agent (e.g. an auto-approval).
        scrubbed: Tool calls whose URLs lost a query string or fragment on the way in.
        bound: Calls a person approved, by toolUseId: the digest of the call as approved
            (with any edit); the journal holds what runs to it before the body starts.
    """

    user_id: str
    chat_id: str
    roles: frozenset[str] = frozenset()
    approved: frozenset[Subject] = frozenset()
    look_up: Callable[[frozenset[Subject]], frozenset[Subject]] | None = None
    can_ask_a_human: bool = True
    refused: set[Subject] = field(default_factory=set)
    resume_cards: tuple[dict[str, Any], ...] = ()
    resume_answers: dict[str, Any] = field(default_factory=dict)
    trace_id: str | None = None
    outbox: OutboxPort | None = None
    fetch: FetchPort | None = None
    now_ms: Callable[[], int] | None = None
    audit: Callable[[str, dict[str, Any]], None] | None = None
    scrubbed: set[str] = field(default_factory=set)
    bound: dict[str, str] = field(default_factory=dict)
    _known: dict[Subject, bool] = field(default_factory=dict, init=False, repr=False)

    def is_approved(self, subject: Subject) -> bool:
        """Whether `subject` is approved; reads the store only for what is not known."""
        return subject in self.approved_among({subject})

    def approved_among(self, subjects: Iterable[Subject]) -> frozenset[Subject]:
        """Which of `subjects` are approved for this user and chat; each subject is read
        at most once a run, all the unknown ones in one look-up."""
        wanted = frozenset(subjects)
        unknown = frozenset(s for s in wanted - self.approved if s not in self._known)
        if unknown:
            found = self.look_up(unknown) if self.look_up else frozenset()
            self._known.update({s: s in found for s in unknown})
        return frozenset(s for s in wanted if s in self.approved or self._known.get(s))


_current: ContextVar[RequestContext] = ContextVar("interlock_request")


def current_request() -> RequestContext:
    """The context set by the caller; a tool run outside one is a programming error."""
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("no request context: run the agent inside request_scope()") from None


@contextmanager
def request_scope(context: RequestContext) -> Iterator[RequestContext]:
    """Make `context` current for the agent run inside the block.

    Strands runs tools in worker threads; `asyncio.to_thread` copies context variables,
    so tools see this context too (and share its mutable `refused` set).
    """
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)
