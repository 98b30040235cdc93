"""The suite-wide secret watch really finds a leak (so its silence means something)."""

from __future__ import annotations

import logging

from tests.secret_watch import WATCH, SecretWatch


def test_the_watch_finds_a_secret_in_a_log_record() -> None:
    watch = SecretWatch()
    watch.issue("resume-secret-0123456789")
    watch.record(logging.makeLogRecord({"msg": "claim refused for %s", "args": ("x",)}))
    assert watch.leaks() == []

    watch.record(logging.makeLogRecord({"msg": "oops", "secret": "resume-secret-0123456789"}))
    assert watch.leaks() == ["resume…"]


def test_secrets_issued_by_the_code_are_watched() -> None:
    from interlock.tokens import new_secret

    secret = new_secret()
    assert secret in WATCH.issued
