"""The cold-start benchmark keeps running: every figure present, plausible and judged."""

from __future__ import annotations

from bench.cold_start import TARGETS, measure


def test_the_import_times_ratios_and_targets_are_reported() -> None:
    figures = measure(runs=1)

    assert set(figures["import"]) == set(TARGETS)
    for name, timed in figures["import"].items():
        assert 0 < timed["median_cpu_ms"] < 60_000, name
        assert 0 < timed["median_ms"] < 60_000, name
    times = {name: timed["median_cpu_ms"] for name, timed in figures["import"].items()}
    # A handler imports what it stands next to, and more: counted in modules, which one
    # busy machine cannot reorder as it can two timings of a single run
    loaded = {name: timed["modules"] for name, timed in figures["import"].items()}
    assert loaded["run"] > loaded["strands"] and loaded["resume"] > loaded["strands"]
    assert loaded["requests"] > loaded["boto3"]
    assert loaded["strands"] > loaded["boto3"], "strands imports boto3"
    assert set(figures["ratios"]) == {"run_to_strands", "resume_to_strands", "requests_to_boto3"}
    assert figures["ratios"]["run_to_strands"] == round(times["run"] / times["strands"], 2)
    assert all(isinstance(met, bool) for met in figures["targets"].values())
    assert len(figures["targets"]) == 3
