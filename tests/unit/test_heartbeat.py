"""The heartbeat renews on its own thread and stops cleanly or when refused."""

from __future__ import annotations

import threading
import time

from interlock.errors import LeaseLost, StoreError
from interlock.heartbeat import Heartbeat


def _wait_for(condition: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.005)


def test_renews_until_stopped() -> None:
    calls: list[str] = []
    with Heartbeat(lambda: calls.append(threading.current_thread().name), 0.01) as beat:
        _wait_for(lambda: len(calls) >= 3)
    count = len(calls)
    time.sleep(0.05)

    assert count >= 3 and len(calls) == count, "no renewal after stop"
    assert all(name.startswith("heartbeat") for name in calls)
    assert not beat.lost.is_set()


def test_stops_by_itself_when_the_lease_is_lost() -> None:
    def renew() -> None:
        raise LeaseLost("taken over")

    beat = Heartbeat(renew, 0.01).start()
    assert beat.lost.wait(1.0)
    beat.stop()
    assert beat.renewals == 0


def test_a_transient_error_does_not_stop_it() -> None:
    outcomes = iter([StoreError("throttled"), None, None, None, None, None, None])

    def renew() -> None:
        outcome = next(outcomes, None)
        if outcome is not None:
            raise outcome

    with Heartbeat(renew, 0.01) as beat:
        _wait_for(lambda: beat.renewals >= 2)
    assert beat.renewals >= 2 and not beat.lost.is_set()
