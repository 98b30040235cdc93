"""The expiry sweeper fanned out on SQS, on a moto server: the time to settle N overdue
requests with 1 and with 4 consumers, and AWS calls per request.

The finder (`interlock.fanout.find_overdue`, what the scheduled `sweeper` function runs)
sends one message per overdue request to a settle queue. Each consumer is a process of
its own running the settle function's batch step (`interlock.settling.settle_batch`)
under `LambdaSqsPoller`, as Lambda runs the `settle` function at most `MaximumConcurrency`
at a time. Each overdue request is a real paused run (the snapshot of a real Strands
agent paused in `request_approval`), so settling it resumes the agent with a timed-out
answer and stores the end of the turn, exactly as in production. Calls are counted at
the server, for every process. Prints JSON.

    .venv/bin/python bench/sweeper.py [--counts 10 100 1000] [--consumers 1 4]

The emulator serves one request at a time in this process, and the consumers share the
machine's cores with it: the speed-up of more consumers here is a floor, not what Lambda
gives. Its transactions back up only the items they name and its queries read only
their partition (`local.moto_at_scale`): moto's own copy of the whole table per
transaction, and sort of it per query, would make the emulator, not the sweeper, what
grows with the count.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

import boto3  # noqa: E402

from examples.analyst.script import DEMO_SCENARIOS  # noqa: E402
from interlock.adapters.factory import Stores, build_stores  # noqa: E402
from interlock.adapters.queue import (  # noqa: E402
    BATCH_SIZE,
    SqsSettleQueue,
    create_settle_queues,
)
from interlock.adapters.schema import SWEEP_SHARDS  # noqa: E402
from interlock.fanout import find_overdue  # noqa: E402
from interlock.harness.model import ScriptedModel  # noqa: E402
from interlock.pause import persist_pause  # noqa: E402
from interlock.settling import settle_batch  # noqa: E402
from interlock.sweeper import SweepReport  # noqa: E402
from interlock.timing import CLOCK_SKEW_MS, ManualClock  # noqa: E402
from interlock.turns import Caller, Runtime, TurnLimits, run_turn  # noqa: E402
from local.emulator import Emulator  # noqa: E402
from local.sqs_poller import LambdaSqsPoller  # noqa: E402
from local.storage import local_storage  # noqa: E402
from tests.turns import append_turn  # noqa: E402

REGION = "us-east-1"
# Long: nothing fails here, so nothing should come back while a consumer still works.
VISIBILITY_TIMEOUT_S = 1800


def overdue_requests(stores: Stores, clock: ManualClock, count: int, tag: str) -> None:
    """`count` chats, each with an unanswered approval of a real paused run."""
    rt = _runtime(stores, clock, "pauser")
    template = run_turn(rt, Caller("alice"), f"{tag}-template", "download the table")
    assert template.offer is not None
    request = template.offer.request
    snapshot = stores.blobs.read_snapshot(request.stored_snapshot)
    for n in range(count):
        # The chat's transcript ends at the paused turn, as a real pause leaves it.
        append_turn(stores, f"{tag}-{n}", {"role": "user", "text": "download"}, clock.now_ms())
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


@dataclass(frozen=True)
class Job:
    """What one consumer process needs to drain one settle queue."""

    endpoint: str
    table: str
    bucket: str
    queue_url: str
    queue_arn: str
    now_ms: int
    worker: str


def consume(job: Job) -> dict[str, Any]:
    """Settle from the queue until a receive comes back empty; what was done."""
    session = boto3.session.Session(
        region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local"
    )
    clients = {name: session.client(name, endpoint_url=job.endpoint) for name in ("dynamodb", "s3")}
    stores = build_stores(clients["dynamodb"], clients["s3"], job.table, job.bucket)
    rt = _runtime(stores, ManualClock(job.now_ms), job.worker)
    report = SweepReport()

    def handler(event: dict[str, Any], context: Any) -> Mapping[str, Any]:
        response, settled = settle_batch(rt, event, context)
        for field in ("found", "timed_out", "defaulted", "skipped", "failed", "deferred"):
            setattr(report, field, getattr(report, field) + getattr(settled, field))
        return response

    sqs = session.client("sqs", endpoint_url=job.endpoint)
    poller = LambdaSqsPoller(sqs, job.queue_url, handler, BATCH_SIZE, queue_arn=job.queue_arn)
    poller.drain(idle_s=0)
    settled = {k: v for k, v in asdict(report).items() if k != "chats"}
    return {**settled, **{k: v for k, v in asdict(poller.counts).items() if k != "errors"}}


def _consumer_main(jobs: Any, results: Any) -> None:
    """A consumer process: imports done, it says so, then drains each queue it is given."""
    results.put("ready")
    while (job := jobs.get()) is not None:
        results.put(consume(job))


class Consumers:
    """Consumer processes started once (imports are not timed), each given jobs alone."""

    def __init__(self, count: int) -> None:
        context = mp.get_context("spawn")
        self._results = context.Queue()
        self._jobs = [context.Queue() for _ in range(count)]
        self._processes = [
            context.Process(target=_consumer_main, args=(jobs, self._results), daemon=True)
            for jobs in self._jobs
        ]
        for process in self._processes:
            process.start()
        assert all(self._results.get(timeout=300) == "ready" for _ in self._processes)

    def drain(self, job: Job, count: int) -> tuple[list[dict[str, Any]], float]:
        """`count` consumers drain the queue at once; their reports and the time taken."""
        started = time.perf_counter()
        for n in range(count):
            self._jobs[n].put(Job(**{**asdict(job), "worker": f"consumer-{n}"}))
        reports = [self._results.get(timeout=3600) for _ in range(count)]
        return reports, time.perf_counter() - started

    def stop(self) -> None:
        for jobs in self._jobs:
            jobs.put(None)
        for process in self._processes:
            process.join(timeout=30)


def measure(emulator: Emulator, pool: Consumers, count: int, consumers: int) -> dict[str, Any]:
    """Fan `count` overdue requests (and the template's own) out and settle them."""
    tag = f"c{count}x{consumers}"
    suffix = uuid.uuid4().hex[:8]
    table, bucket = f"sweep-{tag}-{suffix}", f"sweep-{suffix}"
    storage = local_storage(emulator.endpoint, table, bucket)
    sqs = boto3.session.Session(
        region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local"
    ).client("sqs", endpoint_url=emulator.endpoint)
    url, _ = create_settle_queues(sqs, f"settle-{tag}-{suffix}", VISIBILITY_TIMEOUT_S)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    clock = ManualClock()
    overdue_requests(storage.stores, clock, count, tag)
    clock.advance(seconds=storage.stores.policy.request_ttl_s + 1, ms=CLOCK_SKEW_MS)
    emulator.traffic.take()

    started = time.perf_counter()
    found = find_overdue(
        storage.stores.requests,
        SqsSettleQueue(sqs, url),
        clock.now_ms(),
        remaining_ms=lambda: 600_000,
        limit_per_shard=count + 1,
    )
    finder_s = time.perf_counter() - started
    finder = emulator.traffic.take()
    job = Job(emulator.endpoint, table, bucket, url, arn["QueueArn"], clock.now_ms(), "")
    reports, settle_s = pool.drain(job, consumers)
    settling = emulator.traffic.take()
    return _figures(count, consumers, found.enqueued, finder, settling, reports, finder_s, settle_s)


def _figures(
    count: int,
    consumers: int,
    enqueued: int,
    finder: dict[str, Any],
    settling: dict[str, Any],
    reports: list[dict[str, Any]],
    finder_s: float,
    settle_s: float,
) -> dict[str, Any]:
    total = {k: sum(r[k] for r in reports) for k in reports[0]}
    settled = total["timed_out"] + total["defaulted"]
    calls: dict[str, int] = {}
    for traffic in (finder, settling):
        for name, n in traffic["calls"].items():
            calls[name] = calls.get(name, 0) + n
    sqs = sum(n for name, n in calls.items() if name.startswith("sqs."))
    store = sum(calls.values()) - sqs
    # Per run, not per request: the finder's index queries (the expiry and the lease
    # index, per shard) and depth read, and the one empty receive that ends each consumer.
    fixed = 2 * SWEEP_SHARDS + 1 + total["empty_polls"]
    per = max(settled, 1)
    return {
        "overdue": count + 1,  # the template's own request is overdue too
        "consumers": consumers,
        "enqueued": enqueued,
        "settled": settled,
        "skipped": total["skipped"],
        "failed": total["failed"],
        "batches": total["batches"],
        "finder_seconds": round(finder_s, 2),
        "settle_seconds": round(settle_s, 2),
        "settled_per_second": round(settled / settle_s, 2) if settle_s else None,
        "aws_calls": sum(calls.values()),
        "fixed_calls_per_run": fixed,
        "aws_calls_per_request": round((sum(calls.values()) - fixed) / per, 2),
        "store_calls_per_request": round((store - 2 * SWEEP_SHARDS) / per, 2),
        "sqs_calls_per_request": round((sqs - 1 - total["empty_polls"]) / per, 2),
        "calls_by_operation": dict(sorted(calls.items())),
    }


def _runtime(stores: Stores, clock: ManualClock, worker: str) -> Runtime:
    return Runtime(
        stores,
        lambda: ScriptedModel(DEMO_SCENARIOS),
        clock=clock,
        limits=TurnLimits(heartbeat_s=600, max_concurrent=64, daily_turns=100_000),
        worker_id=worker,
    )


@contextmanager
def _running(consumers: int) -> Iterator[tuple[Emulator, Consumers]]:
    emulator = Emulator().start()
    pool = Consumers(consumers)
    try:
        yield emulator, pool
    finally:
        pool.stop()
        emulator.stop()


def run(counts: list[int], consumers: list[int]) -> dict[str, Any]:
    """Each count of overdue requests settled by each number of consumers."""
    # The consumers and the emulator share these cores with whatever else runs.
    machine = {"cpus": os.cpu_count(), "load_1m_at_start": round(os.getloadavg()[0], 2)}
    with _running(max(consumers)) as (emulator, pool):
        results = [measure(emulator, pool, c, n) for c in counts for n in consumers]
    per_request = [r["aws_calls_per_request"] for r in results]
    store = [r["store_calls_per_request"] for r in results]
    largest = [r for r in results if r["overdue"] == max(counts) + 1]
    seconds = {r["consumers"]: r["settle_seconds"] for r in largest}
    return {
        "machine": machine,
        "runs": results,
        "speedup": {
            f"{n}_vs_{min(seconds)}_consumers": round(seconds[min(seconds)] / s, 2)
            for n, s in seconds.items()
            if s
        },
        "targets": {
            "each_request_settled_once": all(
                (r["settled"], r["skipped"], r["failed"]) == (r["overdue"], 0, 0) for r in results
            ),
            # Constant within rounding: batches of five and of ten fill up only at scale,
            # and the template chat holds one extra open-request slot.
            "calls_per_request_constant": max(per_request) - min(per_request) < 0.5,
            "store_calls_per_request_constant": max(store) - min(store) < 0.5,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--consumers", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    print(json.dumps(run(args.counts, args.consumers), indent=2))


if __name__ == "__main__":
    main()
