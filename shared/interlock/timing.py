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

# How long the write that ends a request with channel posts leaves their edit to the
# process that ended it, before the finder's pass carries it on (`notify.Notifier.retry`):
# the mark that the edit is owed is written with the ending itself, so a process that
# dies before it edited the posts leaves a card edited within this and one finder pass.
EDIT_HOLD_MS: Final = 60_000

# The most any two workers' clocks may differ, either way. A time one worker wrote (a
# lease's end, a request's expiry) is judged by another worker's clock, so the side that
# takes something away from a worker or a person (a takeover, a recovery, a settle)
# waits this margin out (`surely_passed`), while the holder and the person keep their
# own clock: a holder stops at its lease's end, a person may answer until the stated
# expiry. Within this skew no taker acts before the other side's own clock says it may.
# What it costs: takeovers, recoveries and settles come up to this much later.
CLOCK_SKEW_MS: Final = 10_000


def surely_passed(now_ms: int) -> int:
    """The latest instant every worker's clock has passed when this one reads `now_ms`
    (within `CLOCK_SKEW_MS`): a stored time at or before it is over for all of them.
    What a taker compares a time another worker wrote with."""
    return now_ms - CLOCK_SKEW_MS


# `StorePolicy.max_total_claims`: the most claims of one request, progress or not.
MAX_TOTAL_CLAIMS: Final = 20


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
            to change an answer nothing acted on yet, by the person's own clock (the
            sweeper waits `CLOCK_SKEW_MS` more by its own). Recovery comes within two
            leases, this grace, that margin and one finder interval after the worker's
            last renewal.
        max_claims: Claims in a row that added nothing to the run's journal (each one's
            worker died, or lost its lease, before recording a step) before the request
            is given up (expired). A claim whose run recorded a step starts the count
            again: a long run killed several times mid-way goes on (`records.given_up`).
        max_total_claims: The hard ceiling on a request's claims however far each got,
            so a run that records a step per crash, forever, still ends. Generous: one
            claim is bounded by `max_resume_ms`, and a run that keeps dying after some
            progress would need this many deaths.
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
    max_total_claims: int = MAX_TOTAL_CLAIMS
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
