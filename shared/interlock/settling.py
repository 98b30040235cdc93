"""The settle consumer's step: one SQS batch of settle messages, each settled alone.

Powertools' batch utility runs `interlock.sweeper.settle_message` for each record and
reports the ones that raised as `batchItemFailures`, so SQS delivers only those again
(and, after `MAX_RECEIVES` receives, moves them to the dead-letter queue) while their
batch-mates are done. A record fails only when settling raised: a malformed message, a
request that cannot be read. The outcomes a sweep counts, a failed continuation
included, are handled: the claim cap ends a request that keeps failing, and the finder
finds any request still overdue again once its lease lapses.

Shared by the Lambda handler, the local poller and the benchmark, each with its runtime.
"""

from __future__ import annotations

import logging
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from interlock.deps import Runtime
from interlock.sweeper import DEADLINE_MARGIN_MS, SweepReport, settle_message

logger = logging.getLogger(__name__)


def settle_batch(
    rt: Runtime, event: dict[str, Any], context: Any | None = None
) -> tuple[PartialItemFailureResponse, SweepReport]:
    """Settle the requests an SQS event's records name; the partial batch response.

    Args:
        rt: The runtime to settle with.
        event: The SQS event (`Records`).
        context: The Lambda context: with less than `DEADLINE_MARGIN_MS` left, the
            records not started yet are acknowledged unsettled (`deferred`), since the
            finder finds their requests again; None for no deadline.
    """
    report = SweepReport()
    # One processor per batch: it keeps the batch's results, so it is never shared.
    # A batch whose every record failed is still a partial response, not an error: the
    # failures are the records', and the dead-letter queue's alarm says so.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def record_handler(record: SQSRecord, lambda_context: Any = None) -> None:
        if lambda_context is not None and (
            lambda_context.get_remaining_time_in_millis() < DEADLINE_MARGIN_MS
        ):
            report.deferred += 1
            return
        try:
            settle_message(rt, record.body, report)
        except Exception as exc:
            # By type only: a traceback or message could quote what a record held.
            logger.warning(
                "message_id=<%s>, error=<%s> | settling failed; SQS delivers it again",
                record.message_id,
                type(exc).__name__,
            )
            raise

    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    return response, report
