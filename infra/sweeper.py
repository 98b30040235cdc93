"""The expiry sweeper: the `sweeper` handler, run on a schedule rather than behind the API.

It is the finder: requests nobody answered in time are found through the table's sparse
expiry index and sent, one message each, to the settle queue (`interlock.fanout`); the
settle function (`infra.settle`) settles them by their kind's timeout policy. Overlapping
runs are safe by design: a request sent twice is settled under the same single-write claim
as a person's answer, so one settle wins and the other skips it. The function therefore
has no reserved concurrency: a slow run never holds up the next one.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from interlock.config import Env

from .functions import InterlockFunction
from .permissions import queue_statements
from .settings import Settings
from .storage import StorageRefs


class Sweeper(InterlockFunction):
    """The sweeper (finder) function, with its own role and logs, and the rule that
    invokes it.

    Attributes:
        schedule: The EventBridge rule invoking the function every
            `Settings.sweep_every_minutes`.
        dead_letters: Where a failed run's invocation lands.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        layer: lambda_.ILayerVersion,
        storage: StorageRefs,
        settings: Settings,
        settle_queue: sqs.IQueue,
    ) -> None:
        """Create the function and its schedule.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            layer: The layer carrying `interlock` and its dependencies (it runs no
                agent, so it carries neither the agent's layer nor the channels').
            storage: The table and bucket.
            settings: The deployment's settings, the sweep interval included.
            settle_queue: Where it sends one message per overdue request.
        """
        super().__init__(
            scope, construct_id, name="sweeper", layer=layer, storage=storage, settings=settings
        )
        self.function.add_environment(Env.SETTLE_QUEUE_URL, settle_queue.queue_url)
        self.policy.add_statements(*queue_statements(settle_queue, consumes=False))
        every = Duration.minutes(settings.sweep_every_minutes)
        # A run that fails leaves its invocation here (an alarm watches the depth): a
        # trace of every failure, though the next run finds the same requests. Neither
        # Lambda nor EventBridge retries a run: the next scheduled one finds the same
        # overdue requests, and a retry would only overlap it.
        self.dead_letters = self.keep_failed_invocations(retry_attempts=0, max_event_age=every)
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Queues the Interlock requests nobody answered in time for settling.",
            schedule=events.Schedule.rate(every),
            # An invocation EventBridge could not make lands with the failed ones.
            targets=[
                targets.LambdaFunction(
                    self.function, retry_attempts=0, dead_letter_queue=self.dead_letters
                )
            ],
        )
        self.acknowledge_no_lambda_dlq(
            "A failed invocation goes to an on-failure destination, the sweeper's "
            "dead-letter queue, which keeps the error with the event."
        )
