"""Where a thread stands, for a client that lost its stream (or is new to the thread).

An AG-UI client resyncs by running the thread with no new message. It is told the
thread's turns and, when a request is open and it may answer it, that request's
interrupts again, with a fresh secret: as any read of an open request does, this
retires the secrets handed out before it, so the tab that resynced last answers.
"""

from __future__ import annotations

from interlock import errors
from interlock.caller import Caller
from interlock.deps import Runtime
from interlock.outcomes import Offer, TurnResult
from interlock.records import RequestState, fresh_secret

RESYNC_TURNS = 200
"""The most turns a resync restores (the newest)."""


def resync(rt: Runtime, caller: Caller, chat_id: str) -> TurnResult:
    """The thread's turns, and its open request offered again (if any).

    Raises:
        Forbidden: the open request is another user's to answer.
    """
    now = rt.clock.now_ms()
    request = rt.stores.requests.get(chat_id, now)
    if request is not None and not request.answerable_by(caller.user_id, caller.roles):
        raise errors.Forbidden("this request belongs to another user")
    turns = rt.stores.chats.latest_turns(chat_id, RESYNC_TURNS)
    if request is None or request.status(now) is not RequestState.PENDING:
        return TurnResult(chat_id, "resynced", turns=turns)
    secret, secret_hash = fresh_secret()
    request = rt.stores.requests.rotate_secret(request, secret_hash, now)
    return TurnResult(chat_id, "resynced", offer=Offer(request, secret), turns=turns)
