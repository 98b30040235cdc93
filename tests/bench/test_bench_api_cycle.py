"""The API benchmark keeps running: a full cycle through the local server, and the
requests function stays free of strands."""

from __future__ import annotations

import os

from bench.api_cycle import cycle, import_times
from local.emulator import Emulator


def test_a_pause_and_a_resume_through_the_local_server(emulator: Emulator) -> None:
    before = dict(os.environ)
    figures = cycle(emulator)

    assert dict(os.environ) == before, "local mode's settings do not leak"
    assert figures["resume_outcome"] == "completed"
    # Every pause PUTs its snapshot, every resume GETs it, even one this small
    assert figures["pause"]["calls"]["s3.PutObject"] == 1
    assert figures["resume"]["calls"]["s3.GetObject"] == 1
    assert figures["pause"]["total_calls"] + figures["resume"]["total_calls"] <= 12
    # The resumed run's two journal steps (the response that calls the download tool,
    # then its result) are told apart from the claim and the finish: one fenced write
    # each. Its answer, the response that calls no tool, is stored by the finish alone
    assert figures["resume"]["journal"]["steps"] == 2
    assert figures["resume"]["total_calls"] == 6
    assert figures["resume"]["calls"]["dynamodb.TransactWriteItems"] == 2


def test_the_requests_function_does_not_import_strands() -> None:
    figures = import_times(runs=1)
    assert figures["requests"]["imports_strands"] is False
    assert figures["run"]["imports_strands"] is True, "the probe can see strands at all"


def test_the_streaming_benchmark_reads_a_slow_turn_as_it_streams(emulator: Emulator) -> None:
    from bench.api_cycle import streaming

    figures = streaming(emulator)

    assert figures["first_event"] == "RUN_STARTED"
    assert figures["heartbeats"] > 0 and figures["text_deltas"] > 5
    assert figures["first_event_ms"] < figures["first_text_ms"] < figures["last_event_ms"]
