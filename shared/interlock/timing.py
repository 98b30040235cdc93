"""Clocks and the time rules of a request: two expiries, leases and their hard stop.

Units are in the names: `*_s` / `expires_at` are epoch seconds, `*_ms` milliseconds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Final, Protocol

DAY_S: Final = 86_400
# The S3 lifecycle rule on snapshots; a request must never outlive its snapshot.
SNAPSHOT_LIFECYCLE_DAYS: Final = 8
ANSWER_LIFECYCLE_DAYS: Final = 30


class Clock(Protocol):
    """Where "now" comes from; injected so tests can move time."""

    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock time."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to; thread-safe for race tests."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self._now_ms = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def advance(self, *, seconds: float = 0, ms: int = 0) -> None:
        with self._lock:
            self._now_ms += int(seconds * 1000) + ms


# How long a claim whose worker died waits for a person before the system continues it.
RECOVERY_GRACE_MS: Final = 30_000


# The two durations a deployment may set (`InterlockConfig` takes its defaults here).
REQUEST_TTL_S: Final = DAY_S
LEASE_MS: Final = 30_000


@dataclass(frozen=True, slots=True)
class StorePolicy:
    """Durations and limits the store enforces.

    Attributes:
        request_ttl_s: How long a card stays answerable unless the caller asks for less.
        retention_s: How long a finished or expired pointer is kept after its logical
            expiry, so a late click is told "expired" rather than "unknown".
        lifecycle_margin_s: Safety gap between the latest logical expiry and the
            snapshot lifecycle deletion.
        lease_ms: How long one claim or renewal holds a request.
        max_resume_ms: Hard stop: no lease is renewed past claim time + this.
        recovery_grace_ms: How long a claim whose lease lapsed (its worker died) waits
            before the sweeper continues it with its recorded answer: time for the person
            to change an answer nothing acted on yet. Recovery comes within two leases
            and this grace plus one finder interval after the worker's last renewal.
        max_claims: Claims allowed per card before it is denied and expired (crashes).
        max_failures: Failed runs of an answered request (released, or reset to be
            answered afresh when nothing was acted on) before it is given up.
        max_item_bytes: Budget for one pointer item, well under DynamoDB's 400 KB.
        inline_bytes: Largest final answer (its text, tool calls and results) kept in
            the request's own item, and largest journal step kept in its own item; a
            larger one is an S3 object. Both are written in transactions, billed 2 WRU
            per KB: past about 4 KB one S3 PUT (the price of 8 WRU) costs less.
        approval_ttl_s: How long an approval row lives (it covers the rest of the chat).
        max_snapshot_bytes: Largest compressed snapshot accepted.
    """

    request_ttl_s: int = REQUEST_TTL_S
    retention_s: int = 3 * DAY_S
    lifecycle_margin_s: int = DAY_S
    lease_ms: int = LEASE_MS
    max_resume_ms: int = 14 * 60_000
    recovery_grace_ms: int = RECOVERY_GRACE_MS
    max_claims: int = 3
    max_failures: int = 5
    max_item_bytes: int = 300_000
    inline_bytes: int = 4 * 1024
    approval_ttl_s: int = 30 * DAY_S
    max_snapshot_bytes: int = 5 * 1024 * 1024
    snapshot_lifecycle_days: int = SNAPSHOT_LIFECYCLE_DAYS

    def latest_expiry_s(self) -> int:
        """The longest a request may stay answerable after it was opened."""
        return self.snapshot_lifecycle_days * DAY_S - self.lifecycle_margin_s

    def expiry(self, now_ms: int, ttl_s: int | None = None) -> tuple[int, int]:
        """Return `(expires_at, ttl)` for a request opened at `now_ms`.

        The logical expiry is clamped below the snapshot lifecycle; the physical TTL
        adds the retention window so the item outlives its logical expiry.
        """
        now_s = now_ms // 1000
        latest = now_s + self.latest_expiry_s()
        wanted = now_s + (ttl_s if ttl_s is not None else self.request_ttl_s)
        expires_at = max(now_s + 1, min(wanted, latest))
        return expires_at, expires_at + self.retention_s
