"""Bearer secrets and lease tokens. Only digests of secrets are ever stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets


def new_secret() -> str:
    """A fresh resume secret: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """The SHA-256 hex digest that is stored in place of the secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(stored_hash: str, secret: str | None) -> bool:
    """Compare a presented secret with a stored digest in constant time."""
    if not secret:
        return False
    return hmac.compare_digest(stored_hash, hash_secret(secret))


def new_token() -> str:
    """An opaque token naming one claim (a lease) or one worker."""
    return secrets.token_hex(16)
