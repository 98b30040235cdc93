"""The fencing rule, in one place: a write of a resumed run (or of a running turn)
lands only while the writer still holds what it was admitted with.

- A `ClaimFence` is the claim on the chat's pointer: state claimed, this lease token,
  this claim count. A takeover mints a new token and count, so the old worker's writes
  fail their condition even if its clock still believes in its lease.
- A `TurnFence` is the running-turn token on the chat's meta item, set by admission.

Writes to the fenced item itself carry the condition directly (`claim_condition`);
writes to any other item go in one transaction with a `ConditionCheck` on the fence
(`fenced`), so the effect's record and the proof of ownership commit together or not
at all (a turn's check on the meta item becomes an `Update` when the transaction carries
events: it also moves the chat's event counter, `adapters/numbering.py`). A lost fence
is always `LeaseLost`, and nothing of that transaction is written.
"""

from __future__ import annotations

from typing import Any, Final

from interlock import errors, keys
from interlock.adapters.dynamo import (
    Cancelled,
    DynamoDBClient,
    again_on_conflict,
    expression,
    to_item,
    transact,
)
from interlock.records import ClaimFence, Fence, RequestState

HOLDS_CLAIM: Final = (
    "#state = :claimed AND #lease_token = :lease_token AND #claim_count = :claim_count"
)
HOLDS_TURN: Final = "#run_token = :run_token"


def claim_values(fence: ClaimFence) -> dict[str, Any]:
    """The placeholder values of `HOLDS_CLAIM` for `fence`."""
    return {
        ":claimed": RequestState.CLAIMED.value,
        ":lease_token": fence.lease_token,
        ":claim_count": fence.claim_count,
    }


def fence_check(table: str, fence: Fence) -> dict[str, Any]:
    """A `ConditionCheck` entry that holds only while `fence` is held."""
    if isinstance(fence, ClaimFence):
        key = {"pk": keys.chat_pk(fence.chat_id), "sk": keys.REQUEST_SK}
        condition, values = HOLDS_CLAIM, claim_values(fence)
    else:
        key = {"pk": keys.chat_pk(fence.chat_id), "sk": keys.META_SK}
        condition, values = HOLDS_TURN, {":run_token": fence.run_token}
    args = expression(condition=condition, values=values)
    return {"ConditionCheck": {"TableName": table, "Key": to_item(key), **args}}


def mark_acted(table: str, fence: ClaimFence) -> dict[str, Any]:
    """An `Update` entry that checks the claim like `fence_check` and marks the request
    as having acted, so a failure after an effect can never hand the request back for
    a different answer (see `RequestStore.release`)."""
    key = {"pk": keys.chat_pk(fence.chat_id), "sk": keys.REQUEST_SK}
    args = expression(
        condition=HOLDS_CLAIM,
        update="SET #acted = :acted",
        values={**claim_values(fence), ":acted": True},
    )
    return {"Update": {"TableName": table, "Key": to_item(key), **args}}


def fenced(
    client: DynamoDBClient,
    table: str,
    fence: Fence,
    items: list[dict[str, Any]],
    action: str,
    *,
    effect: bool = False,
) -> None:
    """Write `items` in one transaction with the fence check first.

    With `effect` (the record of an outside side effect), a claim's check also marks the
    request as having acted.

    Raises:
        LeaseLost: the fence is no longer held; nothing was written.
        Cancelled: another item's own condition failed (indexes are those of `items`).
    """
    check = (
        mark_acted(table, fence)
        if effect and isinstance(fence, ClaimFence)
        else fence_check(table, fence)
    )
    try:
        _sent(client, [check, *items], action)
    except Cancelled as cancelled:
        if 0 in cancelled.failed:
            raise errors.LeaseLost(
                f"{action}: the claim or turn was lost; nothing written"
            ) from None
        raise Cancelled({i - 1: old for i, old in cancelled.failed.items()}) from None


def _sent(client: DynamoDBClient, entries: list[dict[str, Any]], action: str) -> None:
    # Two fenced writes of one run (parallel tools of a batch) both check the claim's
    # item: DynamoDB cancels one as a conflict, which is no refusal: send it again. A
    # lost fence is `LeaseLost` whatever the item holds: its old value is not asked for
    # (nor sent back), as no other entry's is.
    again_on_conflict(lambda: transact(client, entries, action, read_back=()))
