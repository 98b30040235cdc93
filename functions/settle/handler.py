"""Settle Lambda: settles the overdue requests the expiry finder queued, one SQS batch
at a time, each by its kind's timeout policy under the same claim a person's answer takes.

The event source mapping reports batch item failures: only the records that raised are
delivered again (`interlock.settling`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from interlock.api.wiring import runtime
from interlock.settling import settle_batch

logger = Logger()
# Only AWS calls are traced: an HTTP subsegment would record a platform URL, and a
# Telegram URL carries the bot token.
tracer = Tracer(patch_modules=["boto3", "botocore"])
metrics = Metrics()

# The names the sweeper published when it settled requests itself: the alarms on
# SweepFailures and StuckClaims read them.
METRICS = {
    "timed_out": "Timeouts",
    "defaulted": "Defaulted",
    "rerouted": "Rerouted",
    "failed": "SweepFailures",
    "stuck": "StuckClaims",
    "deferred": "Deferred",
    "notices_delivered": "NoticesDelivered",
    "notices_failed": "NoticeFailures",
    "notices_abandoned": "NoticesAbandoned",
}


@logger.inject_lambda_context(log_event=False)  # never the event: it carries secrets
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    response, report = settle_batch(runtime(), event, context)
    for field, name in METRICS.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=getattr(report, field))
    counts = {k: v for k, v in asdict(report).items() if k != "chats"}
    logger.info("settle batch finished", extra=counts)
    return dict(response)
