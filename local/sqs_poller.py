"""A stand-in for Lambda's SQS event source mapping, for tests, benchmarks and local runs.

`LambdaSqsPoller` does what the Lambda poller does for a function whose event source
reports batch item failures: receive up to a batch of messages, hand them to the
handler as an SQS event, delete the ones the handler did not list in
`batchItemFailures` (all of them stay when the handler raises), and leave the rest to
become visible again after the queue's visibility timeout. SQS itself (here moto)
counts the receives and moves a message past its redrive policy's `maxReceiveCount` to
the dead-letter queue.

It short-polls: the emulator serves one request at a time, so a long poll would hold
every other client up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

Handler = Callable[[dict[str, Any], Any], Mapping[str, Any]]

# The attributes Lambda puts on every record.
_ATTRIBUTES: Final = [
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
]


class PollerContext:
    """The parts of a Lambda context the handlers read, with a fixed time budget."""

    function_name = "settle"
    function_version = "$LATEST"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:settle"
    aws_request_id = "local-poller"
    log_group_name = "/aws/lambda/settle"
    log_stream_name = "local"

    def __init__(self, remaining_ms: int = 300_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@dataclass
class PollCounts:
    """What a poller did.

    Attributes:
        batches: Handler invocations.
        records: Records handed to the handler.
        deleted: Messages deleted after the handler did not report them failed.
        failed: Records the handler reported failed (or all of a batch it raised on).
        empty_polls: Receives that returned nothing.
        errors: The type of each exception a handler raised (its batch then failed).
    """

    batches: int = 0
    records: int = 0
    deleted: int = 0
    failed: int = 0
    empty_polls: int = 0
    errors: list[str] = field(default_factory=list)


class LambdaSqsPoller:
    """Mimics the Lambda SQS poller with `ReportBatchItemFailures` for one consumer.

    Args:
        sqs: A boto3 SQS client.
        queue_url: The queue to consume.
        handler: The function's handler: `(event, context) -> {"batchItemFailures": ...}`.
        batch_size: Most messages per invocation (the event source's `BatchSize`).
        context: The Lambda context handed to the handler.
        queue_arn: The queue's ARN for the records (read from the queue when omitted).
    """

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        handler: Handler,
        batch_size: int = 10,
        context: Any | None = None,
        queue_arn: str | None = None,
    ) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._handler = handler
        self._batch_size = batch_size
        self._context = context or PollerContext()
        self._arn = (
            queue_arn
            or sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
        )
        self.counts = PollCounts()

    def poll_once(self) -> int:
        """Receive one batch and invoke the handler with it; the number of records."""
        messages = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=self._batch_size,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            self.counts.empty_polls += 1
            return 0
        event = {"Records": [self._record(message) for message in messages]}
        self.counts.batches += 1
        self.counts.records += len(messages)
        try:
            response = self._handler(event, self._context)
            failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
        except Exception as exc:  # the whole batch failed: every message comes back
            self.counts.errors.append(type(exc).__name__)
            failed = {message["MessageId"] for message in messages}
        done = [m for m in messages if m["MessageId"] not in failed]
        self.counts.failed += len(messages) - len(done)
        self._delete(done)
        return len(messages)

    def drain(
        self, *, idle_s: float = 0.0, timeout_s: float = 600.0, pause_s: float = 0.05
    ) -> None:
        """Poll until the queue gave nothing for `idle_s` (or `timeout_s` passed).

        With `idle_s` longer than the queue's visibility timeout, messages that failed
        come back and are retried until they succeed or SQS moves them to the
        dead-letter queue.
        """
        deadline = time.monotonic() + timeout_s
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if self.poll_once():
                quiet_since = None
                continue
            now = time.monotonic()
            quiet_since = quiet_since or now
            if now - quiet_since >= idle_s:
                return
            time.sleep(pause_s)

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        attributes = message.get("Attributes", {})
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": {name: attributes[name] for name in _ATTRIBUTES if name in attributes},
            "messageAttributes": {},
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self._arn,
            "awsRegion": self._arn.split(":")[3],
        }

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            entries = [
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(chunk)
            ]
            response = self._sqs.delete_message_batch(QueueUrl=self._url, Entries=entries)
            self.counts.deleted += len(response.get("Successful", []))
