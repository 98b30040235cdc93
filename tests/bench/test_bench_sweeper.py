"""The sweeper benchmark keeps running; its calls per request do not grow with the count."""

from __future__ import annotations

from bench.sweeper import run


def test_calls_per_swept_request_are_constant() -> None:
    figures = run([3, 12])
    assert [r["swept"] for r in figures["runs"]] == [4, 13]
    assert figures["targets"]["calls_per_request_constant"], figures
