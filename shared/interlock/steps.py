"""Where a resumed run's journal steps are kept: one item per step, fenced by the claim.

A step is a model response or a tool result as JSON text (`harness.journal`). Each is
written on its own, so recording step 20 costs what step 2 did, and a step larger than
`StorePolicy.inline_bytes` (a big tool result) is stored as an object first, its item
then pointing at it by key and digest: the same order as a snapshot and its pointer, so
an item never names an object that was not confirmed. Past that size one PUT costs less
than the step's bytes in its fenced transaction, and no step is too large for an item.

A claim that began the journal (its token names the journal, `records.journal_of`) has
nothing to read; only a takeover queries the steps its predecessors recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

from interlock.ports import Stores
from interlock.records import RequestRecord, RequestState, began_journal

OBJECT: Final = "object"


def recorder(stores: Stores, claim: RequestRecord) -> Callable[[int, str, bool], None]:
    """The journal's `record` for `claim`: writes step `seq` while the claim holds."""
    journal_id = claim.journal_id
    if journal_id is None:
        raise ValueError("only a claim that recorded its answer keeps a journal")
    version = claim.fence.lease_token  # each writer's objects are its own
    inline = stores.policy.inline_bytes

    def record(seq: int, entry: str, acting: bool) -> None:
        if len(entry.encode()) > inline:
            key, digest = stores.blobs.put_step(claim.chat_id, journal_id, seq, entry, version)
            entry = json.dumps({"k": OBJECT, "key": key, "digest": digest})
        stores.requests.record_step(claim, seq, entry, acting=acting)

    return record


def recorded(stores: Stores, claim: RequestRecord) -> list[str]:
    """The steps recorded for the claim's answer, oldest first, objects read back."""
    if claim.journal_id is None or began_journal(claim):
        return []  # this claim began the journal: nothing is recorded yet
    return [_resolved(stores, entry) for entry in stores.requests.steps(claim)]


def count(stores: Stores, request: RequestRecord) -> int:
    """How many steps the journal of `request` holds, as one about to take it over
    counts them before the claim (one query, objects not read): the retry cap counts
    only claims that added none (`records.given_up`). 0 for a request with no journal
    (a pending one), read for nothing."""
    if request.state is not RequestState.CLAIMED or request.journal_id is None:
        return 0
    return len(stores.requests.steps(request))


def _resolved(stores: Stores, entry: str) -> str:
    pointer = json.loads(entry)
    if pointer.get("k") != OBJECT:
        return entry
    return stores.blobs.get_step(pointer["key"], pointer["digest"])
