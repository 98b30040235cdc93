"""The resume-versus-rerun benchmark keeps running and the resume repeats nothing."""

from __future__ import annotations

from bench.resume_vs_rerun import compare
from interlock.adapters.factory import Stores


def test_resume_repeats_no_work_and_rerun_does(server_stores: Stores) -> None:
    figures = compare(server_stores)

    resumed, rerun = figures["interrupt_and_resume"], figures["end_turn_and_rerun"]
    assert resumed["repeated_model_calls"] == 0
    assert resumed["repeated_tool_executions"] == 0
    assert rerun["repeated_model_calls"] > 0 and rerun["repeated_tool_executions"] > 0
    assert resumed["model_calls"] < rerun["model_calls"]
    assert resumed["answer"] == rerun["answer"]


def test_a_takeover_after_a_crash_repeats_nothing(server_stores: Stores) -> None:
    takeover = compare(server_stores)["takeover_after_crash"]

    # The dead worker had recorded every step; its successor replayed them all.
    assert takeover["journal_entries_at_crash"] > 0
    assert takeover["repeated_model_calls"] == 0
    assert takeover["repeated_tool_executions"] == 0
    assert all(count == 1 for count in takeover["fetches"].values())
    assert takeover["answer"] == "The method matches the reference table on every column."
