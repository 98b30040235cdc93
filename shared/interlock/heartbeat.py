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

    Use as a context manager; `lost` is set if the lease could not be kept, and the
    holder must then stop writing (its writes would be refused anyway).
    """

    def __init__(self, renew: Callable[[], object], interval_s: float) -> None:
        self._renew = renew
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.lost = threading.Event()
        self.renewals = 0
        self._executor: ThreadPoolExecutor | None = None

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
                self._renew()
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
