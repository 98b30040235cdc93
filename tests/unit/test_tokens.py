"""Tokens and digests: short enough for an item billed by the kilobyte, valid ids
wherever they go, and digests written before still checked."""

from __future__ import annotations

import hashlib
import re

from interlock import keys
from interlock.tokens import (
    digest_matches,
    digest_of,
    hash_secret,
    new_secret,
    new_token,
    secret_matches,
)


def test_a_token_is_22_letters_and_digits_a_valid_id_and_fresh_each_time() -> None:
    tokens = {new_token() for _ in range(1000)}
    assert len(tokens) == 1000
    for token in tokens:
        assert re.fullmatch(r"[A-Za-z0-9]{22}", token)
        assert keys.checked_id(token) == token


def test_a_digest_is_43_url_safe_characters_and_checks_only_its_body() -> None:
    digest = digest_of(b"snapshot")
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", digest)
    assert digest_matches(digest, b"snapshot")
    assert not digest_matches(digest, b"snapshot!")


def test_a_digest_written_as_hex_before_is_still_checked() -> None:
    hexed = hashlib.sha256(b"snapshot").hexdigest()
    assert digest_matches(hexed, b"snapshot")
    assert not digest_matches(hexed, b"other")


def test_a_secret_matches_its_stored_hash_in_either_form_and_nothing_else() -> None:
    secret = new_secret()
    assert secret_matches(hash_secret(secret), secret)
    assert secret_matches(hashlib.sha256(secret.encode()).hexdigest(), secret)
    assert not secret_matches(hash_secret(secret), new_secret())
    assert not secret_matches(hash_secret(secret), None)
    assert not secret_matches(hash_secret(secret), "")
