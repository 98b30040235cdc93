"""The records the store keeps, and the rules read off them.

Only states a writer can assert are stored; whether a request has expired or its lease
has lapsed is decided on read from the timestamps, because TTL deletes late.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final, Literal

from interlock import errors, keys
from interlock.timing import MAX_TOTAL_CLAIMS, StorePolicy, surely_passed
from interlock.tokens import hash_secret, new_secret, secret_matches

Kind = Literal["approval", "question", "info"]

Surface = Literal["stream", "page", "chat"]
# Each surface that hands out a request's secret keeps its own: reading the card on one
# surface retires that surface's older copies (another tab, a leaked link) and leaves
# the copy another surface still holds open (an AG-UI front end, the card page) working.
SECRET_FIELDS: Final[dict[Surface, str]] = {
    "stream": "secret_hash",  # issued with the interrupt, and on an AG-UI resync
    "page": "page_secret_hash",  # the card page's read of the open request
    "chat": "chat_secret_hash",  # a Slack or Telegram tap, answered on its tapper's behalf
}


class RequestState(StrEnum):
    """The stored state of a pointer."""

    PENDING = "pending"
    CLAIMED = "claimed"
    DONE = "done"
    EXPIRED = "expired"
    CANCELLED = "cancelled"

    @classmethod
    def parse(cls, value: str) -> RequestState:
        """Read a stored state; an unknown one is a store error, never a guess."""
        try:
            return cls(value)
        except ValueError as exc:
            raise errors.StoreError(f"unknown stored request state {value!r}") from exc


OPEN_STATES = frozenset({RequestState.PENDING, RequestState.CLAIMED})


@dataclass(frozen=True, slots=True)
class Asked:
    """One interrupt a paused run is waiting on, and the card that shows it."""

    interrupt_id: str
    card: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """The pointer: the one open (or last) request of a chat, in any state.

    The card and everything a client sees live here; the paused agent is an S3 object
    at `snapshot_key` (checked against `snapshot_digest`); the final answer
    inline (`answer`, `final_text`) or at `answer_key` once done. A run that paused
    on several interrupts at once (parallel tool calls) keeps the first in
    `interrupt_id`/`card` and the others in `also_asked`; one answer settles them all.
    """

    chat_id: str
    interrupt_id: str
    kind: Kind
    card: dict[str, Any]
    secret_hash: str
    snapshot_key: str | None
    user_id: str
    turn_seq: int
    created_at: int
    expires_at: int
    ttl: int
    state: RequestState = RequestState.PENDING
    claim_count: int = 0
    worker: str | None = None
    lease_token: str | None = None
    lease_expires_at_ms: int | None = None
    resume_deadline_ms: int | None = None
    answer_key: str | None = None
    answer: str | None = None  # inline answer's JSON (tool calls, message id), if not in S3
    final_text: str | None = None
    answered_at: int | None = None
    decision: str | None = None
    ended_reason: str | None = None
    route_role: str | None = None
    ask_slot: int | None = None
    owner_roles: tuple[str, ...] = ()
    version: int = 1
    snapshot_digest: str | None = None
    response: str | None = None
    # Named after the claim that recorded the answer (`journal_of` its token): the run's
    # journal steps are items under it (`keys.step_sk`); a takeover reads them, a
    # replaced answer's are left to their TTL.
    journal_id: str | None = None
    acted: bool = False
    failures: int = 0
    # The retry cap's count (`given_up`): claims in a row, this one included, since one
    # was taken over a journal that had grown (`claim_progress`); and how many journal
    # steps were recorded when this claim was taken, for its taker to compare.
    stalls: int = 0
    journal_seen: int = 0
    also_asked: tuple[Asked, ...] = ()
    created_ms: int = 0
    decided_by: str | None = None
    decided_at_ms: int | None = None
    decided_via: str | None = None
    # Set while the channel posts of a new request are owed and not yet reserved, and
    # once an ended request's posts are owed their edit (set by the write that ended
    # it): the finder carries either on should the process die before it did.
    notify_due_ms: int | None = None
    # Channel posts of this request were reserved: the write that ends it owes their edit.
    posted: bool = False
    # The digests of the secrets the card page and the chat channels hold, beside the
    # AG-UI stream's (`secret_hash`): a surface's read rotates its own (`SECRET_FIELDS`).
    page_secret_hash: str | None = None
    chat_secret_hash: str | None = None

    def secret_field(self, secret: str | None) -> str | None:
        """The field holding the digest `secret` matches (`SECRET_FIELDS`), or None."""
        for field_name in SECRET_FIELDS.values():
            stored = getattr(self, field_name)
            if stored is not None and secret_matches(stored, secret):
                return field_name
        return None

    @property
    def owes_edits(self) -> bool:
        """Whether the write that ends this request owes the edit of its channel posts:
        some were reserved (`posted`), or were owed and may have been reserved by a
        process that died before it said so (`notify_due_ms`)."""
        return self.posted or self.notify_due_ms is not None

    @property
    def stored_snapshot(self) -> StoredSnapshot:
        """Where this request's paused run is stored."""
        return StoredSnapshot(self.snapshot_key, 0, self.snapshot_digest or "")

    @property
    def asked(self) -> tuple[Asked, ...]:
        """Every interrupt this request waits on, the first one first."""
        return (Asked(self.interrupt_id, self.card), *self.also_asked)

    @property
    def interrupt_ids(self) -> frozenset[str]:
        return frozenset(a.interrupt_id for a in self.asked)

    @property
    def fence(self) -> ClaimFence:
        """The fencing token of the claim this record holds (a claimed record only)."""
        if self.state is not RequestState.CLAIMED or self.lease_token is None:
            raise errors.LeaseLost("this record holds no claim")
        return ClaimFence(self.chat_id, self.lease_token, self.claim_count)

    @property
    def acted_on(self) -> bool:
        """Whether the recorded answer was acted on under a claim: an effect reserved in
        the outbox, or a tool body about to run on it (marked before the body starts, by
        the model step that called it or by the tool's own start). Model responses alone
        are not acting: they may be thrown away with the answer that produced them.

        The one definition the decision rule, a failure's release and a cancel all use.
        """
        return self.acted

    def is_past_expiry(self, now_ms: int) -> bool:
        """Past the stated expiry by this clock: the person's side (an answer or a cancel
        is taken until then) and what a reader is shown."""
        return now_ms >= self.expires_at * 1000

    def expired_everywhere(self, now_ms: int) -> bool:
        """Past the stated expiry by every worker's clock (`timing.surely_passed`): only
        then does the sweeper take the request from whoever may still be answering it."""
        return surely_passed(now_ms) >= self.expires_at * 1000

    def lease_lapsed(self, now_ms: int) -> bool:
        """The lease is over by every worker's clock, the holder's included, so a taker
        may act: its holder stopped at `lease_expires_at_ms` by its own clock, which is
        at most `timing.CLOCK_SKEW_MS` behind this one."""
        return self.lease_expires_at_ms is None or surely_passed(now_ms) >= self.lease_expires_at_ms

    def holds_live_claim(self, now_ms: int) -> bool:
        return self.state is RequestState.CLAIMED and not self.lease_lapsed(now_ms)

    def status(self, now_ms: int) -> RequestState:
        """The state as a reader should see it at `now_ms`.

        A pending request, or a claim whose lease lapsed, reads as expired once past
        its logical expiry. A live claim stays claimed: its worker is still running.
        Expiry is read by this clock, as the person was told it (the sweeper settles
        it only once it is `overdue`); a lease counts as lapsed only once it is over
        by every clock, as a taker judges it.
        """
        if self.state is RequestState.PENDING and self.is_past_expiry(now_ms):
            return RequestState.EXPIRED
        if (
            self.state is RequestState.CLAIMED
            and self.lease_lapsed(now_ms)
            and self.is_past_expiry(now_ms)
        ):
            return RequestState.EXPIRED
        return self.state

    def blocks_new_request(self, now_ms: int) -> bool:
        """Whether this record stops the chat from opening another request: it is open
        and not `overdue` (a new request takes the chat from it, as a settle would)."""
        return self.state in OPEN_STATES and not self.overdue(now_ms)

    def overdue(self, now_ms: int) -> bool:
        """Past its expiry on every clock and nobody is working on it: the sweeper's to
        settle (up to `timing.CLOCK_SKEW_MS` after it reads as expired)."""
        return self.expired_everywhere(now_ms) and (
            self.state is RequestState.PENDING
            or (self.state is RequestState.CLAIMED and self.lease_lapsed(now_ms))
        )

    def stranded(self, now_ms: int, grace_ms: int) -> bool:
        """A claim whose worker is gone: its lease ran out at least `grace_ms` ago by
        every clock (time for the person to change an answer nothing acted on) and it is
        not `overdue` yet. The system continues it with the recorded answer; nobody has
        to click."""
        return (
            self.state is RequestState.CLAIMED
            and self.lease_expires_at_ms is not None
            and surely_passed(now_ms) >= self.lease_expires_at_ms + grace_ms
            and not self.expired_everywhere(now_ms)
        )

    def answerable_by(self, user_id: str, roles: frozenset[str]) -> bool:
        """The user who was asked, or, once rerouted, anyone holding the routed role."""
        return user_id == self.user_id or (self.route_role is not None and self.route_role in roles)

    def claimable(self, now_ms: int) -> bool:
        """Pending, or claimed by a worker whose lease lapsed (by every clock); and not
        past the stated expiry by this one (a person may answer until then)."""
        if self.is_past_expiry(now_ms):
            return False
        return self.state is RequestState.PENDING or (
            self.state is RequestState.CLAIMED and self.lease_lapsed(now_ms)
        )

    def with_changes(self, **changes: Any) -> RequestRecord:
        return replace(self, **changes)

    def reset(self, lease_token: str) -> RequestRecord:
        """The record after its claim is given back unused (a failure that acted on
        nothing): answerable afresh under `lease_token`, with no answer recorded, one
        claim fewer (nor counted as a stall) and one failure more."""
        return replace(
            self,
            state=RequestState.PENDING,
            lease_token=lease_token,
            claim_count=self.claim_count - 1,
            stalls=max(self.stalls - 1, 0),
            journal_seen=0,
            failures=self.failures + 1,
            worker=None,
            lease_expires_at_ms=None,
            resume_deadline_ms=None,
            decision=None,
            response=None,
            journal_id=None,
            decided_by=None,
            decided_at_ms=None,
            decided_via=None,
        )


class AnswerRule(StrEnum):
    """What a claim does with the answer it brings, given what is recorded."""

    RECORD = "record"  # nothing recorded yet: this answer is recorded
    KEEP = "keep"  # the recorded answer is this one: continue with it
    REPLACE = "replace"  # another answer, but nothing acted on it: this one replaces it
    BINDING = "binding"  # another answer, and the recorded one was acted on: refused


# A journal's name is the start of its claim's token: 12 letters and digits (71 random
# bits) tell one answer's journal from another's within a chat, and the claimed item
# and every step's key carry it.
JOURNAL_ID_CHARS: Final = 12


def journal_of(lease_token: str) -> str:
    """The name of the journal a claim with `lease_token` begins."""
    return lease_token[:JOURNAL_ID_CHARS]


def began_journal(claim: RequestRecord) -> bool:
    """Whether `claim` began its journal (nothing is recorded under it by another): its
    token names it. A journal named by a whole token, as before, counts too."""
    token, journal = claim.lease_token, claim.journal_id
    return token is not None and journal is not None and token.startswith(journal)


def answer_rule(current: RequestRecord, response: str) -> AnswerRule:
    """The decision rule, failing closed: until anything was acted on under a claim, the
    latest answer a person gives is the one that runs (so a Deny after a crash wins over
    the approve nothing acted on); once something was, the recorded answer binds.

    `response` is the answer as a claim records it (JSON by interrupt id, keys sorted),
    compared with the recorded one as written.
    """
    if current.response is None:
        return AnswerRule.RECORD
    if current.response == response:
        return AnswerRule.KEEP
    return AnswerRule.BINDING if current.acted_on else AnswerRule.REPLACE


def binding_refusal(current: RequestRecord) -> errors.DecisionBinding:
    """The refusal of a different answer to a request whose recorded answer was acted on,
    naming that answer, who gave it and when."""
    return errors.DecisionBinding(f"{decided_text(current)}; that decision stands", current)


def decided_text(current: RequestRecord) -> str:
    """ "Approved by alice at 12:03 UTC": the recorded decision, as a person reads it."""
    label = {
        "approved": "Approved",
        "rejected": "Denied",
        "answered": "Answered",
        "cancelled": "Cancelled",
        "timed_out": "Timed out",
        "defaulted": "Answered with its default",
    }.get(current.decision or "", (current.decision or "Answered").replace("_", " ").capitalize())
    text = label
    if current.decided_by:
        text += f" by {current.decided_by}"
    if current.decided_at_ms:
        at = datetime.datetime.fromtimestamp(current.decided_at_ms / 1000, datetime.UTC)
        text += f" at {at:%H:%M} UTC"
    return text


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """One open request as a user's inbox lists it (what the index projects)."""

    chat_id: str
    interrupt_id: str
    kind: Kind
    card: dict[str, Any]
    created_at: int
    expires_at: int
    state: RequestState
    questions: int = 1
    created_ms: int = 0  # the index's sort key: where a page of the inbox ends


InboxCursor = tuple[int, str]
"""Where a page of a user's inbox ended: its last entry's `created_ms` and chat."""


@dataclass(frozen=True, slots=True)
class ClaimFence:
    """A resumed run's right to write: the claim it holds.

    Every write of a resumed run is conditional on the pointer still carrying this
    lease token and claim count; a worker that lost its claim can write nothing.
    """

    chat_id: str
    lease_token: str
    claim_count: int

    @property
    def token(self) -> str:
        """The fence as text, for S3 keys written under it."""
        return f"{self.lease_token}.{self.claim_count}"


@dataclass(frozen=True, slots=True)
class TurnFence:
    """A new turn's right to write: the chat's running-turn token from admission."""

    chat_id: str
    run_token: str

    @property
    def token(self) -> str:
        return self.run_token


Fence = ClaimFence | TurnFence


@dataclass(frozen=True, slots=True)
class StoredSnapshot:
    """A paused run's snapshot as stored: its S3 key, compressed size (0 when read back
    from its pointer, which does not keep it) and SHA-256 digest."""

    key: str | None
    size: int
    digest: str


def unanswerable(
    current: RequestRecord | None, interrupt_id: str, now_ms: int
) -> errors.InterlockError | None:
    """Why `current` cannot be answered for `interrupt_id`, whoever asks; else None."""
    if current is None or interrupt_id not in current.interrupt_ids:
        return errors.UnknownRequest("no open request with that id in this chat")
    status = current.status(now_ms)
    if status is RequestState.DONE:
        return errors.AlreadyAnswered("this request was already answered", current)
    if status is RequestState.CANCELLED:
        return errors.RequestCancelled(current.ended_reason or "this request was cancelled")
    if status is RequestState.EXPIRED:
        if current.ended_reason is None:  # time ran out, rather than a check ending it
            return errors.RequestTimedOut("nobody answered this request before it expired")
        return errors.RequestExpired(current.ended_reason)
    if current.holds_live_claim(now_ms):
        return errors.ResumeInProgress(f"resume in progress by {current.worker}", current)
    return None


def refusal(
    current: RequestRecord | None, interrupt_id: str, secret: str, now_ms: int
) -> errors.InterlockError | None:
    """Why `current` cannot be claimed for `interrupt_id` with `secret`; else None.

    The order matters: a finished request replays before the secret is compared, so a
    second click from a tab holding an older secret still sees the stored outcome.
    """
    problem = unanswerable(current, interrupt_id, now_ms)
    if isinstance(problem, errors.ResumeInProgress) or problem is None:
        assert current is not None
        if current.secret_field(secret) is None:
            return errors.SecretRefused("the resume secret was refused")
    return problem


# Every reason a request is given up with begins so (`given_up`, `gave_up`).
GIVEN_UP: Final = "given up: "
TOO_MANY_CLAIMS: Final = (
    f"{GIVEN_UP}too many attempts in a row to resume this request added nothing to its run"
)
TOO_MANY_TAKEOVERS: Final = (
    f"{GIVEN_UP}too many attempts to resume this request, however far each of them got"
)
KEEPS_FAILING: Final = f"{GIVEN_UP}the run failed again and again after it was answered"
# The reasons earlier versions gave a request up with: read as given up too.
_GAVE_UP_BEFORE: Final = frozenset(
    {
        "denied: too many attempts to resume this request",
        "the run failed again and again after it was answered; given up",
        "could not be settled after repeated attempts",
        "could not be continued after repeated attempts",
    }
)


def stalls_now(request: RequestRecord, steps: int | None = None) -> int:
    """The claims of `request` in a row that added nothing to its run, as seen by one
    who counted `steps` recorded journal steps (None: not counted).

    A claim counts as it is taken (presumed to add nothing: its worker may die before
    its first step). A taker that finds more steps than were recorded when the last
    claim was taken (`journal_seen`) knows that claim moved the run on: the count is
    then 0. So only claims that left the journal as they found it add up.
    """
    if steps is not None and steps > request.journal_seen:
        return 0
    return request.stalls


def claim_progress(
    request: RequestRecord, steps: int, *, new_journal: bool = False
) -> tuple[int, int]:
    """`(stalls, journal_seen)` as the next claim of `request` records them, its taker
    having counted `steps` recorded journal steps just before: one more claim in a row
    since the run last moved on (`stalls_now`), and the steps it starts from (none for
    a claim that begins a journal of its own: a first claim, or another answer
    replacing the recorded one).

    Computed from the record as read: the claim's condition pins it (`claim_count`).
    """
    return stalls_now(request, steps) + 1, 0 if new_journal else steps


def given_up(
    request: RequestRecord,
    max_claims: int,
    max_failures: int,
    *,
    max_total_claims: int = MAX_TOTAL_CLAIMS,
    steps: int | None = None,
) -> str | None:
    """Why an open `request` may not be claimed again, or None.

    A card whose runs keep killing their workers before they record anything
    (`max_claims` claims in a row that added nothing to the journal, `stalls_now` with
    the `steps` the taker counted) is given up; a run that records steps between its
    deaths goes on, up to `max_total_claims` claims in all. One whose run keeps failing
    at the same recorded step (`max_failures`) is given up too: each is expired rather
    than tried forever. The one rule resume and the sweeper share.
    """
    if request.state not in OPEN_STATES:
        return None
    if stalls_now(request, steps) >= max_claims:
        return TOO_MANY_CLAIMS
    if request.claim_count >= max_total_claims:
        return TOO_MANY_TAKEOVERS
    if request.failures >= max_failures:
        return KEEPS_FAILING
    return None


def given_up_cause(reason: str | None) -> str | None:
    """What a give-up's `reason` (`given_up`) says after "given up", as a person reads
    it; None for a reason that is not a give-up's."""
    if reason is None:
        return None
    if reason.startswith(GIVEN_UP):
        return reason.removeprefix(GIVEN_UP)
    return reason if reason in _GAVE_UP_BEFORE else None


def gave_up(request: RequestRecord) -> str | None:
    """Why `request` was given up (`given_up`: expired with its retries spent), or None
    for a request that is open or ended any other way. Every surface says so: never
    "Approved by …" alone for a run that did not go to its end."""
    if request.state is not RequestState.EXPIRED:
        return None
    return given_up_cause(request.ended_reason)


def fresh_secret() -> tuple[str, str]:
    """A new answer secret and its hash: the secret goes to whoever may answer, and only
    the hash is ever stored."""
    secret = new_secret()
    return secret, hash_secret(secret)


def new_request(
    policy: StorePolicy,
    *,
    chat_id: str,
    interrupt_id: str,
    kind: Kind,
    card: dict[str, Any],
    user_id: str,
    turn_seq: int,
    now_ms: int,
    snapshot: StoredSnapshot,
    ttl_s: int | None = None,
    ask_slot: int | None = None,
    owner_roles: tuple[str, ...] = (),
    also_asked: tuple[Asked, ...] = (),
    notify_due_ms: int | None = None,
) -> tuple[RequestRecord, str]:
    """A pending request pointing at a stored snapshot, and its secret.

    The rules of a new request live here, not in the store: a fresh secret of which only
    the hash is kept, and an expiry clamped by `policy` (below the snapshot's lifecycle,
    with the retention window on top for the TTL). Nothing is written; the store opens
    it (`open`) or puts it in place of a claimed one (`chain`). With `notify_due_ms`,
    its channel posts are owed from then until they are reserved.
    """
    secret, secret_hash = fresh_secret()
    expires_at, ttl = policy.expiry(now_ms, ttl_s)
    request = RequestRecord(
        chat_id=chat_id,
        interrupt_id=interrupt_id,
        kind=kind,
        card=card,
        secret_hash=secret_hash,
        snapshot_key=snapshot.key,
        snapshot_digest=snapshot.digest,
        user_id=keys.checked_id(user_id, "user id"),
        turn_seq=turn_seq,
        created_at=now_ms // 1000,
        created_ms=now_ms,
        expires_at=expires_at,
        ttl=ttl,
        ask_slot=ask_slot,
        owner_roles=tuple(sorted(owner_roles)),
        also_asked=also_asked,
        notify_due_ms=notify_due_ms,
    )
    return request, secret


@dataclass(frozen=True, slots=True)
class Subject:
    """Something a user can approve: a site (host name) or a package name."""

    kind: Literal["site", "package"]
    name: str


@dataclass(frozen=True, slots=True)
class Approval:
    """One approved site or package for a user in a chat, or on the administrator list."""

    subject: Subject
    card_id: str | None
    granted_by: str
    granted_at: int
    ttl: int | None = None


@dataclass(frozen=True, slots=True)
class ChatMeta:
    """Per-chat facts the turn and resume checks read: the owner, the last saved turn and
    the running turn's lease."""

    chat_id: str
    owner: str | None = None
    last_turn: int = 0
    run_token: str | None = None
    run_until_ms: int | None = None

    def running(self, now_ms: int) -> bool:
        """Whether a turn may still hold the chat's running-turn lease at `now_ms`: until
        it is over by every clock, as admission (the taker) judges it."""
        return self.run_until_ms is not None and self.run_until_ms > surely_passed(now_ms)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One entry of a chat's audit trail, numbered in time order."""

    chat_id: str
    seq: int
    type: str
    at_ms: int
    actor: str
    detail: dict[str, Any] = field(default_factory=dict)
