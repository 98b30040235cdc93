"""The history benchmark keeps running and its targets keep holding."""

from __future__ import annotations

from bench.history_read import measure
from bench.peers.metering import metered
from local.emulator import Emulator


def test_history_costs_the_window_not_the_chat(emulator: Emulator) -> None:
    with metered(emulator):
        small, large = measure(emulator, 10), measure(emulator, 1_100)
    assert small["newest_given_is_latest"] and large["newest_given_is_latest"]
    assert (small["calls"], large["calls"]) == (1, 1)
    assert large["rru_per_turn_given"] <= 1.2 * small["rru_per_turn_given"]
    assert large["turns_given"] == 50
