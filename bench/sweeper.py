"""The expiry sweeper on a moto server: AWS calls per swept request, and time for 1,000.

Each overdue request is a real paused run (the snapshot of a real Strands agent paused
in `request_approval`), so sweeping it resumes the agent with a timed-out answer and
stores the end of the turn, exactly as in production. Calls are counted at the server.
Prints JSON.

    .venv/bin/python bench/sweeper.py [--counts 10 100 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from examples.analyst.script import DEMO_SCENARIOS  # noqa: E402
from interlock.adapters.factory import Stores  # noqa: E402
from interlock.adapters.schema import SWEEP_SHARDS  # noqa: E402
from interlock.pause import persist_pause  # noqa: E402
from interlock.runtime.model import ScriptedModel  # noqa: E402
from interlock.sweeper import sweep  # noqa: E402
from interlock.timing import ManualClock  # noqa: E402
from interlock.turns import Caller, Runtime, TurnLimits, run_turn  # noqa: E402
from local.emulator import Emulator  # noqa: E402
from local.storage import local_storage  # noqa: E402


def overdue_requests(stores: Stores, clock: ManualClock, count: int, tag: str) -> None:
    """`count` chats, each with an unanswered approval of a real paused run."""
    rt = _runtime(stores, clock)
    template = run_turn(rt, Caller("alice"), f"{tag}-template", "download the table")
    assert template.offer is not None
    request = template.offer.request
    snapshot = stores.blobs.get_snapshot(request.snapshot_key)
    for n in range(count):
        # The chat's transcript ends at the paused turn, as a real pause leaves it.
        stores.chats.append_turn(f"{tag}-{n}", {"role": "user", "text": "download"}, clock.now_ms())
        persist_pause(
            stores,
            chat_id=f"{tag}-{n}",
            user_id="alice",
            interrupt_id=request.interrupt_id,
            kind="approval",
            card=request.card,
            snapshot=snapshot,
            turn_seq=1,
            now_ms=clock.now_ms(),
        )


def measure(emulator: Emulator, stores: Stores, count: int, tag: str) -> dict[str, Any]:
    clock = ManualClock()
    overdue_requests(stores, clock, count, tag)
    clock.advance(seconds=stores.policy.request_ttl_s + 1)
    emulator.traffic.take()
    started = time.perf_counter()
    report = sweep(_runtime(stores, clock), clock.now_ms(), limit_per_shard=count + 1)
    elapsed = time.perf_counter() - started
    traffic = emulator.traffic.take()
    swept = report.timed_out + report.defaulted
    # One index query per shard is the sweep's fixed cost; the rest is per request.
    per_request = (traffic["total_calls"] - SWEEP_SHARDS) / max(swept, 1)
    return {
        "overdue": count + 1,  # the template's own request is overdue too
        "swept": swept,
        "aws_calls": traffic["total_calls"],
        "index_queries_per_sweep": SWEEP_SHARDS,
        "aws_calls_per_request": round(per_request, 2),
        "calls_by_operation": traffic["calls"],
        "seconds": round(elapsed, 2),
    }


def _runtime(stores: Stores, clock: ManualClock) -> Runtime:
    return Runtime(
        stores,
        lambda: ScriptedModel(DEMO_SCENARIOS),
        clock=clock,
        limits=TurnLimits(heartbeat_s=600, max_concurrent=64, daily_turns=100_000),
        worker_id="bench",
    )


def run(counts: list[int]) -> dict[str, Any]:
    emulator = Emulator().start()
    try:
        results = []
        for count in counts:
            storage = local_storage(emulator.endpoint, f"sweep{count}", f"sweep-data-{count}")
            results.append(measure(emulator, storage.stores, count, f"c{count}"))
    finally:
        emulator.stop()
    per_request = [r["aws_calls_per_request"] for r in results]
    first, last = results[0], results[-1]
    # The marginal cost between the smallest and largest run: what one more request costs.
    marginal = (last["aws_calls"] - first["aws_calls"]) / max(last["swept"] - first["swept"], 1)
    return {
        "runs": results,
        "marginal_calls_per_request": round(marginal, 2),
        # Constant within rounding: the template chat holds one extra open-request slot.
        "targets": {"calls_per_request_constant": max(per_request) - min(per_request) < 0.5},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", type=int, nargs="+", default=[10, 100, 1000])
    print(json.dumps(run(parser.parse_args().counts), indent=2))


if __name__ == "__main__":
    main()
