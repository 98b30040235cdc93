"""A heartbeat that keeps a claim's lease alive while a resumed run works.

It renews on its own single-thread executor, so a slow model call never starves it,
and it stops by itself when renewal is refused (lease lost or deadline reached).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from interlock.errors import InterlockError, LeaseLost

logger = logging.getLogger(__name__)


class Heartbeat:
    """Calls `renew` every `interval_s` seconds until stopped or refused.

    Args:
        renew: Extends the lease; raises `LeaseLost` when the lease is gone.
        interval_s: Seconds between renewals (well under the lease length).

        until_ms: When the lease held at the start runs out; `renew` returning a number
            moves it on (the new `lease_expires_at_ms`).

    Use as a context manager; `lost` is set if the lease could not be kept, and the
    holder must then stop writing (its writes would be refused anyway) and start no
    further work: `holds` says, without a call, whether the lease is known to hold.
    """

    def __init__(
        self, renew: Callable[[], object], interval_s: float, until_ms: int | None = None
    ) -> None:
        self._renew = renew
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.lost = threading.Event()
        self.renewals = 0
        self.until_ms = until_ms
        self._executor: ThreadPoolExecutor | None = None

    def holds(self, now_ms: int) -> bool:
        """Whether the lease is known to hold at `now_ms`: never lost, and renewed (or
        taken) until later than now. A renewal that keeps failing lets it run out.

        By this worker's own clock, with no margin: `until_ms` is the very value its
        claim or renewal stored, and a taker waits `timing.CLOCK_SKEW_MS` past it by its
        own clock, so this clock has passed it before anyone takes over. A margin here
        would not help a body already running then (what a takeover may repeat), and
        would eat into a short lease."""
        if self.lost.is_set():
            return False
        return self.until_ms is None or now_ms < self.until_ms

    def start(self) -> Heartbeat:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="heartbeat")
        self._executor.submit(self._beat)
        return self

    def stop(self) -> None:
        """Stop renewing and wait for the executor to finish."""
        self._stop.set()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _beat(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                until = self._renew()
                if isinstance(until, int):
                    self.until_ms = until
                self.renewals += 1
            except LeaseLost:
                logger.warning("lease lost or past its deadline | heartbeat stopped")
                self.lost.set()
                return
            except InterlockError:
                # A transient store error: keep the current lease and try next beat.
                logger.warning("lease renewal failed | will retry", exc_info=True)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
