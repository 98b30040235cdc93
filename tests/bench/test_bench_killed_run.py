"""The killed-run benchmark keeps running: a run whose worker process is SIGKILLed at
three steps, each after the run moved on, still ends, and a takeover repeats no more
model calls than there were kills."""

from __future__ import annotations

import pytest

from bench.killed_run import measure
from local.emulator import Emulator


@pytest.mark.parametrize("seed", [7, 1])
def test_a_run_killed_three_times_mid_way_completes(emulator: Emulator, seed: int) -> None:
    figures = measure(emulator.endpoint, steps=6, kills=3, seed=seed)

    assert figures["completed"], figures
    assert figures["kills"] == 3 and figures["claims"] == 4, figures
    assert figures["claims"] > figures["claims_allowed_in_a_row_without_progress"]
    assert figures["model_calls"]["repeated"] <= figures["kills"], figures
    assert figures["model_calls"]["steps_never_asked"] == [], figures
    # A body runs again only when its worker died after it ran, before its result was kept
    tool_kills = sum(1 for point in figures["kill_points"] if point["phase"] == "tool")
    assert figures["tool_bodies"]["repeated"] <= tool_kills, figures
    assert figures["given_up_events"] == 0
