"""Bearer secrets, lease tokens and digests. Only digests of secrets are ever stored."""

from __future__ import annotations

import base64
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
    """The digest (`digest_of`) that is stored in place of the secret."""
    return digest_of(secret.encode())


def secret_matches(stored_hash: str, secret: str | None) -> bool:
    """Compare a presented secret with a stored digest in constant time."""
    if not secret:
        return False
    return digest_matches(stored_hash, secret.encode())


def digest_of(body: bytes) -> str:
    """SHA-256 of `body` in URL-safe base64 without padding: 43 characters where hex
    takes 64. A request's item carries two (its secret's and its snapshot's), and
    DynamoDB bills that item by the kilobyte on every step of a resumed run."""
    return _b64(hashlib.sha256(body).digest())


def digest_matches(stored: str, body: bytes) -> bool:
    """Whether `stored` is `body`'s digest, in constant time: as `digest_of` writes it,
    or as 64 hex digits, as digests were written before."""
    raw = hashlib.sha256(body)
    expected = raw.hexdigest() if len(stored) == 64 else _b64(raw.digest())
    return hmac.compare_digest(stored, expected)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def new_token() -> str:
    """An opaque token naming one claim (a lease) or one worker: 22 letters and digits,
    as random as 32 hex digits in two thirds of the bytes. A claimed request's item
    carries three (its worker, its lease, its journal), and DynamoDB bills that item by
    the kilobyte on every step of the run."""
    return "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(_TOKEN_LENGTH))
