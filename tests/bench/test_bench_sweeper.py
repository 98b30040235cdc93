"""The sweeper benchmark keeps running: the finder queues every overdue request once, one
or four consumers settle each once, and calls per request do not grow with the count or
with the consumers."""

from __future__ import annotations

from bench.sweeper import run


def test_every_request_is_settled_once_at_constant_calls_per_request() -> None:
    figures = run([3, 12], consumers=[1, 4])
    runs = figures["runs"]
    assert [(r["overdue"], r["consumers"]) for r in runs] == [(4, 1), (4, 4), (13, 1), (13, 4)]
    assert [r["enqueued"] for r in runs] == [r["overdue"] for r in runs]
    assert figures["targets"]["each_request_settled_once"], figures
    assert figures["targets"]["calls_per_request_constant"], figures
    assert figures["targets"]["store_calls_per_request_constant"], figures
