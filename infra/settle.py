"""The settle queue and its consumer: overdue requests settled a few at a time.

The expiry finder (`infra.sweeper`) puts one message per overdue request on the queue;
the `settle` function takes them in small batches, with a bounded number of
invocations at once, and settles each request by its kind's timeout policy
(`interlock.settling`). A record that raises is reported as a batch item failure and
delivered again; after `MAX_RECEIVES` receives SQS moves it to the dead-letter queue,
whose depth is alarmed (`infra.monitoring`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from interlock.adapters.queue import BATCH_SIZE, MAX_RECEIVES

from .functions import SIZING, InterlockFunction, dead_letter_queue
from .permissions import queue_statements
from .settings import Settings
from .storage import StorageRefs

# A finder run sends its messages within seconds; waiting this long fills the batches.
MAX_BATCHING_WINDOW: Final = Duration.seconds(5)
# Settling competes with people's turns for the model's throughput and the table's
# capacity: at most this many batches at once, however many requests are overdue.
MAX_CONCURRENCY: Final = 4
# AWS's guidance for a queue a function consumes: hide a received message for at least
# six times the function's timeout, so a batch that is retried by the poller (throttling)
# is not delivered again while it still runs.
VISIBILITY_TIMEOUT: Final = Duration.seconds(6 * SIZING["settle"].timeout.to_seconds())
# The index is the list of what is overdue, so an old message is worth nothing: the
# finder sends a new one. The dead-letter queue keeps its messages longer than the queue
# (`DEAD_LETTER_RETENTION`; for a standard queue their age counts from the first send).
QUEUE_RETENTION: Final = Duration.days(1)


class Settle(InterlockFunction):
    """The settle function, its queue, the queue's dead letters and the event source.

    Attributes:
        queue: The settle queue the finder sends to.
        dead_letters: Where a message goes after `MAX_RECEIVES` failed receives.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        layer: lambda_.ILayerVersion,
        agent_layer: lambda_.ILayerVersion,
        storage: StorageRefs,
        settings: Settings,
        channel_secrets: Mapping[str, secretsmanager.ISecret] | None = None,
        page_url: str | None = None,
        model_secret: secretsmanager.ISecret | None = None,
    ) -> None:
        """Create the queues, the function and its event source.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            layer: The layer carrying `interlock` and its dependencies.
            agent_layer: The layer carrying the user's agent (settling runs it).
            storage: The table and bucket.
            settings: The deployment's settings.
            channel_secrets: The channels' secrets (a settled card's posts are edited).
            page_url: The card page's URL.
            model_secret: The OpenAI-compatible endpoint's key, if that is the model.
        """
        super().__init__(
            scope,
            construct_id,
            name="settle",
            layer=layer,
            agent_layer=agent_layer,
            storage=storage,
            settings=settings,
            channel_secrets=channel_secrets,
            page_url=page_url,
            model_secret=model_secret,
        )
        self.dead_letters = dead_letter_queue(self, "the settle queue's")
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=VISIBILITY_TIMEOUT,
            retention_period=QUEUE_RETENTION,
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=MAX_RECEIVES, queue=self.dead_letters
            ),
        )
        self.policy.add_statements(*queue_statements(self.queue, consumes=True))
        self.function.add_event_source(
            sources.SqsEventSource(
                self.queue,
                batch_size=BATCH_SIZE,
                max_batching_window=MAX_BATCHING_WINDOW,
                max_concurrency=MAX_CONCURRENCY,
                report_batch_item_failures=True,
            )
        )
        self.acknowledge_no_lambda_dlq(
            "Only its SQS event source invokes it, synchronously: a record that fails "
            "goes back to the queue and, after its last receive, to the queue's "
            "dead-letter queue. A Lambda dead-letter queue serves asynchronous "
            "invocations alone."
        )
        Validations.of(self.function).acknowledge(
            Acknowledgment(
                id="Serverless-LambdaEventSourceMappingDestination",
                reason=(
                    "An SQS event source takes no on-failure destination: the queue's "
                    "redrive policy moves a record that keeps failing to its dead-letter "
                    "queue, whose depth is alarmed."
                ),
            )
        )
