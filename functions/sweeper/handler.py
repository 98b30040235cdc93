"""Sweeper Lambda: on a schedule, settle requests nobody answered in time."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from interlock.api.wiring import runtime
from interlock.sweeper import sweep

logger = Logger()
# Only AWS calls are traced: an HTTP subsegment would record a platform URL, and a
# Telegram URL carries the bot token.
tracer = Tracer(patch_modules=["boto3", "botocore"])
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    rt = runtime()
    now = rt.clock.now_ms()
    # Stop taking requests before this invocation's own deadline; the next run carries on.
    report = sweep(rt, now, deadline_ms=now + context.get_remaining_time_in_millis())
    names = {
        "timed_out": "Timeouts",
        "defaulted": "Defaulted",
        "rerouted": "Rerouted",
        "failed": "SweepFailures",
        "stuck": "StuckClaims",
        "deferred": "Deferred",
    }
    for field, name in names.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=getattr(report, field))
    logger.info("sweep finished", extra={k: v for k, v in asdict(report).items() if k != "chats"})
    return {k: v for k, v in asdict(report).items() if k != "chats"}
