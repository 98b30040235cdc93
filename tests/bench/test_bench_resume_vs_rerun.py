"""The resume-versus-rerun benchmark keeps running and the resume repeats nothing."""

from __future__ import annotations

import os
import threading

from bench.resume_vs_rerun import compare, compare_doorstep, compare_mcp
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


def test_on_doorstep_resume_and_takeover_send_one_task_and_repeat_nothing(
    server_stores: Stores,
) -> None:
    figures = compare_doorstep(server_stores)

    resumed, takeover = figures["interrupt_and_resume"], figures["takeover_after_crash"]
    rerun = figures["end_turn_and_rerun"]
    assert resumed["cards_in_the_pause"] == 2
    for run in (resumed, takeover):
        assert (run["repeated_model_calls"], run["repeated_tool_executions"]) == (0, 0)
        assert (run["volunteer_tasks"], run["case_records"]) == (1, 1)
    assert takeover["model_calls"] == resumed["model_calls"]
    # Re-running pays for the step before the pause again, and upserts its case twice
    assert rerun["repeated_model_calls"] == 1 and rerun["case_records"] == 2
    assert rerun["model_calls"] > resumed["model_calls"]
    assert resumed["answer"] == takeover["answer"] == rerun["answer"]


def test_on_mcp_resume_calls_the_bank_once_per_round_and_rerun_asks_again(
    server_stores: Stores,
) -> None:
    url_before = os.environ.get("BANK_MCP_URL")

    figures = compare_mcp(server_stores)

    resumed, rerun = figures["interrupt_and_resume"], figures["end_turn_and_rerun"]
    assert resumed["cards_in_the_pause"] == 2
    # Resume: the first call asked, the one retry carried the answers, money moved once
    assert resumed["mcp_calls"] == {"first_calls": 1, "retries": 1, "transfers": 1, "repeated": 0}
    assert (resumed["model_calls"], resumed["repeated_model_calls"]) == (2, 0)
    # Re-run: the bank keeps nothing between rounds, so the turn run again from the start
    # calls it from scratch (a second first call, which asks again), then retries once
    assert rerun["mcp_calls"] == {"first_calls": 2, "retries": 1, "transfers": 1, "repeated": 1}
    assert (rerun["model_calls"], rerun["repeated_model_calls"]) == (3, 1)
    assert resumed["answer"] == rerun["answer"]
    assert "Sent 120.00 EUR to Ada Lovelace (reference INV-7)." in resumed["answer"]
    # The bank it served for the comparison is stopped, and the environment as it was
    assert not [t for t in threading.enumerate() if t.name == "bench-bank"]
    assert os.environ.get("BANK_MCP_URL") == url_before
