"""Bearer secrets and lease tokens. Only digests of secrets are ever stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
from typing import Final

# Letters and digits: a token is a valid id (`keys.checked_id`) wherever it goes.
_TOKEN_ALPHABET: Final = string.ascii_letters + string.digits
_TOKEN_LENGTH: Final = 22  # 131 random bits


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
    """An opaque token naming one claim (a lease) or one worker: 22 letters and digits,
    as random as 32 hex digits in two thirds of the bytes. A claimed request's item
    carries three (its worker, its lease, its journal), and DynamoDB bills that item by
    the kilobyte on every step of the run."""
    return "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(_TOKEN_LENGTH))
