"""Who answers, established by the function that records the answer.

The resume function reads the person from their own token, verified here against the
user pool's keys, and never from the request context it is handed: a direct invoke can
carry any context it likes, and the run function (where the agent's code runs) may
invoke it. So a forged "alice approved" is refused unless it carries alice's token.
Groups come from the token's own list, never from a stringified claim.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Protocol

from interlock import errors
from interlock.caller import Caller
from interlock.errors import Unauthorized

GROUP_NAME: Final = re.compile(r"[A-Za-z0-9_.@:-]{1,128}")
"""A group name Interlock reads as a role: no comma, space or bracket in it, so each
form a group list arrives in reads one way. Create no group in the pool whose name
breaks it: a user in one is refused rather than guessed at."""


class Tokens(Protocol):
    """Verifies a person's token: the user pool's (deployed) or local mode's."""

    def claims(self, token: str) -> Mapping[str, Any]:
        """The token's claims once its signature, issuer, audience and expiry hold.

        Raises:
            Unauthorized: the token is malformed, forged, expired or not for us.
        """
        ...


def bearer(authorization: str | None) -> str:
    """The token of an `Authorization` header, with or without the `Bearer` scheme
    (API Gateway's Cognito authorizer takes it bare).

    Raises:
        Unauthorized: no token.
    """
    token = (authorization or "").strip()
    if token[:7].lower() == "bearer ":
        token = token[7:].strip()
    if not token:
        raise Unauthorized("no authenticated user on this request")
    return token


def verified_caller(
    tokens: Tokens | None, authorization: str | None, trace_id: str | None = None
) -> Caller:
    """The person whose token `authorization` carries, verified by `tokens`.

    Raises:
        Unauthorized: no token, a token that does not verify, or no way to verify one
            (fails closed: a deployment that cannot check a token believes none).
        Forbidden: the token's groups are not a list of readable names.
    """
    token = bearer(authorization)
    if tokens is None:
        raise Unauthorized("this function cannot verify tokens")
    claims = tokens.claims(token)
    user = claims.get("sub")
    if not isinstance(user, str) or not user:
        raise Unauthorized("the token names no user")
    return Caller(user_id=user, roles=group_list(claims.get("cognito:groups")), trace_id=trace_id)


def group_list(raw: Any) -> frozenset[str]:
    """The groups of a verified token: absent, or a list of readable names.

    Raises:
        Forbidden: anything else (a string, a map, a name with a separator in it).
    """
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(
        isinstance(name, str) and GROUP_NAME.fullmatch(name) for name in raw
    ):
        raise errors.Forbidden(
            "this account's groups cannot be read unambiguously: group names may hold "
            "letters, digits and . _ @ : - only"
        )
    return frozenset(raw)
