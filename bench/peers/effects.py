"""A real side effect to count: downloads, held open so two racers overlap.

Both sides of the race bench download through one of these. A download counts itself,
then waits (bounded) until the race is decided: a second download has started, or one
of the racers has its answer. So the first download is still running when the second
racer arrives, as it would be with a real file, and the count says how many racers
acted, not which was faster.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

HOLD_S = 5.0


class Downloads:
    """Counts downloads performed; optionally holds each one until the race is decided.

    Args:
        fetch: What a download returns for a URL (the demo's stand-in page).
        racers: How many concurrent callers to wait for; 0 holds nothing.
    """

    def __init__(self, fetch: Callable[[str], str], racers: int = 0) -> None:
        self._fetch = fetch
        self._racers = racers
        self._lock = threading.Lock()
        self._decided = threading.Event()
        self.urls: list[str] = []
        if racers == 0:
            self._decided.set()

    @property
    def count(self) -> int:
        return len(self.urls)

    def __call__(self, url: str) -> str:
        with self._lock:
            self.urls.append(url)
            if len(self.urls) >= self._racers:
                self._decided.set()
        self._decided.wait(HOLD_S)
        return self._fetch(url)

    def answered(self) -> None:
        """A racer has its answer: nothing more is coming from it."""
        self._decided.set()
