"""The soak's checker for its long runs: what it calls a violation (the soak itself runs
for minutes, by hand; its figures go in notes)."""

from __future__ import annotations

from typing import Any

from bench.soak import check_long


def _run(**changes: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "completed": True,
        "state": "done",
        "ended_reason": None,
        "kill_points": [{"step": 3, "phase": "model"}, {"step": 9, "phase": "tool"}],
        "given_up_events": 0,
        "model_calls": {"repeated": 1},
        "tool_bodies": {"repeated": 1},
    }
    return {**run, **changes}


def test_a_long_run_that_completed_repeating_one_step_per_kill_is_no_violation() -> None:
    assert check_long({"long-000": _run()}) == []


def test_a_long_run_that_ended_otherwise_or_repeated_more_than_its_kills_is_named() -> None:
    found = check_long(
        {
            "long-000": _run(completed=False, state="expired", ended_reason="given up"),
            "long-001": _run(given_up_events=1),
            "long-002": _run(model_calls={"repeated": 2}),
            "long-003": _run(tool_bodies={"repeated": 2}),
        }
    )
    assert found == [
        "long-000: ended expired (given up)",
        "long-001: given up",
        "long-002: 2 model calls repeated",
        "long-003: 2 tool bodies repeated",
    ]
