"""Where a thread stands, for a client that lost its stream (or is new to the thread).

An AG-UI client resyncs by running the thread with no new message. Its owner is told
the thread's turns and, when a request is open, that request's interrupts again, with a
fresh secret: as any read of an open request does, this retires the secrets handed out
before it, so the tab that resynced last answers. Someone a request was rerouted to is
offered that request alone, never the chat's turns; anyone else learns nothing
(`interlock.access`).
"""

from __future__ import annotations

from interlock import access
from interlock.caller import Caller
from interlock.deps import Runtime
from interlock.outcomes import Offer, TurnResult
from interlock.records import RequestState, fresh_secret

RESYNC_TURNS = 200
"""The most turns a resync restores (the newest)."""


def resync(rt: Runtime, caller: Caller, chat_id: str) -> TurnResult:
    """The thread's turns, and its open request offered again (if any).

    Raises:
        Forbidden: the chat is another user's, and so is its open request (if any).
    """
    now = rt.clock.now_ms()
    request, meta = rt.stores.requests.get_with_chat(chat_id, now)
    access.require_answerer(caller, meta.owner, request)
    owner = access.owns(caller, meta.owner) and (
        request is None or request.user_id == caller.user_id
    )
    turns = rt.stores.chats.latest_turns(chat_id, RESYNC_TURNS) if owner else []
    if request is None or request.status(now) is not RequestState.PENDING:
        return TurnResult(chat_id, "resynced", turns=turns)
    secret, secret_hash = fresh_secret()
    request = rt.stores.requests.rotate_secret(request, "stream", secret_hash, now)
    return TurnResult(chat_id, "resynced", offer=Offer(request, secret), turns=turns)


def standing(rt: Runtime, caller: Caller, chat_id: str, secret: str | None) -> TurnResult | None:
    """Where the thread stands for an AG-UI client whose answer was just refused, so
    that its run can finish there; None when the client could not act on it (the
    request is open and the client sent no secret).

    An ended request leaves nothing open. An open one is offered again with the secret
    the client sent while that still opens it (nothing is written), else (its copy is
    an older one of the stream's) with a fresh secret for the stream, as `resync` hands
    one out: the same read, by the same verified person.

    Raises:
        Forbidden: the chat is another user's, and so is its open request (if any).
    """
    now = rt.clock.now_ms()
    request, meta = rt.stores.requests.get_with_chat(chat_id, now)
    access.require_answerer(caller, meta.owner, request)
    if request is None or request.status(now) is not RequestState.PENDING:
        return TurnResult(chat_id, "resynced")
    if not secret:
        return None
    if request.secret_field(secret) is not None:
        return TurnResult(chat_id, "resynced", offer=Offer(request, secret))
    fresh, fresh_hash = fresh_secret()
    request = rt.stores.requests.rotate_secret(request, "stream", fresh_hash, now)
    return TurnResult(chat_id, "resynced", offer=Offer(request, fresh))
