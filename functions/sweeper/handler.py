"""Sweeper Lambda, the expiry finder: on a schedule, queue each overdue request once.

It reads the sparse expiry index and sends one settle message per overdue request
(`interlock.fanout`); the settle function consumes them. It runs no agent, so it never
imports strands, and it stops before its own deadline: the next run carries on.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from interlock.api.wiring import settle_queue, stores
from interlock.fanout import find_overdue
from interlock.timing import SystemClock

logger = Logger()
tracer = Tracer(patch_modules=["boto3", "botocore"])
metrics = Metrics()
clock = SystemClock()

METRICS = {
    "found": "OverdueFound",
    "enqueued": "SettlesQueued",
    "deferred": "Deferred",
    "backlog": "SettleBacklog",
}


@logger.inject_lambda_context(log_event=False)  # never the event: it carries secrets
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    store = stores()
    report = find_overdue(
        store.requests,
        settle_queue(),
        clock.now_ms(),
        remaining_ms=context.get_remaining_time_in_millis,
        grace_ms=store.policy.recovery_grace_ms,
        notices=store.channels,
    )
    for field, name in METRICS.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=getattr(report, field))
    logger.info("overdue requests queued", extra=asdict(report))
    return asdict(report)
