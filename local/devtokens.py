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


class TokenError(Exception):
    """The token is malformed, forged or expired."""


def issue(
    key: bytes, user: str, groups: list[str] | tuple[str, ...] = (), ttl_s: int = 12 * 3600
) -> str:
    """A token for `user` with `groups`, valid for `ttl_s` seconds."""
    payload = {"sub": user, "groups": sorted(groups), "exp": int(time.time()) + ttl_s}
    body = _b64(json.dumps(payload, separators=(",", ":")).encode())
    return f"{body}.{_sign(key, body)}"


def claims(key: bytes, token: str) -> dict[str, Any]:
    """The authorizer claims of a valid token, shaped like a Cognito authorizer's."""
    body, _, signature = token.partition(".")
    # Compared as bytes: a signature with characters outside ASCII is simply wrong.
    if not body or not hmac.compare_digest(signature.encode(), _sign(key, body).encode()):
        raise TokenError("invalid token")
    try:
        payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except ValueError as exc:
        raise TokenError("invalid token") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("sub"), str):
        raise TokenError("invalid token")
    if not isinstance(payload.get("exp"), int) or payload["exp"] < time.time():
        raise TokenError("expired token")
    return {"sub": payload["sub"], "cognito:groups": rest_groups(payload.get("groups") or [])}


def rest_groups(groups: list[str]) -> str:
    """Groups as API Gateway REST passes `cognito:groups` in a Cognito authorizer's
    claims: one name bare, two and more bracketed and separated by spaces."""
    names = [str(g) for g in groups]
    return names[0] if len(names) == 1 else (f"[{' '.join(names)}]" if names else "")


def _sign(key: bytes, body: str) -> str:
    return _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
