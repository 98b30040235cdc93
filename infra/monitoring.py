"""Alarms, one dashboard, and the encrypted topic they notify: monitoring as code.

Built with cdk-monitoring-constructs (the API, every function, the settle queue and the
dead-letter queues of the sweeper and of the settle queue: error rates, throttles,
durations near the timeout, queue depth),
plus alarms on Interlock's own metrics and Bedrock's throttling, which it has no
monitor for. Subscribe whatever should hear an alarm (email, a chat integration, an
on-call tool) to the `AlarmTopicArn` output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import cdk_monitoring_constructs as cmc
from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from interlock.config import ModelSpec

from .functions import METRICS_NAMESPACE, SERVICE_NAME

# A burst of server errors, not one: 5 % of requests over three 5-minute periods.
API_5XX_RATE: Final = 0.05
# A turn that runs near the function's timeout risks being cut off mid-run.
DURATION_PERCENT_OF_TIMEOUT: Final = 80
# Two workers answering one card at once is normal now and then; many is a stampede.
CLAIM_CONFLICTS_PER_5_MIN: Final = 10
PERIOD: Final = Duration.minutes(5)
# The shortest wait KMS allows before deleting a key: a torn-down stage's alarm key (its
# removal policy is the stage's, `infra.wiring`) is gone a week after `cdk destroy`.
ALARM_KEY_PENDING_WINDOW: Final = Duration.days(7)


class Monitoring(Construct):
    """The deployment's alarms and dashboard.

    Attributes:
        topic: The encrypted SNS topic every alarm notifies.
        alarms: Interlock's own alarms (beside the facade's), by name.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api: apigw.RestApi,
        stage: str,
        access_logs: logs.ILogGroup | None,
        functions: Mapping[str, lambda_.IFunction],
        dead_letters: Mapping[str, sqs.IQueue],
        queues: Mapping[str, sqs.IQueue],
        model: ModelSpec,
    ) -> None:
        """Create the topic, the alarms and the dashboard.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            api: The REST API.
            stage: Its stage's name, as a literal (the stage's own attribute is a token
                whose number moves as the app grows, and would rename the alarm).
            access_logs: The API's access log group (its 504s are counted from it), or
                None when the API keeps no access logs.
            functions: Every function, by a name for its alarms.
            dead_letters: Every dead-letter queue, by a name for its alarm: any message
                in one alarms.
            queues: Work queues, by name: on the dashboard, alarmed through their
                dead-letter queues and their consumers' alarms.
            model: The agent's model (Bedrock's throttling of it is alarmed).
        """
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        key = kms.Key(
            self,
            "AlarmKey",
            enable_key_rotation=True,
            description="Encrypts Interlock's alarm topic.",
            pending_window=ALARM_KEY_PENDING_WINDOW,
        )
        # CloudWatch publishes alarms to the encrypted topic, so it must use the key.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                resources=["*"],
            )
        )
        self.topic = sns.Topic(self, "Alarms", master_key=key, enforce_ssl=True)
        CfnOutput(stack, "AlarmTopicArn", value=self.topic.topic_arn)
        facade = cmc.MonitoringFacade(
            self,
            "Facade",
            alarm_factory_defaults=cmc.AlarmFactoryDefaults(
                alarm_name_prefix=stack.stack_name,
                actions_enabled=True,
                action=cmc.SnsAlarmActionStrategy(on_alarm_topic=self.topic),
                datapoints_to_alarm=3,
            ),
            dashboard_factory=cmc.DefaultDashboardFactory(
                self, "Dashboards", dashboard_name_prefix=stack.stack_name, create_dashboard=True
            ),
        )
        facade.monitor_api_gateway(
            api=api,
            api_stage=stage,
            add5_xx_fault_rate_alarm={
                "Critical": cmc.ErrorRateThreshold(max_error_rate=API_5XX_RATE)
            },
        )
        for name, function in functions.items():
            facade.monitor_lambda_function(
                lambda_function=function,
                alarm_friendly_name=f"{name}-function",
                add_fault_count_alarm={"Critical": cmc.ErrorCountThreshold(max_error_count=0)},
                add_throttles_count_alarm={"Warning": cmc.ErrorCountThreshold(max_error_count=0)},
                add_latency_p99_alarm={
                    "Warning": cmc.LatencyTimeoutPercentageThreshold(
                        max_latency_percentage_of_timeout=DURATION_PERCENT_OF_TIMEOUT
                    )
                },
            )
        for name, queue in dead_letters.items():
            facade.monitor_sqs_queue(
                queue=queue,
                alarm_friendly_name=name,
                add_queue_max_size_alarm={
                    "Critical": cmc.MaxMessageCountThreshold(max_message_count=0)
                },
            )
        for name, queue in queues.items():
            facade.monitor_sqs_queue(queue=queue, alarm_friendly_name=name)
        own = self._own_metrics(access_logs, model)
        self.alarms = {
            name: cloudwatch.Alarm(
                self,
                name,
                alarm_name=f"{stack.stack_name}-{name}",
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
            for name, (metric, threshold, description) in own.items()
        }
        for alarm in self.alarms.values():
            alarm.add_alarm_action(actions.SnsAction(self.topic))
        facade.monitor_custom(
            alarm_friendly_name="interlock",
            human_readable_name="Interlock",
            metric_groups=[
                cmc.CustomMetricGroup(title=name, metrics=[metric])
                for name, (metric, _, _) in own.items()
            ],
        )

    def _own_metrics(
        self, access_logs: logs.ILogGroup | None, model: ModelSpec
    ) -> dict[str, tuple[cloudwatch.Metric, float, str]]:
        """Interlock's metrics, each with the threshold it alarms above and why."""

        def emf(name: str, statistic: str = "Sum") -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=METRICS_NAMESPACE,
                metric_name=name,
                dimensions_map={"service": SERVICE_NAME},
                statistic=statistic,
                period=PERIOD,
            )

        found: dict[str, tuple[cloudwatch.Metric, float, str]] = {}
        if access_logs is not None:
            # API Gateway counts a 504 among its 5XX errors; the access log says which.
            timeouts = logs.MetricFilter(
                self,
                "Api504",
                log_group=access_logs,
                filter_pattern=logs.FilterPattern.number_value("$.status", "=", 504),
                metric_namespace=METRICS_NAMESPACE,
                metric_name="Api504",
                metric_value="1",
                default_value=0,
            )
            found["ApiTimeouts"] = (
                timeouts.metric(statistic="Sum", period=PERIOD),
                0,
                "API Gateway answered 504: an integration gave no answer in time.",
            )
        found |= {
            "ClaimConflicts": (
                emf("ClaimConflicts"),
                CLAIM_CONFLICTS_PER_5_MIN,
                "Many answers raced for the same cards (a client retrying in a loop?).",
            ),
            "SweepFailures": (
                emf("SweepFailures"),
                0,
                "An overdue request could not be settled; a later try or the claim cap ends it.",
            ),
            "StuckClaims": (
                emf("StuckClaims", "Maximum"),
                0,
                "A request stayed claimed past its lease: its worker died mid-run.",
            ),
            "NoticesAbandoned": (
                emf("NoticesAbandoned"),
                0,
                "A Slack or Telegram post or edit kept failing until its request's TTL.",
            ),
            "MisroutedHandOvers": (
                emf("MisroutedHandOvers"),
                0,
                "A resume or tap handed to the resume function that the Web Adapter would "
                "route to the wrong path (a release that changed the event's shape?).",
            ),
            # Refused, not failed (no retry, no dead letter): only this alarm tells.
            "ForgedHandOvers": (
                emf("ForgedHandOvers"),
                0,
                "The resume function refused a tap hand-over whose signature did not "
                "verify: something other than the channels function invoked it with a tap "
                "the channels function did not sign.",
            ),
        }
        if model.provider == "bedrock":
            found["BedrockThrottles"] = (
                cloudwatch.Metric(
                    namespace="AWS/Bedrock",
                    metric_name="InvocationThrottles",
                    dimensions_map={"ModelId": model.model_id},
                    statistic="Sum",
                    period=PERIOD,
                ),
                0,
                "Bedrock throttled the agent's model: turns slow down or fail.",
            )
        return found
