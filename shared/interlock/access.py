"""Who may read or act on a chat: one rule, applied by every route and every function.

A chat belongs to the user who started it. Its owner may read everything in it (turns,
events, approvals, its open request) and act on it (a new turn, an answer, a cancel, a
revoke). One other caller has a standing, and only towards the open request: whoever
holds the role a request was rerouted to may read that request, answer it and follow the
run the answer continues, never the turns before it. Nobody else learns anything of the
chat's contents: every refusal is the same `Forbidden`. Administrators manage the
pre-approved list and account links; they gain nothing in another user's chat.

Each route of `interlock.api.routes.ROUTES` names the rule it follows (`Rule`), so a
route cannot be added without saying who may call it, and the route-by-caller tests
hold every route to its rule.
"""

from __future__ import annotations

from typing import Literal

from interlock import errors
from interlock.caller import Caller
from interlock.records import RequestRecord

Rule = Literal["owner", "answerer", "own", "admin", "signed"]
"""The rule a route follows.

- `owner`: the chat's owner (a chat nobody owns yet is empty, so anyone may start it).
- `answerer`: the chat's owner, or whoever its open request was rerouted to (the
  request only; the chat's turns stay the owner's).
- `own`: only what belongs to the caller (their own inbox).
- `admin`: an administrator.
- `signed`: a platform's webhook, proven by its signature instead of a token; the
  person behind it is the account an administrator linked, held to `answerer`.
"""

ADMIN_ROLE = "admin"
_ELSEWHERE = "this chat belongs to another user"


def owns(caller: Caller, owner: str | None) -> bool:
    """Whether `caller` owns a chat whose recorded owner is `owner` (None: nobody yet)."""
    return owner is None or owner == caller.user_id


def require_owner(caller: Caller, owner: str | None) -> None:
    """Refuse anyone but the chat's owner.

    Raises:
        Forbidden: the chat is another user's.
    """
    if not owns(caller, owner):
        raise errors.Forbidden(_ELSEWHERE)


def may_answer(caller: Caller, request: RequestRecord) -> bool:
    """Whether `caller` may read and answer `request`: the user asked, or a holder of
    the role it was rerouted to."""
    return request.answerable_by(caller.user_id, caller.roles)


def require_answerer(caller: Caller, owner: str | None, request: RequestRecord | None) -> None:
    """Refuse anyone who may neither see the chat nor answer its open request.

    Raises:
        Forbidden: the chat and its request are another user's.
    """
    if request is not None:
        if not may_answer(caller, request):
            raise errors.Forbidden(_ELSEWHERE)
        return
    require_owner(caller, owner)


def require_admin(caller: Caller) -> None:
    """Refuse anyone who is not an administrator (the role comes from the verified
    token's groups, never from a body).

    Raises:
        Forbidden: not an administrator.
    """
    if ADMIN_ROLE not in caller.roles:
        raise errors.Forbidden("only an administrator may do this")
