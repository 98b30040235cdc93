"""Turn admission and the transcript's fenced writes.

One turn runs per chat. Admission is one transaction: the chat has no open request,
the chat's owner is this user (or it has none yet, and becomes this user), no other
turn holds the running-turn lease, and the transcript is where the reader saw it;
then the user's turn is saved and the lease taken. Whatever a turn writes afterwards
is fenced by that lease's token, and ending the turn releases it in the same
transaction as its last write.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any, Final

from interlock import errors, keys
from interlock.adapters.chats import record_item, turn_body
from interlock.adapters.dynamo import (
    Cancelled,
    Conflicted,
    DynamoDBClient,
    entry_refused,
    expression,
    to_item,
    transact,
    writes,
)
from interlock.adapters.fencing import HOLDS_TURN
from interlock.adapters.requests import NO_OPEN_REQUEST, clock_values, request_from_item
from interlock.ports import Entry, Role
from interlock.records import ChatMeta, RequestState, TurnFence
from interlock.timing import surely_passed
from interlock.tokens import new_token

OWNED_BY_CALLER: Final = "(attribute_not_exists(#owner) OR #owner = :user)"
# A turn's lease is over by every clock (`timing.surely_passed`), its holder's too: taking
# the chat from a turn still running would fence out its pause or its answer.
NOT_RUNNING: Final = "(attribute_not_exists(#run_until_ms) OR #run_until_ms <= :lapse_ms)"
TRANSCRIPT_AT: Final = "(attribute_not_exists(#last_turn) OR #last_turn = :seen)"
ADMIT: Final = f"{OWNED_BY_CALLER} AND {NOT_RUNNING} AND {TRANSCRIPT_AT}"
ADMIT_SET: Final = (
    "SET #owner = if_not_exists(#owner, :user), #last_turn = :seq, "
    "#run_token = :run_token, #run_until_ms = :run_until_ms"
)
_STATES: Final = {f":{state.value}": state.value for state in RequestState}
_ABANDON_ATTEMPTS: Final = 4


class TurnStore:
    """Admit, complete and abandon turns; build the transcript's transaction entries.

    Args:
        client: A boto3 DynamoDB client.
        table_name: The Interlock table.
        retention_s: How long saved turns are kept (their `ttl`).
    """

    def __init__(self, client: DynamoDBClient, table_name: str, retention_s: int) -> None:
        self._client = client
        self._table = table_name
        self._retention_s = retention_s

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
        """Start a turn in the chat as `seen`; returns its fence and the user turn's number.

        `also` are writes that commit with the admission (its audit event, the run's
        slot and budget); one that loses its own condition is `EntryRefused`, after
        the admission's own refusals.

        `request_settled`: the read that gave `seen` found the chat's pointer absent or
        ended as of the same instant (`RequestPort.read_for_turn`), and `seen` holds no
        running-turn token. Then the pointer is not checked again (a 2 WRU entry): a
        request opens only through a pause fenced by a turn's token or a chain fenced by
        a claim (an ended request holds none), and a turn admitted after the read moved
        `last_turn`, which this write pins to `seen`. (So every pause of a turn must carry
        its fence: `persist_pause` without one is for tests and benchmarks only.)

        When `seen` holds a lapsed turn's token, the write takes the chat only from that
        turn (its token is pinned), so a turn whose late end landed in between is never
        reported as lapsed (`admission.admitted`).

        Raises:
            ChatBusy: the chat has an open request.
            Forbidden: the chat belongs to another user.
            TurnRunning: another turn is running, or the chat changed since `seen`.
        """
        chat_id = seen.chat_id
        fence = TurnFence(chat_id, new_token())
        seq = seen.last_turn + 1
        check_request = {
            "TableName": self._table,
            "Key": to_item({"pk": keys.chat_pk(chat_id), "sk": keys.REQUEST_SK}),
            **expression(
                condition=NO_OPEN_REQUEST,
                values={**_STATES, **clock_values(now_ms)},
            ),
        }
        values = {
            ":user": keys.checked_id(user_id, "user id"),
            ":lapse_ms": surely_passed(now_ms),
            ":seen": seen.last_turn,
            ":seq": seq,
            ":run_token": fence.run_token,
            ":run_until_ms": now_ms + lease_ms,
        }
        condition = ADMIT
        if seen.run_token is not None:
            condition, values[":lapsed"] = f"{ADMIT} AND #run_token = :lapsed", seen.run_token
        take = {
            "TableName": self._table,
            "Key": _meta_key(chat_id),
            **expression(condition=condition, update=ADMIT_SET, values=values),
        }
        # The caller's read settles the pointer only while no turn could still pause.
        skipped = 1 if request_settled and seen.run_token is None else 0
        own = [
            {"ConditionCheck": check_request},
            {"Update": take},
            self._turn_put(chat_id, seq, turn, now_ms),
        ][skipped:]
        try:
            transact(
                self._client,
                [*own, *writes(also)],
                "admit turn",
                # The open request (unless left out) and the chat: see `_refusal`.
                read_back=(0, 1)[: 2 - skipped],
            )
        except Cancelled as cancelled:
            if min(cancelled.failed) < len(own):
                failed = {i + skipped: old for i, old in cancelled.failed.items()}
                raise _refusal(Cancelled(failed), user_id, now_ms) from None
            raise entry_refused(also or [], cancelled, len(own)) from None
        return fence, seq

    def complete(
        self,
        fence: TurnFence,
        seq: int,
        turn: dict[str, Any],
        now_ms: int,
        also: list[Entry] | None = None,
    ) -> int:
        """Save the turn's answer after turn `seq` and release the running-turn lease,
        in one transaction fenced by the lease; returns the answer's turn number.
        `also` are unconditional writes that commit with it (its audit event)."""
        update = {
            "TableName": self._table,
            "Key": _meta_key(fence.chat_id),
            **expression(
                condition=f"{HOLDS_TURN} AND #last_turn = :seq",
                update="SET #last_turn = :next REMOVE #run_token, #run_until_ms",
                values={":run_token": fence.run_token, ":seq": seq, ":next": seq + 1},
            ),
        }
        try:
            transact(
                self._client,
                [
                    {"Update": update},
                    self._turn_put(fence.chat_id, seq + 1, turn, now_ms),
                    *writes(also),
                ],
                "complete turn",
            )
        except Cancelled:
            raise errors.LeaseLost("the turn's lease was lost; its answer was not saved") from None
        return seq + 1

    def end_run(self, fence: TurnFence) -> Entry:
        """The transaction entry that releases the running-turn lease (with a pause)."""
        release = {
            "TableName": self._table,
            "Key": _meta_key(fence.chat_id),
            **expression(
                condition=HOLDS_TURN,
                update="REMOVE #run_token, #run_until_ms",
                values={":run_token": fence.run_token},
            ),
        }
        return Entry(Role.TURN, {"Update": release})

    def abandon(self, fence: TurnFence, also: Sequence[Entry] = ()) -> None:
        """Release the running-turn lease of a turn that failed (idempotent), with `also`
        (its `turn_failed` event) in the same write.

        It runs while the turn's own error is on its way out, so it never raises over
        it: a release that keeps meeting other writes to the chat's meta item (any of the
        chat's events moves the counter there) leaves the lease to lapse instead.
        """
        events = list(also)
        for attempt in range(_ABANDON_ATTEMPTS):
            try:
                transact(self._client, writes([self.end_run(fence), *events]), "abandon turn")
                return
            except Cancelled:
                return  # already released, or taken over after it lapsed
            except Conflicted:
                time.sleep(random.uniform(0, 0.02 * 2**attempt))
            except errors.StoreError:
                if not events:
                    return  # the store is failing too: the lease lapses instead
                events = []  # the event could not be numbered: the release goes alone

    def answer_entries(
        self, chat_id: str, seq: int, turn: dict[str, Any], now_ms: int
    ) -> list[Entry]:
        """Transaction entries saving a resumed run's answer right after turn `seq`,
        only while the transcript still ends there (they ride on the claim's fence)."""
        advance = {
            "TableName": self._table,
            "Key": _meta_key(chat_id),
            **expression(
                condition="attribute_not_exists(#last_turn) OR #last_turn = :seq",
                update="SET #last_turn = :next",
                values={":seq": seq, ":next": seq + 1},
            ),
        }
        saved = [{"Update": advance}, self._turn_put(chat_id, seq + 1, turn, now_ms)]
        return [Entry(Role.TRANSCRIPT, write) for write in saved]

    def _turn_put(
        self, chat_id: str, seq: int, turn: dict[str, Any], now_ms: int
    ) -> dict[str, Any]:
        item = record_item(
            chat_id, keys.turn_sk(seq), turn_body(seq, turn, now_ms), now_ms, self._retention_s
        )
        return {
            "Put": {
                "TableName": self._table,
                "Item": item,
                **expression(condition="attribute_not_exists(#pk)", values={}),
            }
        }


def _refusal(refused: Cancelled, user_id: str, now_ms: int) -> errors.InterlockError:
    """The domain error for a refused admission, read off the items that lost."""
    if 0 in refused.failed:
        old = refused.failed[0]
        current = request_from_item(old) if old else None
        return errors.ChatBusy("answer or cancel the open request first", current)
    meta = refused.failed.get(1) or {}
    if meta.get("owner") not in (None, user_id):
        return errors.Forbidden("this chat belongs to another user")
    if meta.get("run_until_ms", 0) > surely_passed(now_ms):
        return errors.TurnRunning("a turn is already running in this chat; wait for its answer")
    return errors.TurnRunning(
        "the chat changed meanwhile (another turn started or ended); send it again"
    )


def _meta_key(chat_id: str) -> dict[str, Any]:
    return to_item({"pk": keys.chat_pk(chat_id), "sk": keys.META_SK})
