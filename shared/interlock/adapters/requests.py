"""The pointer store: one open request per chat, claimed by exactly one worker.

Timeline of one pointer item (`CHAT#<chat>` / `REQUEST`):

    open ──► pending ──claim──► claimed ──finish──► done ──(a later pause)──► open again
               ▲   │              │  │
               │   │              │  └─ lease lapses: claimable by the next click
               │   │              └─ chain: a new interrupt replaces it in place ─┐
               │   └─► expired | cancelled (a failed check, the sweeper, the user) │
               └───────────────────────────────────────────────────────────────────┘

Every transition is one conditional write whose condition is assembled from the named
parts below; a lost race asks DynamoDB for the item as it stood (ALL_OLD) and becomes a
domain error carrying that record, so nobody needs a second read to say who holds it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from contextlib import suppress
from dataclasses import MISSING, fields
from typing import Any, Final, TypeVar

from interlock import errors, keys
from interlock.adapters import packing
from interlock.adapters.chats import meta_from_item
from interlock.adapters.dynamo import (
    Cancelled,
    ConditionFailed,
    Conflicted,
    DynamoDBClient,
    batch_get,
    best_effort,
    chats_due,
    entry_refused,
    expression,
    from_item,
    item_size,
    to_item,
    transact,
    translated,
    writes,
)
from interlock.adapters.fencing import HOLDS_CLAIM, claim_values, fenced
from interlock.adapters.numbering import observed
from interlock.adapters.schema import (
    EXPIRY_INDEX,
    EXPIRY_INDEX_SORT,
    INBOX_INDEX,
    INBOX_INDEX_PARTITION,
    INBOX_INDEX_SORT,
    LEASE_INDEX,
    LEASE_INDEX_SORT,
    NOTICE_INDEX_SORT,
    SWEEP_SHARDS,
)
from interlock.ports import Entry, NotPending
from interlock.records import (
    OPEN_STATES,
    SECRET_FIELDS,
    AnswerRule,
    Asked,
    ChatMeta,
    ClaimFence,
    InboxCursor,
    InboxEntry,
    RequestRecord,
    RequestState,
    Surface,
    answer_rule,
    binding_refusal,
    claim_progress,
    journal_of,
    refusal,
    unanswerable,
)
from interlock.timing import EDIT_HOLD_MS, StorePolicy, surely_passed
from interlock.tokens import new_token

# Named parts of the conditions. `:now_s` / `:now_ms` are the caller's clock; `:lapse_s`
# / `:lapse_ms` what every worker's clock has surely passed (`timing.surely_passed`),
# against which a taker judges a time another worker wrote (`clock_values`).
ID_MATCHES: Final = "#interrupt_id = :interrupt_id"
# The presented secret's digest is still one a surface holds (`records.SECRET_FIELDS`):
# another surface's read in between rotates only its own.
HASH_MATCHES: Final = ":secret_hash IN (#secret_hash, #page_secret_hash, #chat_secret_hash)"
IS_PENDING: Final = "#state = :pending"
# Over by the holder's clock too: every use of it takes the claim from its holder.
LEASE_LAPSED: Final = "(#state = :claimed AND #lease_expires_at_ms <= :lapse_ms)"
# The person's side: answerable until the stated expiry by the answering worker's clock.
NOT_EXPIRED: Final = "#expires_at > :now_s"
COUNT_UNCHANGED: Final = "#claim_count = :seen_count"
# No clock margin: the deadline is written by the claim and read by its own renewals.
BEFORE_DEADLINE: Final = "#resume_deadline_ms > :now_ms"
ENDED: Final = "#state IN (:done, :expired, :cancelled)"
# Nothing of the run's answer was acted on (`RequestRecord.acted_on`): no effect
# reserved, no tool body started. Recorded model responses alone may be thrown away.
NOT_ACTED: Final = "attribute_not_exists(#acted)"
# An unanswered request past its stated expiry belongs to its timeout policy: no cancel
# takes it from the sweeper. One answered in time may still be cancelled (nothing acted).
NOT_OVERDUE: Final = f"(NOT {IS_PENDING} OR {NOT_EXPIRED})"
# What a new request may replace: as `CLAIM_OVERDUE` judges it, past expiry on every clock.
ABANDONED: Final = f"(#expires_at <= :lapse_s AND ({IS_PENDING} OR {LEASE_LAPSED}))"

CLAIMABLE: Final = f"({IS_PENDING} OR {LEASE_LAPSED}) AND {NOT_EXPIRED}"
NO_OPEN_REQUEST: Final = f"attribute_not_exists(#pk) OR {ENDED} OR {ABANDONED}"
CLAIM: Final = f"{ID_MATCHES} AND {HASH_MATCHES} AND {CLAIMABLE} AND {COUNT_UNCHANGED}"
# A claim whose record is computed, not read back: pending, unchanged, nothing recorded.
# Its expiry is pinned to the one read, which the caller checked against the same clock.
CLAIM_PENDING: Final = (
    f"{ID_MATCHES} AND {HASH_MATCHES} AND {IS_PENDING} AND {COUNT_UNCHANGED}"
    " AND #expires_at = :seen_expires_at AND attribute_not_exists(#journal_id)"
)
ROTATE: Final = f"{ID_MATCHES} AND {CLAIMABLE}"
# Ending skips NOT_EXPIRED: the sweeper must be able to expire what is overdue.
END_OPEN: Final = f"{ID_MATCHES} AND ({IS_PENDING} OR {LEASE_LAPSED}) AND {COUNT_UNCHANGED}"
RENEW: Final = f"{HOLDS_CLAIM} AND {BEFORE_DEADLINE}"
# The sweeper's side: past the stated expiry by every clock, the answering worker's too.
PAST_EXPIRY: Final = "#expires_at <= :lapse_s"
CLAIM_OVERDUE: Final = (
    f"{ID_MATCHES} AND ({IS_PENDING} OR {LEASE_LAPSED}) AND {PAST_EXPIRY} AND {COUNT_UNCHANGED}"
)
# Continuing a run whose worker died: the claim is still the one read, its lease lapsed.
CLAIM_LAPSED: Final = f"{ID_MATCHES} AND {LEASE_LAPSED} AND {COUNT_UNCHANGED}"
REROUTE: Final = (
    f"{ID_MATCHES} AND {IS_PENDING} AND {PAST_EXPIRY} AND {COUNT_UNCHANGED}"
    " AND attribute_not_exists(#route_role)"
)

# The first claim records the answer; a takeover keeps it (if_not_exists), so a run
# that may already have acted on an answer is never continued with a different one.
CLAIM_SET: Final = (
    "SET #state = :claimed, #worker = :worker, #lease_token = :lease_token, "
    "#lease_expires_at_ms = :lease_expires_at_ms, "
    "#resume_deadline_ms = :resume_deadline_ms, #claim_count = #claim_count + :one, "
    "#decision = if_not_exists(#decision, :decision), "
    "#response = if_not_exists(#response, :response), "
    "#decided_by = if_not_exists(#decided_by, :decided_by), "
    "#decided_at_ms = if_not_exists(#decided_at_ms, :now_ms), "
    "#decided_via = if_not_exists(#decided_via, :decided_via), "
    "#journal_id = if_not_exists(#journal_id, :journal_id)"
)
# A takeover bringing another answer while nothing was acted on: the later answer is the
# one that runs (`records.answer_rule`), and it starts a journal of its own: what the
# earlier one's run journaled (model responses only: a tool about to act marks `acted`)
# is never read again, and ages out.
CLAIM_REPLACE: Final = f"{CLAIM} AND {NOT_ACTED}"
CLAIM_REPLACE_SET: Final = (
    "SET #state = :claimed, #worker = :worker, #lease_token = :lease_token, "
    "#lease_expires_at_ms = :lease_expires_at_ms, "
    "#resume_deadline_ms = :resume_deadline_ms, #claim_count = #claim_count + :one, "
    "#decision = :decision, #response = :response, #decided_by = :decided_by, "
    "#decided_at_ms = :now_ms, #decided_via = :decided_via, #journal_id = :journal_id"
)
# What every claim also records of the run's progress (`records.claim_progress`),
# after its `CLAIM_SET` or `CLAIM_REPLACE_SET`: its place in the retry cap's count, and
# the journal's steps when it was taken, left off when none (most claims: a first one).
PROGRESS_SET: Final = ", #stalls = :stalls, #journal_seen = :journal_seen"
PROGRESS_FROM_NONE: Final = ", #stalls = :stalls REMOVE #journal_seen"
# Releasing after a failure: the claim does not count as a crash, and the fence moves on.
# Nobody holds a released lease, so it ends a clock margin back (`:released_ms`): over at
# once for a taker whose clock is not behind the releaser's, and the recovery grace still
# counts from the release by the releaser's clock.
RELEASE_SET: Final = (
    "SET #lease_token = :new_token, #lease_expires_at_ms = :released_ms, "
    "#claim_count = #claim_count - :one, #failures = if_not_exists(#failures, :zero) + :one, "
    "#stalls = if_not_exists(#stalls, :one) - :one"
)
# Resetting: answerable afresh, but the failure counts, so a run that fails the same way
# before it acts (a model that keeps refusing) is still given up on at the cap.
RESET_SET: Final = (
    "SET #state = :pending, #lease_token = :new_token, #claim_count = #claim_count - :one, "
    "#failures = if_not_exists(#failures, :zero) + :one, "
    "#stalls = if_not_exists(#stalls, :one) - :one "
    "REMOVE #worker, #lease_expires_at_ms, #resume_deadline_ms, #decision, #response, "
    "#journal_id, #journal_seen, "
    "#decided_by, #decided_at_ms, #decided_via"
)
_STATES: Final = {f":{state.value}": state.value for state in RequestState}
# What a finish removes from the pointer: the index entries of an open request, and the
# paused run it no longer needs (its journal, its snapshot, which the bucket's lifecycle
# deletes, and its claim's lease); the recorded answer, who gave it, and what it ended
# with stay for replays and the surfaces. Also what keeps a finished download
# approval's item under 1 KB.
FINISHED: Final[dict[str, None]] = {
    "journal_id": None,
    "snapshot_key": None,
    "snapshot_digest": None,
    "worker": None,
    "lease_token": None,
    "lease_expires_at_ms": None,
    "resume_deadline_ms": None,
}
_ENDED_RUN: Final = ("sweep_shard", "inbox_user", *FINISHED)
# What an ending also writes when it owes the edit of the request's channel posts
# (`RequestRecord.owes_edits`): the mark that they are owed, due once the ending process
# had its chance to edit them (`timing.EDIT_HOLD_MS`), and the shard that keeps the
# pointer in the notice index until the edits are recorded (`edits_recorded`), so a
# process that dies in between leaves them to the finder's next pass, not to the expiry.
# No write of its own: it rides in the ending's.
EDITS_OWED: Final = "#notice_due_ms = :edits_due, #sweep_shard = :edits_shard"
# The most interrupt ids a condition lists (DynamoDB's bound on `IN`).
_MOST_LISTED: Final = 100


class RequestStore:
    """Pointer operations on the Interlock table.

    Args:
        client: A boto3 DynamoDB client (injected; tests pass a moto-backed one).
        table_name: The table created from `interlock.adapters.schema`.
        policy: Leases, expiries, caps and size budgets.
    """

    def __init__(self, client: DynamoDBClient, table_name: str, policy: StorePolicy) -> None:
        self._client = client
        self._table = table_name
        self._policy = policy

    # -- reads ---------------------------------------------------------------------

    def get(self, chat_id: str, now_ms: int) -> RequestRecord | None:
        """The chat's pointer (consistent read), or None if absent or past its TTL.

        TTL deletion runs late, so an item whose `ttl` has passed is treated as gone.
        """
        with translated("read request"):
            response = self._client.get_item(
                TableName=self._table, Key=_key(chat_id), ConsistentRead=True
            )
        item = response.get("Item")
        if not item:
            return None
        request = _from_item(from_item(item))
        return request if request.ttl > now_ms // 1000 else None

    def get_with_chat(self, chat_id: str, now_ms: int) -> tuple[RequestRecord | None, ChatMeta]:
        """The chat's pointer (as `get`) and its meta item, in one consistent read."""
        wanted = [_key(chat_id), _meta_key(chat_id)]
        found = batch_get(self._client, self._table, wanted, "read request and chat")
        rows = {row["sk"]: row for row in found}
        # The meta item holds the chat's event counter: this worker's events need no retry.
        observed(self._table, chat_id, rows.get(keys.META_SK))
        meta = meta_from_item(chat_id, rows.get(keys.META_SK, {}))
        item = rows.get(keys.REQUEST_SK)
        if not item:
            return None, meta
        request = _from_item(item)
        return (request if request.ttl > now_ms // 1000 else None), meta

    def read_for_turn(
        self, chat_id: str, now_ms: int
    ) -> tuple[RequestRecord | None, ChatMeta, bool]:
        """`get_with_chat` as of one instant (a transactional read), for a new turn; and
        whether the pointer was settled then: absent, or in an ended state.

        Read apart (a batch read fetches its items one by one), the two could straddle a
        pause: the pointer read before it opened, the meta item after it gave the chat
        back. So a turn's admission may leave its pointer check out only on this read
        (`TurnStore.admit`). A read that meets a write in flight is made apart instead,
        and settles nothing.
        """
        gets = [
            {"Get": {"TableName": self._table, "Key": key}}
            for key in (_key(chat_id), _meta_key(chat_id))
        ]
        try:
            with translated("read request and chat"):
                response = self._client.transact_get_items(TransactItems=gets)
        except Conflicted:
            request, meta = self.get_with_chat(chat_id, now_ms)
            return request, meta, False
        pointer, row = (from_item(got.get("Item", {})) for got in response["Responses"])
        observed(self._table, chat_id, row or None)
        meta = meta_from_item(chat_id, row)
        if not pointer:
            return None, meta, True
        request = _from_item(pointer)
        settled = request.state not in OPEN_STATES
        return (request if request.ttl > now_ms // 1000 else None), meta, settled

    # -- opening -------------------------------------------------------------------

    def open(self, request: RequestRecord, now_ms: int, also: list[Entry] | None = None) -> None:
        """Write a new pointer, only if the chat has no open request.

        Call only after the snapshot PUT was confirmed. `also` are transaction entries
        that commit with it (the running turn's fence and release, backpressure, audit
        events), all or nothing. Raises `ChatBusy` with the open request when there is
        one, `TooLarge` when the card would not fit, `EntryRefused` naming the role of
        the first entry of `also` that lost its condition.
        """
        item = self._sized(_to_item(request))
        values = {**_STATES, **clock_values(now_ms)}
        if also:
            put = {
                "TableName": self._table,
                "Item": item,
                **expression(condition=NO_OPEN_REQUEST, values=values),
            }
            try:
                self._transacted(
                    request.chat_id,
                    [{"Put": put}, *writes(also)],
                    "open request",
                    _asks(request.interrupt_id),
                )
            except Cancelled as lost:
                if 0 in lost.failed:
                    old = lost.failed[0]
                    current = _from_item(old) if old else None
                    raise errors.ChatBusy(
                        "this chat already has an open request", current
                    ) from None
                raise entry_refused(also, lost, 1) from None
            return
        try:
            with translated("open request"):
                self._client.put_item(
                    TableName=self._table,
                    Item=item,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **expression(condition=NO_OPEN_REQUEST, values=values),
                )
        except ConditionFailed as lost:
            current = _from_item(lost.old) if lost.old else None
            raise errors.ChatBusy("this chat already has an open request", current) from None

    def notified(
        self, chat_id: str, interrupt_id: str, *, posted: bool = False, now_ms: int = 0
    ) -> None:
        """The channel posts of the open request for `interrupt_id` are reserved (with
        `posted`, at least one): the pointer leaves the notice index (each reserved post
        is retried by its own notice) and, with `posted`, keeps a flag that the write
        ending it owes their edit (`RequestRecord.owes_edits`), in the same write.

        Should the request have ended already by a write that did not know of them, the
        edit is owed from here: due `EDIT_HOLD_MS` after `now_ms`, as an ending owes it.
        """
        key = to_item({"pk": keys.chat_pk(chat_id), "sk": keys.REQUEST_SK})
        values = {**_STATES, ":interrupt_id": interrupt_id}
        try:
            with translated("clear notice mark"):
                self._client.update_item(
                    TableName=self._table,
                    Key=key,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **expression(
                        condition=f"{ID_MATCHES} AND #state IN (:pending, :claimed)",
                        update=f"{'SET #posted = :posted ' if posted else ''}REMOVE #due",
                        values={**values, **({":posted": True} if posted else {})},
                        names={"#due": NOTICE_INDEX_SORT},
                    ),
                )
            return
        except ConditionFailed as lost:
            old = _from_item(lost.old) if lost.old else None
        # The chat moved on to another request (nothing of this one is left to mark), or
        # this one ended: by a write that owed the edit already, or that knew of no post.
        if not posted or old is None or old.interrupt_id != interrupt_id or old.owes_edits:
            return
        with suppress(ConditionFailed), translated("mark notice edits"):
            self._client.update_item(
                TableName=self._table,
                Key=key,
                **expression(
                    condition=f"{ID_MATCHES} AND {ENDED} AND attribute_not_exists(#due)",
                    update="SET #posted = :posted, #due = :due, #sweep_shard = :shard",
                    values={
                        **values,
                        ":posted": True,
                        ":due": now_ms + EDIT_HOLD_MS,
                        ":shard": keys.sweep_shard(chat_id, SWEEP_SHARDS),
                    },
                    names={"#due": NOTICE_INDEX_SORT},
                ),
            )

    def edits_recorded(self, chat_id: str, interrupt_ids: Collection[str]) -> None:
        """The edits of the ended request's channel posts are recorded on their notices
        (each carried on by its own from here): the mark that they are owed is cleared,
        and the pointer leaves the notice index (its `sweep_shard` goes with it). Does
        nothing unless the chat's pointer is that request, ended, with the mark."""
        ids = sorted(interrupt_ids)[:_MOST_LISTED]
        if not ids:
            return
        listed = {f":i{n}": interrupt_id for n, interrupt_id in enumerate(ids)}
        with suppress(ConditionFailed), translated("clear notice edits"):
            self._client.update_item(
                TableName=self._table,
                Key=to_item({"pk": keys.chat_pk(chat_id), "sk": keys.REQUEST_SK}),
                **expression(
                    condition=(
                        f"#interrupt_id IN ({', '.join(listed)}) AND {ENDED}"
                        " AND attribute_exists(#due)"
                    ),
                    update="REMOVE #due, #sweep_shard",
                    values={**_STATES, **listed},
                    names={"#due": NOTICE_INDEX_SORT},
                ),
            )

    # -- the secret ----------------------------------------------------------------

    def rotate_secret(
        self, request: RequestRecord, surface: Surface, secret_hash: str, now_ms: int
    ) -> RequestRecord:
        """Store a fresh secret's hash (`records.fresh_secret`) for `surface` on an
        answerable request; that surface's older copies stop working, others' do not."""
        values = {
            **_STATES,
            **clock_values(now_ms),
            ":interrupt_id": request.interrupt_id,
            ":secret_hash": secret_hash,
        }
        return self._update(
            request.chat_id,
            "rotate secret",
            ROTATE,
            f"SET #{SECRET_FIELDS[surface]} = :secret_hash",
            values,
            lost=lambda cur: _changed(cur, request.interrupt_id, now_ms),
        )

    # -- claim, lease, finish ---------------------------------------------------------

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
        """Take ownership of `request` as read, in one conditional write.

        `also` (the `decision` events of the answer this claim records) commit with it
        in every case, so no recorded answer is ever without its event.

        `replaces` are the writes that undo what a replaced answer did (withdrawing its
        grants): they commit with the claim only when it replaces the recorded answer,
        so no crash can leave the new answer recorded beside the old one's grants. Each
        rides along (`best_effort`): a row already gone does not refuse the claim.

        `answer` is `(decision label, response JSON)`, given by `by` through `via`. What
        the claim records follows `records.answer_rule`: the first claim records it; a
        takeover keeps the recorded answer when it is the same, or replaces it when
        nothing was acted on yet. The returned record carries what was recorded.

        `journal_steps` is how many steps the taker counted in the journal of `request`
        before this claim (`records.claim_progress`); counted here when not given.

        Raises the refusal for the record as it stands: `ResumeInProgress` naming the
        holder, `AlreadyAnswered` with the done record, `SecretRefused`,
        `RequestExpired`, `UnknownRequest`, or
        `DecisionBinding` when another answer was recorded and acted on.
        """
        self._check_claimable(request, secret, now_ms)
        rule = answer_rule(request, answer[1])
        if rule is AnswerRule.BINDING:
            raise binding_refusal(request)
        replacing = rule is AnswerRule.REPLACE
        steps = self._counted(request, journal_steps)
        values = {
            **self._claim_values(
                request, worker, now_ms, answer, by, via, steps=steps, new_journal=replacing
            ),
            ":secret_hash": _held_digest(request, secret),
        }
        claim_set = _claim_update(CLAIM_REPLACE_SET if replacing else CLAIM_SET, values)

        ours = _holds_token(values[":lease_token"])

        def lost(cur: RequestRecord | None) -> errors.InterlockError:
            problem = refusal(cur, request.interrupt_id, secret, now_ms)
            if problem is None and cur is not None and replacing and cur.acted_on:
                return binding_refusal(cur)  # acted on between our read and this claim
            return problem or _changed(cur, request.interrupt_id, now_ms)

        riders = [best_effort(entry) for entry in writes(replaces)] if replacing else []
        if riders or also:
            pointer = self._pointer_entry(
                request.chat_id, CLAIM_REPLACE if replacing else CLAIM, claim_set, values
            )
            entries = [*riders, *writes(list(also))]
            try:
                self._transacted(request.chat_id, [pointer, *entries], "claim request", ours)
            except Cancelled as refused:
                old = refused.failed.get(0)
                raise lost(_from_item(old) if old else None) from None
            return self._claimed_back(request.chat_id, ours)
        return self._update(
            request.chat_id,
            "claim request",
            CLAIM_REPLACE if replacing else CLAIM,
            claim_set,
            values,
            lost=lost,
            landed=ours,
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
        """`claim` a pending request in one transaction with `also(claimed)`: the writes
        that belong with the claim (its slot, budget, audit event, granted rows) commit
        with it or not at all, so none needs a fence check of its own.

        The claimed record is computed rather than read back (a transaction returns no
        values): exact, because the claim's condition also pins what a pending request
        may change without a claim (`expires_at`, by a reroute), and nothing else writes
        to a pending request. Refusals are `claim`'s; an entry of `also` that lost its
        own condition is `EntryRefused` and nothing was written.
        """
        if request.state is not RequestState.PENDING:
            raise ValueError("only a pending request is claimed in one transaction")
        # Pending, and still as read: never a lapsed claim (a released run keeps its
        # recorded answer and journal, which a takeover must read back; see `claim`).
        self._check_claimable(request, secret, now_ms)
        values = {
            # No journal to count: a pending request has none (`CLAIM_PENDING`).
            **self._claim_values(request, worker, now_ms, answer, by, via, new_journal=True),
            ":secret_hash": _held_digest(request, secret),
            ":seen_expires_at": request.expires_at,
        }
        claimed = request.with_changes(
            state=RequestState.CLAIMED,
            worker=worker,
            lease_token=values[":lease_token"],
            lease_expires_at_ms=values[":lease_expires_at_ms"],
            resume_deadline_ms=values[":resume_deadline_ms"],
            claim_count=request.claim_count + 1,
            stalls=values[":stalls"],
            journal_seen=values[":journal_seen"],
            decision=request.decision if request.decision is not None else answer[0],
            response=request.response if request.response is not None else answer[1],
            decided_by=(
                request.decided_by if request.decided_by is not None else values[":decided_by"]
            ),
            decided_at_ms=request.decided_at_ms or now_ms,
            decided_via=request.decided_via or via,
            journal_id=values[":journal_id"],  # a pending request has none: this one begins it
        )
        pointer = self._pointer_entry(
            request.chat_id, CLAIM_PENDING, _claim_update(CLAIM_SET, values), values
        )
        try:
            riders = also(claimed)
            self._transacted(
                request.chat_id,
                [pointer, *writes(riders)],
                "claim request",
                _holds_token(claimed.lease_token),
            )
        except Cancelled as lost:
            if 0 in lost.failed:
                old = lost.failed[0]
                current = _from_item(old) if old else None
                problem = refusal(current, request.interrupt_id, secret, now_ms)
                if (
                    problem is None
                    and current is not None
                    and current.state is RequestState.CLAIMED
                ):
                    raise NotPending(current) from None  # a lapsed claim: take it over
                raise problem or _changed(current, request.interrupt_id, now_ms) from None
            raise entry_refused(riders, lost, 1) from None
        return claimed

    def _check_claimable(self, request: RequestRecord, secret: str, now_ms: int) -> None:
        problem = refusal(request, request.interrupt_id, secret, now_ms)
        if problem is not None:
            raise problem

    def _claim_values(
        self,
        request: RequestRecord,
        worker: str,
        now_ms: int,
        answer: tuple[str, str],
        by: str | None,
        via: str,
        *,
        steps: int = 0,
        new_journal: bool = False,
    ) -> dict[str, Any]:
        lease_token = new_token()
        stalls, journal_seen = claim_progress(request, steps, new_journal=new_journal)
        return {
            ":decision": answer[0],
            ":response": _stored_response(answer[1], request.interrupt_id),
            ":decided_by": by if by is not None else via,
            ":decided_via": via,
            **_STATES,
            **clock_values(now_ms),
            ":interrupt_id": request.interrupt_id,
            ":seen_count": request.claim_count,
            ":worker": worker,
            ":lease_token": lease_token,
            ":journal_id": journal_of(lease_token),
            ":lease_expires_at_ms": now_ms + self._policy.lease_ms,
            ":resume_deadline_ms": now_ms + self._policy.max_resume_ms,
            ":one": 1,
            ":stalls": stalls,
            ":journal_seen": journal_seen,
        }

    def _counted(self, request: RequestRecord, journal_steps: int | None) -> int:
        """The steps recorded in the journal of `request` as its taker counted them, or
        counted now (one query; none for a request without a journal)."""
        return journal_steps if journal_steps is not None else len(self.steps(request))

    def renew(self, claim: RequestRecord, now_ms: int) -> int:
        """Extend the lease held by `claim`; returns the new `lease_expires_at_ms`.

        The lease never reaches past the resume deadline; past it, or once another
        worker took over, renewal raises `LeaseLost`.
        """
        deadline = _required(claim.resume_deadline_ms)
        until = min(now_ms + self._policy.lease_ms, deadline)
        values = {**_STATES, **claim_values(claim.fence), ":now_ms": now_ms, ":until": until}
        self._update(
            claim.chat_id,
            "renew lease",
            RENEW,
            "SET #lease_expires_at_ms = :until",
            values,
            lost=lambda _: errors.LeaseLost("the lease was lost or reached its deadline"),
        )
        return until

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
        """Mark the claimed request done and record its answer.

        The answer is either in S3 (`answer_key`) or inline: `final_text` with the rest
        of it (`answer`: tool calls, message id), when `answer_fits` said it would.
        `final_text` is also kept inline beside an S3 answer, for cheap replays, if the
        whole item stays within budget. `also` (the transcript's entries) commit in the
        same transaction, fenced by the claim: the answer and the turn that shows it
        land together or not at all.
        """
        values: dict[str, Any] = {
            **_STATES,
            **claim_values(claim.fence),
            ":decision": decision,
            ":answered_at": now_ms // 1000,
        }
        sets = ["#state = :done", "#decision = :decision", "#answered_at = :answered_at"]
        inline = _answer_json(answer) if answer_key is None and answer is not None else None
        if answer_key is not None:
            values[":answer_key"] = answer_key
            sets.append("#answer_key = :answer_key")
        elif inline is None or final_text is None:
            raise ValueError("an answer is stored in S3 or inline, with its text")
        if inline is not None:
            values[":answer"] = packing.compact(inline)
            sets.append("#answer = :answer")
        if final_text is not None and (inline is not None or self._fits_with(claim, final_text)):
            values[":final_text"] = final_text
            sets.append("#final_text = :final_text")
        owed = _edits_owed(claim, now_ms + EDIT_HOLD_MS)
        removed = [name for name in _ENDED_RUN if not (owed and name == "sweep_shard")]
        if owed:
            values.update(owed)
            sets.append(EDITS_OWED)
        update = f"SET {', '.join(sets)} REMOVE {', '.join(f'#{name}' for name in removed)}"
        lost = errors.LeaseLost("the claim was lost before the answer was stored")

        def ours(cur: RequestRecord) -> bool:
            # The done item keeps no lease token: it is known by what this finish wrote.
            # Only a claim of this request finishes it, so another finish of the same
            # interrupt, with the same decision and answer in the same second, is one
            # that told the same outcome.
            return (
                cur.state is RequestState.DONE
                and cur.interrupt_id == claim.interrupt_id
                and cur.decision == decision
                and cur.answered_at == values[":answered_at"]
                and cur.answer_key == answer_key
            )

        if not also:
            return self._update(
                claim.chat_id,
                "finish request",
                HOLDS_CLAIM,
                update,
                values,
                lost=lambda _: lost,
                landed=ours,
            )
        pointer = self._pointer_entry(claim.chat_id, HOLDS_CLAIM, update, values)
        try:
            self._transacted(claim.chat_id, [pointer, *writes(also)], "finish request", ours)
        except Cancelled as cancelled:
            if 0 in cancelled.failed:
                raise lost from None
            raise errors.StoreError("finish request failed: the transcript moved on") from None
        return claim.with_changes(
            state=RequestState.DONE,
            answer_key=answer_key,
            answer=inline,
            decision=decision,
            answered_at=now_ms // 1000,
            final_text=values.get(":final_text"),
            **FINISHED,
            notify_due_ms=owed.get(":edits_due"),
        )

    def chain(
        self,
        claim: RequestRecord,
        successor: RequestRecord,
        also: list[Entry] | None = None,
    ) -> None:
        """Replace the claimed request in place by a new one (new id, fresh secret).

        One write, conditional on still holding the claim; refused with `LeaseLost`
        if the claim was lost, in which case nothing is written. `also` (unconditional
        writes: the pause's audit events) commit with it.

        The claimed request ends here: when it owes the edit of its channel posts, the
        successor is in the notice index by the time its own posts are owed, or
        `EDIT_HOLD_MS` after it was made, whichever comes first (the finder's pass
        edits every post of an interrupt the pointer no longer asks).
        """
        if claim.owes_edits:
            edits_due = (successor.created_ms or successor.created_at * 1000) + EDIT_HOLD_MS
            due = min(successor.notify_due_ms or edits_due, edits_due)
            successor = successor.with_changes(notify_due_ms=due)
        item = self._sized(
            _to_item(successor.with_changes(claim_count=0, stalls=0, journal_seen=0))
        )
        put = {
            "TableName": self._table,
            "Item": item,
            **expression(condition=HOLDS_CLAIM, values={**_STATES, **claim_values(claim.fence)}),
        }
        try:
            if also:
                self._transacted(
                    claim.chat_id,
                    [{"Put": put}, *writes(also)],
                    "chain request",
                    _asks(successor.interrupt_id),
                )
            else:
                with translated("chain request"):
                    self._client.put_item(**put)
        except (Cancelled, ConditionFailed):
            raise errors.LeaseLost("the claim was lost; the next request was not written") from None

    def record_step(self, claim: RequestRecord, seq: int, entry: str, *, acting: bool) -> None:
        """Record journal step `seq` of the claimed run (a model response or a tool
        result, as JSON text) as an item of its own, only while the claim holds;
        `LeaseLost` otherwise, nothing written.

        Each step is billed by its own size, not by the request's and the journal's so
        far. With `acting` (a response that calls a tool), the same transaction marks the
        request as acted on, before any tool runs on it (`RequestRecord.acted_on`). A
        step lives as long as its request (`ttl`), then DynamoDB deletes it at no cost.
        """
        journal_id = claim.journal_id
        if journal_id is None:
            raise ValueError("only a claim that recorded its answer has a journal")
        item = {
            "pk": keys.chat_pk(claim.chat_id),
            "sk": keys.step_sk(journal_id, seq),
            "entry": packing.compact(entry),
            "ttl": claim.ttl,
        }
        put = {
            "Put": {
                "TableName": self._table,
                "Item": to_item(item),
                **expression(condition="attribute_not_exists(#sk)", values={}),
            }
        }

        def send() -> None:
            fenced(self._client, self._table, claim.fence, [put], "record step", effect=acting)

        try:
            self._sent(claim.chat_id, send, lambda _: False)
        except Cancelled:
            # Taken already: by this very write, when an unclear answer made it go again.
            if self._step_entry(item) != item["entry"]:
                raise errors.StoreError(f"record step failed: step {seq} was recorded") from None

    def _step_entry(self, item: dict[str, Any]) -> Any:
        """The stored entry of the journal step keyed as `item`, or None."""
        with translated("read step"):
            found = self._client.get_item(
                TableName=self._table,
                Key=to_item({"pk": item["pk"], "sk": item["sk"]}),
                ConsistentRead=True,
            ).get("Item")
        return from_item(found).get("entry") if found else None

    def steps(self, claim: RequestRecord) -> list[str]:
        """The journal steps recorded for the claim's answer, in order (one strongly
        consistent query, paged)."""
        if claim.journal_id is None:
            return []
        paginator = self._client.get_paginator("query")
        found: list[str] = []
        with translated("read journal"):
            for page in paginator.paginate(
                TableName=self._table,
                ConsistentRead=True,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues=to_item(
                    {
                        ":pk": keys.chat_pk(claim.chat_id),
                        ":prefix": keys.step_prefix(claim.journal_id),
                    }
                ),
            ):
                found += [packing.text(from_item(item)["entry"]) for item in page.get("Items", [])]
        return found

    def mark_acted(self, fence: ClaimFence) -> None:
        """Mark the claimed request as acted on, only while `fence` holds (a tool body is
        about to run on its answer); `LeaseLost` otherwise, nothing written."""
        values = {**claim_values(fence), ":acted": True}

        def send() -> None:
            # Marking twice marks once: sent again after an unclear answer, it holds.
            with translated("mark acted"):
                self._client.update_item(
                    TableName=self._table,
                    Key=_key(fence.chat_id),
                    **expression(
                        condition=HOLDS_CLAIM, update="SET #acted = :acted", values=values
                    ),
                )

        try:
            self._sent(
                fence.chat_id, send, lambda cur: cur.acted and cur.lease_token == fence.lease_token
            )
        except _Landed:
            return
        except ConditionFailed:
            raise errors.LeaseLost("the claim was lost; the tool did not start") from None

    def release(
        self,
        claim: RequestRecord,
        now_ms: int,
        *,
        reset: bool,
        also: list[Entry] | None = None,
    ) -> RequestRecord:
        """Give a claim back after a failure that was not the request's fault.

        With `reset`, and only if nothing of the answer was acted on (no step recorded,
        no effect recorded), the request is pending again and may be answered afresh.
        Otherwise it stays claimed with its recorded answer and a lapsed lease, so the
        next answer or the sweeper continues it from its journal. Either way the claim
        does not count against the cap. `also` (the withdrawal of the answer's grants)
        commits only with a reset, in the same transaction. Returns the released record.
        """
        values = {
            **_STATES,
            **claim_values(claim.fence),
            ":new_token": new_token(),
            ":released_ms": surely_passed(now_ms),
            ":one": 1,
            ":zero": 0,
        }
        if reset:
            try:
                return self._reset(claim, values, also or [])
            except _Acted:
                pass  # an effect was recorded: keep the answer, release the lease only
        return self._update(
            claim.chat_id,
            "release claim",
            HOLDS_CLAIM,
            RELEASE_SET,
            values,
            lost=lambda _: _lost(),
            landed=_holds_token(values[":new_token"]),
        )

    def _reset(
        self, claim: RequestRecord, values: dict[str, Any], also: list[Entry]
    ) -> RequestRecord:
        condition = f"{HOLDS_CLAIM} AND {NOT_ACTED}"
        if not also:
            return self._update(
                claim.chat_id,
                "reset claim",
                condition,
                RESET_SET,
                values,
                lost=lambda cur: (
                    _Acted() if cur and cur.lease_token == claim.lease_token else _lost()
                ),
                landed=_holds_token(values[":new_token"]),
            )
        pointer = self._pointer_entry(claim.chat_id, condition, RESET_SET, values)
        try:
            self._transacted(
                claim.chat_id,
                [pointer, *writes(also)],
                "reset claim",
                _holds_token(values[":new_token"]),
            )
        except Cancelled as cancelled:
            old = cancelled.failed.get(0)
            if 0 in cancelled.failed and not (old and old.get("lease_token") == claim.lease_token):
                raise _lost() from None
            raise _Acted() from None  # acted on, or a grant changed under us: keep the answer
        return claim.reset(values[":new_token"])  # the record as `RESET_SET` left it

    def end_claimed(self, claim: RequestRecord, reason: str) -> RequestRecord:
        """Expire a claimed request that can never run (its snapshot is unusable).

        The edit of its channel posts, when it owes one, is due at once: no process
        edits them in between (the finder's next pass does, or the settle step that
        found the snapshot gone, right after it)."""
        values = {**_STATES, **claim_values(claim.fence), ":reason": reason}
        # The claim was taken (or last renewed) before now, by the claim's own clock.
        claimed_ms = (claim.lease_expires_at_ms or self._policy.lease_ms) - self._policy.lease_ms
        owed = _edits_owed(claim, claimed_ms)
        values.update(owed)
        update = (
            f"SET #state = :expired, #ended_reason = :reason{', ' + EDITS_OWED if owed else ''} "
            f"REMOVE {'' if owed else '#sweep_shard, '}#inbox_user, #journal_id"
        )
        return self._update(
            claim.chat_id,
            "end claimed request",
            HOLDS_CLAIM,
            update,
            values,
            lost=lambda _: errors.LeaseLost("the claim was already lost"),
            landed=_ended(claim.interrupt_id, RequestState.EXPIRED, reason),
        )

    # -- the sweeper -------------------------------------------------------------------

    def overdue(self, shard: str, now_ms: int, limit: int) -> list[str]:
        """Chat ids of open requests past their expiry in one shard of the sparse index."""
        return chats_due(
            self._client,
            self._table,
            EXPIRY_INDEX,
            EXPIRY_INDEX_SORT,
            shard,
            now_ms // 1000,
            limit,
            "find overdue requests",
        )

    def lapsed(self, shard: str, before_ms: int, limit: int) -> list[str]:
        """Chat ids of claims whose lease ran out before `before_ms`, in one shard of the
        sparse lease index: runs whose worker died or stalled, for the sweeper to continue."""
        return chats_due(
            self._client,
            self._table,
            LEASE_INDEX,
            LEASE_INDEX_SORT,
            shard,
            before_ms,
            limit,
            "find lapsed claims",
        )

    def claim_lapsed(
        self,
        request: RequestRecord,
        worker: str,
        now_ms: int,
        also: Sequence[Entry] = (),
        *,
        journal_steps: int | None = None,
    ) -> RequestRecord:
        """Take over a claim whose worker died, to continue its run with the answer it
        recorded (never another: no answer is brought). One conditional write under the
        same rules as a person's takeover, with `also` (its trail event) in it; the loser
        hears who holds it. `journal_steps` as for `claim`."""
        recorded = (request.decision or "answered", request.response or "null")
        steps = self._counted(request, journal_steps)
        values = self._claim_values(
            request, worker, now_ms, recorded, None, "recovery", steps=steps
        )
        return self._claim_riding(
            request.chat_id,
            "recover lapsed claim",
            CLAIM_LAPSED,
            values,
            also,
            lost=lambda cur: errors.ResumeInProgress("another worker took it over first", cur),
        )

    def _claim_riding(
        self,
        chat_id: str,
        action: str,
        condition: str,
        values: dict[str, Any],
        also: Sequence[Entry],
        *,
        lost: Callable[[RequestRecord | None], errors.InterlockError],
    ) -> RequestRecord:
        """A claim (`CLAIM_SET` under `condition`) with `also` in its transaction; the
        claimed record is read back (a transaction returns none)."""
        ours = _holds_token(values[":lease_token"])
        claim_set = _claim_update(CLAIM_SET, values)
        if not also:
            return self._update(
                chat_id, action, condition, claim_set, values, lost=lost, landed=ours
            )
        pointer = self._pointer_entry(chat_id, condition, claim_set, values)
        try:
            self._transacted(chat_id, [pointer, *writes(list(also))], action, ours)
        except Cancelled as refused:
            old = refused.failed.get(0)
            raise lost(_from_item(old) if old else None) from None
        return self._claimed_back(chat_id, ours)

    def _claimed_back(self, chat_id: str, ours: Landed) -> RequestRecord:
        """The pointer as a claim that landed left it, read back; a read that fails is
        tried again, so a claim that landed is never reported as a failure by its read."""
        for attempt in range(_READ_BACK_ATTEMPTS):
            try:
                claimed = self.get(chat_id, 0)
                break
            except errors.StoreError:
                if attempt == _READ_BACK_ATTEMPTS - 1:
                    raise
        if claimed is None or not ours(claimed):
            raise errors.LeaseLost("the claim was taken over as soon as it was made")
        return claimed

    def open_for(
        self, user_id: str, limit: int, after: InboxCursor | None = None
    ) -> list[InboxEntry]:
        """A user's open requests across chats, newest first, from the sparse index."""
        user = keys.checked_id(user_id, "user id")
        page: dict[str, Any] = {}
        if after is not None:
            # Where the page before ended: the index's key and the table's, as a query's
            # own LastEvaluatedKey names them.
            created_ms, chat_id = after
            page["ExclusiveStartKey"] = {
                **_key(chat_id),
                **to_item({INBOX_INDEX_PARTITION: user, INBOX_INDEX_SORT: created_ms}),
            }
        with translated("read inbox"):
            response = self._client.query(
                TableName=self._table,
                IndexName=INBOX_INDEX,
                KeyConditionExpression="#user = :user",
                ExpressionAttributeNames={"#user": INBOX_INDEX_PARTITION},
                ExpressionAttributeValues=to_item({":user": user}),
                ScanIndexForward=False,
                Limit=limit,
                **page,
            )
        entries = []
        for row in map(from_item, response.get("Items", [])):
            entries.append(
                InboxEntry(
                    chat_id=row["pk"].removeprefix("CHAT#"),
                    interrupt_id=row["interrupt_id"],
                    kind=row["kind"],
                    card=packing.unpacked(row["card"]),
                    created_at=(
                        row["created_at"] if "created_at" in row else _IMPLIED["created_at"](row)
                    ),
                    expires_at=row["expires_at"],
                    state=RequestState(row["state"]),
                    questions=1 + len(_asked_from(row.get("also_asked"))),
                    created_ms=int(row[INBOX_INDEX_SORT]),
                )
            )
        return entries

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
        """Take an overdue request to settle it by policy, under the same claim rules as a
        person's answer (one conditional write, with `also`, its trail event; the loser
        hears who holds it). An answer recorded by an earlier claim wins over the
        timeout `answer`. `journal_steps` as for `claim`."""
        steps = self._counted(request, journal_steps)
        values = self._claim_values(request, worker, now_ms, answer, None, "sweeper", steps=steps)
        return self._claim_riding(
            request.chat_id,
            "claim overdue request",
            CLAIM_OVERDUE,
            values,
            also,
            lost=lambda cur: errors.ResumeInProgress("another worker settled it first", cur),
        )

    def reroute(
        self, request: RequestRecord, role: str, extra_s: int, now_ms: int
    ) -> RequestRecord:
        """Give an overdue request to another role's queue, once, with more time."""
        # Never past what the snapshot's lifecycle allows for this request.
        latest = request.created_at + self._policy.latest_expiry_s()
        expires_at = min(now_ms // 1000 + extra_s, latest)
        values = {
            **_STATES,
            **clock_values(now_ms),
            ":interrupt_id": request.interrupt_id,
            ":seen_count": request.claim_count,
            ":role": role,
            ":expires_at": expires_at,
            ":ttl": expires_at + self._policy.retention_s,
        }
        update = "SET #route_role = :role, #expires_at = :expires_at, #ttl = :ttl"
        return self._update(
            request.chat_id,
            "reroute request",
            REROUTE,
            update,
            values,
            lost=lambda cur: errors.ResumeInProgress("the request changed; not rerouted", cur),
            landed=lambda cur: cur.route_role == role and cur.expires_at == expires_at,
        )

    # -- ending without an answer -------------------------------------------------------

    def expire(
        self,
        request: RequestRecord,
        reason: str,
        now_ms: int,
        also: list[Entry] | None = None,
    ) -> RequestRecord:
        """Expire an answerable request (a failed check, the claim cap, the sweeper).

        `also` (the withdrawal of what a dead claim granted) commits in the same
        transaction, only with the expiry: `EntryRefused` when one of them lost its own
        condition (nothing was written; read them again).
        """
        return self._end(request, RequestState.EXPIRED, reason, now_ms, also=also or [])

    def cancel(
        self,
        request: RequestRecord,
        reason: str,
        now_ms: int,
        also: list[Entry] | None = None,
    ) -> RequestRecord:
        """Cancel an answerable request on its user's word, with `also` (what the cancel
        takes back: a dead claim's grants, the user's slot, the trail's event) in the
        same transaction, so none of it lands without the cancel or is left behind.

        A request whose run already recorded a step (its answer is being acted on) is
        not cancelled: it can only be continued, so an effect never outlives its answer.
        Nor is one past its stated expiry that nobody answered: its timeout policy runs.
        """
        return self._end(
            request, RequestState.CANCELLED, reason, now_ms, acted_ok=False, also=also or []
        )

    def _end(
        self,
        request: RequestRecord,
        state: RequestState,
        reason: str,
        now_ms: int,
        acted_ok: bool = True,
        also: list[Entry] | None = None,
    ) -> RequestRecord:
        condition, update, values = self._end_parts(request, state, reason, now_ms, acted_ok)
        ours = _ended(request.interrupt_id, state, reason)

        def lost(cur: RequestRecord | None) -> errors.InterlockError:
            if not acted_ok and cur is not None and cur.acted_on and cur.response is not None:
                return binding_refusal(cur)  # its answer was acted on: it stands
            return _changed(cur, request.interrupt_id, now_ms)

        if not also:
            return self._update(
                request.chat_id,
                f"{state.value} request",
                condition,
                update,
                values,
                lost=lost,
                landed=ours,
            )
        pointer = self._pointer_entry(request.chat_id, condition, update, values)
        try:
            self._transacted(
                request.chat_id,
                [pointer, *writes(also)],
                f"{state.value} request",
                ours,
            )
        except Cancelled as refused:
            if 0 in refused.failed:
                old = refused.failed[0]
                raise lost(_from_item(old) if old else None) from None
            raise entry_refused(also, refused, 1) from None
        return request.with_changes(state=state, ended_reason=reason)

    def _end_parts(
        self,
        request: RequestRecord,
        state: RequestState,
        reason: str,
        now_ms: int,
        acted_ok: bool = True,
    ) -> tuple[str, str, dict[str, Any]]:
        values = {
            **_STATES,
            **clock_values(now_ms),
            ":interrupt_id": request.interrupt_id,
            ":seen_count": request.claim_count,
            ":reason": reason,
        }
        update = (
            f"SET #state = :{state.value}, #ended_reason = :reason REMOVE #sweep_shard, #inbox_user"
        )
        # Its channel posts' edit, when owed, rides in this write (`EDITS_OWED`).
        if owed := _edits_owed(request, now_ms + EDIT_HOLD_MS):
            values.update(owed)
            update = (
                f"SET #state = :{state.value}, #ended_reason = :reason, {EDITS_OWED} "
                "REMOVE #inbox_user"
            )
        condition = END_OPEN if acted_ok else f"{END_OPEN} AND {NOT_ACTED} AND {NOT_OVERDUE}"
        return condition, update, values

    # -- plumbing ------------------------------------------------------------------------

    def _update(
        self,
        chat_id: str,
        action: str,
        condition: str,
        update: str,
        values: dict[str, Any],
        *,
        lost: Any,
        landed: Landed | None = None,
    ) -> RequestRecord:
        """One conditional update of the pointer; `lost(current)` is the error when its
        condition fails. With `landed`, an unclear answer is resolved (`_sent`), and a
        refusal that shows this very write already applied (a resend after a 5xx that
        had landed, by botocore or by `_sent`) is its success, not a refusal."""

        def send() -> Any:
            with translated(action):
                return self._client.update_item(
                    TableName=self._table,
                    Key=_key(chat_id),
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **expression(condition=condition, update=update, values=values),
                )

        try:
            response = self._sent(chat_id, send, landed)
        except ConditionFailed as failed:
            current = _from_item(failed.old) if failed.old else None
            if landed is not None and current is not None and landed(current):
                return current
            raise lost(current) from None
        except _Landed as found:
            return found.current
        return _from_item(from_item(response["Attributes"]))

    def _sent(self, chat_id: str, send: Callable[[], _T], landed: Landed | None) -> _T:
        """`send()` a write of this chat's pointer, and learn what landed when the answer
        does not say: after a 5xx, a timeout or a dropped connection (botocore's own
        retries spent) it is sent once more. Every pointer write carries a condition
        its own success breaks (a fresh lease token, a state it leaves, a claim count it
        moves), so a second copy never applies twice: it is refused, and the caller
        sees ours in the refusal's old image (`landed`). If the second answer is unclear
        too, a consistent read decides: `_Landed` when it shows the write, else the
        error stands (nothing was applied that the read can see).
        """
        try:
            return send()
        except Conflicted:
            raise  # a transaction in flight refused it: nothing was written
        except errors.StoreError:
            if landed is None:
                raise
        try:
            return send()
        except Conflicted:
            raise
        except errors.StoreError:
            # Read as at time 0, so even an item past its TTL is returned: it may be
            # the one our write left, and `landed` must judge it.
            current = self.get(chat_id, 0)
            if current is not None and landed(current):
                raise _Landed(current) from None
            raise

    def _pointer_entry(
        self, chat_id: str, condition: str, update: str, values: dict[str, Any]
    ) -> dict[str, Any]:
        """The conditional update of this chat's pointer as a transaction's first entry
        (`_transacted` judges the outcome by it)."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": _key(chat_id),
                **expression(condition=condition, update=update, values=values),
            }
        }

    def _transacted(
        self, chat_id: str, items: list[dict[str, Any]], action: str, landed: Landed
    ) -> bool:
        """`transact(items)` whose first entry writes this chat's pointer, resolved as
        `_sent` resolves a single write: True when it was written (now or by an earlier
        copy `landed` recognizes). Refusals are raised as `Cancelled`, with index 0's old
        image when it lost.

        A transaction's client request token would make the resend idempotent too, but
        a resend is renumbered when its events' counter moved (`numbering`), and a token
        reused with other entries is refused: the pointer's condition does the work.
        """
        try:
            self._sent(chat_id, lambda: transact(self._client, items, action), landed)
        except Cancelled as refused:
            old = refused.failed.get(0)
            if 0 in refused.failed and old is not None and landed(_from_item(old)):
                return True
            raise
        except _Landed:
            return True
        return True

    def _sized(self, item: dict[str, Any]) -> dict[str, Any]:
        check_size(self._policy, item_size(item))
        return item

    def answer_fits(self, claim: RequestRecord, text: str, answer: dict[str, Any]) -> bool:
        """Whether the answer can be stored inline in the request's own item (`finish`
        without an S3 object): its text and the rest small enough to be cheaper there
        (`StorePolicy.inline_bytes`), and within the item budget."""
        return answer_fits(self._policy, claim, text, answer)

    def _fits_with(self, claim: RequestRecord, final_text: str) -> bool:
        return text_fits(self._policy, claim, final_text)


def stored_size(request: RequestRecord) -> int:
    """The bytes `request`'s pointer item takes, by DynamoDB's rule."""
    return item_size(_to_item(request))


def check_size(policy: StorePolicy, size: int) -> None:
    """Refuse (`TooLarge`) a pointer item over the policy's budget."""
    if size > policy.max_item_bytes:
        raise errors.TooLarge(f"request record of {size} bytes exceeds {policy.max_item_bytes}")


def answer_fits(
    policy: StorePolicy, claim: RequestRecord, text: str, answer: dict[str, Any]
) -> bool:
    """`RequestStore.answer_fits`, for any store that keeps the same item."""
    rest = json.dumps(answer, separators=(",", ":"), default=str)
    extra = len("final_text") + len(text.encode()) + len("answer")
    return text_fits(policy, claim, rest, extra)


def text_fits(policy: StorePolicy, claim: RequestRecord, final_text: str, extra: int = 0) -> bool:
    """Whether `final_text` (and `extra` bytes) may ride inline in the claim's item."""
    added = len("final_text") + len(final_text.encode()) + extra
    if added > policy.inline_bytes:
        return False
    return stored_size(claim) + added <= policy.max_item_bytes


def _answer_json(answer: dict[str, Any] | None) -> str | None:
    if answer is None:
        return None
    return json.dumps(answer, separators=(",", ":"), sort_keys=True, default=str)


def _claim_update(claim_set: str, values: dict[str, Any]) -> str:
    """`claim_set` with what the claim records of the run's progress (`PROGRESS_SET`)."""
    return claim_set + (PROGRESS_SET if values[":journal_seen"] else PROGRESS_FROM_NONE)


def _key(chat_id: str) -> dict[str, Any]:
    return to_item({"pk": keys.chat_pk(chat_id), "sk": keys.REQUEST_SK})


def _meta_key(chat_id: str) -> dict[str, Any]:
    return to_item({"pk": keys.chat_pk(chat_id), "sk": keys.META_SK})


def _held_digest(request: RequestRecord, secret: str) -> str:
    """The stored digest `secret` matches, for the claim's condition (`HASH_MATCHES`);
    the claim checked it matches one (`_check_claimable`)."""
    field_name = request.secret_field(secret)
    assert field_name is not None
    return str(getattr(request, field_name))


def _changed(
    current: RequestRecord | None, interrupt_id: str, now_ms: int
) -> errors.InterlockError:
    """The error for a write that lost to a change made since the record was read."""
    return unanswerable(current, interrupt_id, now_ms) or errors.ResumeInProgress(
        "the request changed since it was read; retry", current
    )


Landed = Callable[[RequestRecord], bool]
# Reads of a claim that landed, before its failure to read is told as the claim's.
_READ_BACK_ATTEMPTS: Final = 3


def _holds_token(token: str | None) -> Landed:
    """A claim's write landed when the pointer carries the fresh token it wrote."""
    return lambda cur: token is not None and cur.lease_token == token


def _asks(interrupt_id: str) -> Landed:
    """A new request's write landed when the pointer asks its (fresh) interrupt."""
    return lambda cur: cur.interrupt_id == interrupt_id


def _ended(interrupt_id: str, state: RequestState, reason: str) -> Landed:
    """An ending landed when the pointer ended this interrupt this way, for this reason."""
    return lambda cur: (
        cur.interrupt_id == interrupt_id and cur.state is state and cur.ended_reason == reason
    )


_T = TypeVar("_T")


class _Landed(Exception):
    """A write whose answer was unclear is found applied: `current` shows it."""

    def __init__(self, current: RequestRecord) -> None:
        super().__init__("the write had landed")
        self.current = current


class _Acted(Exception):
    """The claim is still held but its answer was acted on: it cannot be reset."""


def _lost() -> errors.LeaseLost:
    return errors.LeaseLost("the claim was already lost")


def clock_values(now_ms: int) -> dict[str, int]:
    """The clock's placeholder values of the conditions for a caller reading `now_ms`:
    its own clock (`:now_s`, `:now_ms`), and the instant every worker's clock has surely
    passed (`:lapse_s`, `:lapse_ms`), which a taker compares another worker's times with.
    """
    lapse_ms = surely_passed(now_ms)
    return {
        ":now_s": now_ms // 1000,
        ":now_ms": now_ms,
        ":lapse_s": lapse_ms // 1000,
        ":lapse_ms": lapse_ms,
    }


def _edits_owed(request: RequestRecord, due_ms: int) -> dict[str, Any]:
    """The values of `EDITS_OWED` for a write that ends `request` as read, due at
    `due_ms`; none when it has no channel posts to edit (`RequestRecord.owes_edits`)."""
    if not request.owes_edits:
        return {}
    return {
        ":edits_due": due_ms,
        ":edits_shard": keys.sweep_shard(request.chat_id, SWEEP_SHARDS),
    }


def _required(value: int | None) -> int:
    if value is None:
        raise errors.LeaseLost("this record holds no claim")
    return value


def _asked_from(stored: bytes | str | None) -> tuple[Asked, ...]:
    if not stored:
        return ()
    return tuple(Asked(e["interrupt_id"], e["card"]) for e in packing.unpacked(stored))


# The pointer item's codec, derived from `RequestRecord`'s fields: each field is stored
# under its own name, as itself, unless named here. Empty values that mean "none yet"
# (no failures, not acted) are left off the item, and cards are compressed, as DynamoDB
# bills every byte.
_ENCODE: Final[dict[str, Callable[[Any], Any]]] = {
    "card": packing.packed,
    "state": lambda state: state.value,
    "owner_roles": list,
    "acted": lambda acted: True if acted else None,
    "posted": lambda posted: True if posted else None,
    "failures": lambda failures: failures or None,
    "stalls": lambda stalls: stalls or None,
    "journal_seen": lambda seen: seen or None,
    "also_asked": lambda asked: packing.packed(_asked_entries(asked)) if asked else None,
    "created_ms": lambda created: created or None,
    "answer": lambda answer: packing.compact(answer) if answer is not None else None,
}
_DECODE: Final[dict[str, Callable[[Any], Any]]] = {
    "card": packing.unpacked,
    "state": RequestState.parse,
    "owner_roles": tuple,
    "acted": bool,
    "posted": bool,
    "also_asked": _asked_from,
    "answer": packing.text,
}
# Fields stored under another attribute name (an index's sort key).
_ATTRIBUTE: Final = {"notify_due_ms": NOTICE_INDEX_SORT}
# Attributes every stored request has, whatever its dataclass defaults say.
_REQUIRED: Final = frozenset({"state"})
_FIELDS: Final = tuple(
    (f.name, _ATTRIBUTE.get(f.name, f.name), f.default is MISSING) for f in fields(RequestRecord)
)


# Fields every pointer has until its finish removes them (`FINISHED`): absent from an
# ended one, they are None (from an open one, the record is malformed).
_DROPPED_AT_FINISH: Final = frozenset(FINISHED)
_ENDED_STATES: Final = frozenset(state.value for state in RequestState) - {
    s.value for s in OPEN_STATES
}

# Fields read from another attribute instead of stored twice: the chat's id is in the
# key, and the second a request was created is in its millisecond (the inbox index's
# sort key). DynamoDB bills a claimed request's item by the kilobyte on every step of
# its run (each step's fence check reads it), so the claimed item stays under one.
_IMPLIED: Final[dict[str, Callable[[dict[str, Any]], Any]]] = {
    "chat_id": lambda item: item["pk"].removeprefix("CHAT#"),
    "created_at": lambda item: int(item["created_ms"]) // 1000,
}


def _to_item(request: RequestRecord) -> dict[str, Any]:
    values: dict[str, Any] = {"pk": keys.chat_pk(request.chat_id), "sk": keys.REQUEST_SK}
    for name, attribute, _ in _FIELDS:
        value = getattr(request, name)
        values[attribute] = _ENCODE[name](value) if name in _ENCODE else value
    values["response"] = _stored_response(request.response, request.interrupt_id)
    for name, implied in _IMPLIED.items():
        with suppress(KeyError, TypeError):  # what would imply it is not stored
            if implied(values) == values[name]:
                del values[name]
    if request.state in OPEN_STATES:
        # Both only while the request is open: the sparse indexes of the sweeper and of
        # the user's inbox hold exactly the open requests.
        values["sweep_shard"] = keys.sweep_shard(request.chat_id, SWEEP_SHARDS)
        values["inbox_user"] = request.user_id
    return to_item(values)


# A recorded answer is JSON by interrupt id (keys sorted, no spaces), and one key is
# almost always the request's own interrupt id, which the item carries already: that key
# is stored as "" behind a mark no JSON text begins with, and put back on reading, byte
# for byte. Anything else is stored exactly as given.
_ELIDED: Final = "="


def _stored_response(response: str | None, interrupt_id: str) -> str | None:
    if response is None or response.startswith(_ELIDED):
        return response
    try:
        by_id = json.loads(response)
    except ValueError:
        return response
    if not isinstance(by_id, dict) or interrupt_id not in by_id or "" in by_id:
        return response
    if _canonical(by_id) != response:
        return response  # not as a claim writes it
    return _ELIDED + _canonical({("" if k == interrupt_id else k): v for k, v in by_id.items()})


def _read_response(stored: str, interrupt_id: str) -> str:
    if not stored.startswith(_ELIDED):
        return stored
    try:
        by_id = json.loads(stored.removeprefix(_ELIDED))
    except ValueError:
        return stored
    if not isinstance(by_id, dict) or "" not in by_id:
        return stored
    return _canonical({(interrupt_id if k == "" else k): v for k, v in by_id.items()})


def _canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _asked_entries(asked: tuple[Asked, ...]) -> list[dict[str, Any]]:
    return [{"interrupt_id": a.interrupt_id, "card": a.card} for a in asked]


def request_from_item(values: dict[str, Any]) -> RequestRecord:
    """A pointer record from its (deserialized) item; malformed is a `StoreError`."""
    return _from_item(values)


def _from_item(values: dict[str, Any]) -> RequestRecord:
    found: dict[str, Any] = {}
    try:
        for name, attribute, required in _FIELDS:
            if attribute in values:
                value = values[attribute]
                found[name] = _DECODE[name](value) if name in _DECODE else value
            elif name in _IMPLIED:
                found[name] = _IMPLIED[name](values)
            elif name in _DROPPED_AT_FINISH and values.get("state") in _ENDED_STATES:
                found[name] = None
            elif required or attribute in _REQUIRED:
                raise KeyError(attribute)
        if found.get("response") is not None:
            found["response"] = _read_response(found["response"], found["interrupt_id"])
        return RequestRecord(**found)
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.StoreError(f"malformed request record: {exc}") from exc
