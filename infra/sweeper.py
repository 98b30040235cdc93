"""The expiry sweeper: the `sweeper` handler, run on a schedule rather than behind the API.

Requests nobody answered in time are found through the table's sparse expiry index and
settled by their kind's timeout policy (`interlock.sweeper`). Overlapping sweeps are safe
by design: each request is settled under the same single-write claim as a person's
answer, so one of them wins and the other skips it. The function therefore has no
reserved concurrency: a slow sweep never holds up the next one.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.functions import InterlockFunction
from infra.settings import Settings
from infra.storage import StorageRefs


class Sweeper(InterlockFunction):
    """The sweeper function, with its own role and logs, and the rule that invokes it.

    Attributes:
        schedule: The EventBridge rule invoking the function every
            `Settings.sweep_every_minutes`.
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
    ) -> None:
        """Create the function and its schedule.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            layer: The layer carrying `interlock` and its dependencies.
            agent_layer: The layer carrying the user's agent (settling runs it).
            storage: The table and bucket.
            settings: The deployment's settings, the sweep interval included.
            channel_secrets: The channels' secrets (a settled card's posts are edited).
            page_url: The card page's URL.
        """
        super().__init__(
            scope,
            construct_id,
            name="sweeper",
            layer=layer,
            agent_layer=agent_layer,
            storage=storage,
            settings=settings,
            channel_secrets=channel_secrets,
            page_url=page_url,
        )
        every = Duration.minutes(settings.sweep_every_minutes)
        # A sweep that fails leaves its invocation here (an alarm watches the depth):
        # a trace of every failure, though the next sweep finds the same requests.
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        Validations.of(self.dead_letters).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SQS3",
                reason="This is the sweeper's dead-letter queue; it has none of its own.",
            )
        )
        self.policy.add_statements(
            iam.PolicyStatement(
                sid="DeadLetters",
                actions=["sqs:SendMessage"],
                resources=[self.dead_letters.queue_arn],
            )
        )
        # Neither Lambda nor EventBridge retries a sweep: the next scheduled one finds the
        # same overdue requests, and a retry would only overlap it.
        self.function.configure_async_invoke(
            retry_attempts=0,
            max_event_age=every,
            on_failure=destinations.SqsDestination(self.dead_letters),
        )
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Settles the Interlock requests nobody answered in time.",
            schedule=events.Schedule.rate(every),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
