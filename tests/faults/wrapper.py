"""A fault-injecting wrapper for any store port: calls pass through to the real adapter,
except those told to fail (a `StoreError`, as an outage would give) or to stall until
the test lets them go (a worker frozen mid-step, its lease running out)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from interlock.errors import StoreError

STALL_LIMIT_S = 30.0


class Faulty:
    """Wraps `inner`; `fail` names methods that raise, `stall` methods that wait.

    `reached[name]` is set when a stalled call arrives; `release()` lets it go on.
    """

    def __init__(
        self, inner: Any, *, fail: set[str] | None = None, stall: set[str] | None = None
    ) -> None:
        self._inner = inner
        self._fail = fail or set()
        self._stall = stall or set()
        self._go = threading.Event()
        self.reached = {name: threading.Event() for name in self._stall}
        self.failures = 0

    def release(self) -> None:
        self._go.set()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name not in self._fail | self._stall:
            return attr
        return self._wrapped(name, attr)

    def _wrapped(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def faulty(*args: Any, **kwargs: Any) -> Any:
            if name in self._fail:
                self.failures += 1
                raise StoreError(f"injected failure of {name}")
            self.reached[name].set()
            assert self._go.wait(STALL_LIMIT_S), f"{name} was never released"
            return call(*args, **kwargs)

        return faulty
