"""The pause protocol's durable half: snapshot first, pointer second.

If the snapshot cannot be stored, no pointer is written and no card may be shown: the
worst case is a missing offer, never a card that points at nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interlock.adapters.factory import Stores
from interlock.records import Kind, PendingRequest


@dataclass(frozen=True, slots=True)
class OpenedRequest:
    """A request that is durably stored and may now be shown, with its secret."""

    request: PendingRequest
    secret: str
    snapshot_bytes: int


def persist_pause(
    stores: Stores,
    *,
    chat_id: str,
    user_id: str,
    interrupt_id: str,
    kind: Kind,
    card: dict[str, Any],
    snapshot: dict[str, Any],
    turn_seq: int,
    now_ms: int,
    ttl_s: int | None = None,
    ask_slot: int | None = None,
    owner_roles: tuple[str, ...] = (),
) -> OpenedRequest:
    """Store the paused agent, then open the chat's request pointing at it.

    Raises:
        SnapshotTooLarge: the snapshot is over the limit; nothing was written.
        StoreError: the snapshot PUT failed; no pointer was written.
        ChatBusy: the chat already has an open request.
    """
    request, secret = stores.requests.new_request(
        chat_id=chat_id,
        interrupt_id=interrupt_id,
        kind=kind,
        card=card,
        user_id=user_id,
        turn_seq=turn_seq,
        now_ms=now_ms,
        ttl_s=ttl_s,
        ask_slot=ask_slot,
        owner_roles=owner_roles,
    )
    size = stores.blobs.put_snapshot(chat_id, interrupt_id, snapshot)
    stores.requests.open(request, now_ms)
    return OpenedRequest(request, secret, size)
