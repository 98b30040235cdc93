"""The settle queue on SQS: the finder sends one message per overdue request.

The queue's shape (how many receives before a message goes to the dead-letter queue,
how many messages a consumer takes at once) is spelled here once, for the CDK construct
and for the queues and pollers the local tools and the tests run on an emulator, as
`schema` does for the table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from interlock.adapters.dynamo import translated
from interlock.errors import StoreError
from interlock.fanout import SEND_BATCH, SettleMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
else:
    SQSClient = Any

# A message whose settling raised this many times goes to the dead-letter queue.
MAX_RECEIVES: Final = 3
# Messages per settle invocation. Each resumes a paused run to its end, one after
# another: a small batch keeps an invocation well inside its timeout when the model is slow.
BATCH_SIZE: Final = 5


class SqsSettleQueue:
    """The `SettleQueue` port on an SQS queue.

    Args:
        client: A boto3 SQS client.
        queue_url: The settle queue's URL.
    """

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._url = queue_url

    def send(self, messages: Sequence[SettleMessage]) -> None:
        """Send up to ten messages in one `SendMessageBatch`.

        Raises:
            StoreError: the call failed, or SQS refused some entries (the next finder
                run finds their requests again).
        """
        if not 0 < len(messages) <= SEND_BATCH:
            raise ValueError(f"a batch holds 1 to {SEND_BATCH} messages, not {len(messages)}")
        # Entry ids only need to be unique within the call: positions will do.
        entries = [{"Id": str(n), "MessageBody": m.body()} for n, m in enumerate(messages)]
        with translated("enqueue overdue requests"):
            response = self._client.send_message_batch(QueueUrl=self._url, Entries=entries)
        if failed := response.get("Failed"):
            codes = sorted({entry.get("Code", "unknown") for entry in failed})
            raise StoreError(
                f"enqueue overdue requests: {len(failed)} of {len(entries)} refused ({codes})"
            )

    def waiting(self) -> int:
        """SQS's approximate count of messages visible in the queue (not yet taken)."""
        with translated("read the settle queue's depth"):
            response = self._client.get_queue_attributes(
                QueueUrl=self._url, AttributeNames=["ApproximateNumberOfMessages"]
            )
        return int(response["Attributes"]["ApproximateNumberOfMessages"])


def create_settle_queues(
    client: SQSClient, name: str, visibility_timeout_s: int
) -> tuple[str, str]:
    """Create the settle queue and its dead-letter queue on an emulator or empty
    account; their URLs.

    Args:
        client: A boto3 SQS client.
        name: The settle queue's name; the dead-letter queue is `<name>-dead-letters`.
        visibility_timeout_s: How long a received message stays hidden before it is
            delivered again.
    """
    dead = client.create_queue(QueueName=f"{name}-dead-letters")["QueueUrl"]
    dead_arn = client.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    redrive = {"deadLetterTargetArn": dead_arn, "maxReceiveCount": str(MAX_RECEIVES)}
    url = client.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": str(visibility_timeout_s),
            "RedrivePolicy": json.dumps(redrive),
        },
    )["QueueUrl"]
    return url, dead
