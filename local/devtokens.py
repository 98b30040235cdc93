"""Signed development tokens: local mode's stand-in for the Cognito authorizer.

A token is `<payload>.<signature>`: base64url JSON `{"sub", "groups", "exp"}` signed
with HMAC-SHA256 under a key the local server holds. The server verifies it and fills
`requestContext.authorizer.claims` exactly as API Gateway would, so handlers cannot
tell the difference and never read identity from anything else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from interlock.api.identity import GROUP_NAME
from interlock.errors import Unauthorized


class TokenError(Exception):
    """The token is malformed, forged or expired."""


def issue(
    key: bytes, user: str, groups: list[str] | tuple[str, ...] = (), ttl_s: int = 12 * 3600
) -> str:
    """A token for `user` with `groups`, valid for `ttl_s` seconds."""
    payload = {"sub": user, "groups": sorted(groups), "exp": int(time.time()) + ttl_s}
    body = _b64(json.dumps(payload, separators=(",", ":")).encode())
    return f"{body}.{_sign(key, body)}"


def payload(key: bytes, token: str) -> dict[str, Any]:
    """The verified payload of a token: `sub`, `groups` (a list of readable group names,
    exactly) and `exp`.

    Raises:
        TokenError: the token is malformed, forged, expired, or its groups are anything
            but a list of names (a name with a space or comma in it included).
    """
    body, _, signature = token.partition(".")
    # Compared as bytes: a signature with characters outside ASCII is simply wrong.
    if not body or not hmac.compare_digest(signature.encode(), _sign(key, body).encode()):
        raise TokenError("invalid token")
    try:
        found = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except ValueError as exc:
        raise TokenError("invalid token") from exc
    if not isinstance(found, dict) or not isinstance(found.get("sub"), str):
        raise TokenError("invalid token")
    if not isinstance(found.get("exp"), int) or found["exp"] < time.time():
        raise TokenError("expired token")
    groups = found.get("groups", [])
    if not isinstance(groups, list) or not all(
        isinstance(g, str) and GROUP_NAME.fullmatch(g) for g in groups
    ):
        raise TokenError("invalid groups")
    return found


def claims(key: bytes, token: str) -> dict[str, Any]:
    """The authorizer claims of a valid token, shaped like a Cognito authorizer's."""
    found = payload(key, token)
    return {"sub": found["sub"], "cognito:groups": rest_groups(found.get("groups", []))}


class DevTokens:
    """Local mode's token check for the functions that verify the person themselves
    (`interlock.api.identity.Tokens`): the claims a user pool's ID token would carry,
    groups as the token's own list."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def claims(self, token: str) -> dict[str, Any]:
        try:
            found = payload(self._key, token)
        except TokenError as exc:
            raise Unauthorized(str(exc)) from None
        return {"sub": found["sub"], "cognito:groups": list(found.get("groups", []))}


def rest_groups(groups: list[str]) -> str:
    """Groups as API Gateway REST passes `cognito:groups` in a Cognito authorizer's
    claims: the names joined by commas (one name bare)."""
    return ",".join(str(g) for g in groups)


def _sign(key: bytes, body: str) -> str:
    return _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
