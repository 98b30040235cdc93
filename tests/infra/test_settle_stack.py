"""The settle queue and its consumer: the sweeper (the finder) sends one message per
overdue request; the settle function takes them in small batches, a bounded number at
once, and a message that keeps failing ends in an alarmed dead-letter queue."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from infra.functions import SIZING
from infra.settle import MAX_CONCURRENCY
from infra.wiring import Stacks
from interlock.adapters.queue import BATCH_SIZE, MAX_RECEIVES
from tests.infra.support import by_sid, invoke_config, statements


def _ref(stacks: Stacks, construct: Any) -> str:
    return stacks.api.get_logical_id(construct.node.default_child)


def _arn(stacks: Stacks, construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [_ref(stacks, construct), "Arn"]}


@pytest.fixture(scope="module")
def queues(api_template: Template) -> dict[str, Any]:
    found: dict[str, Any] = api_template.find_resources("AWS::SQS::Queue")
    return found


def test_the_queue_hands_a_message_to_its_dead_letters_after_three_receives(
    stacks: Stacks, queues: dict[str, Any]
) -> None:
    settle = stacks.api.settle
    queue = queues[_ref(stacks, settle.queue)]["Properties"]
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": _arn(stacks, settle.dead_letters),
        "maxReceiveCount": MAX_RECEIVES,
    }
    assert MAX_RECEIVES == 3
    # The dead letters outlive the queue's messages: their age counts from the first send
    dead = queues[_ref(stacks, settle.dead_letters)]["Properties"]
    assert dead["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]
    assert "RedrivePolicy" not in dead


def test_both_queues_are_encrypted_and_refuse_plain_http(
    stacks: Stacks, api_template: Template, queues: dict[str, Any]
) -> None:
    settle = stacks.api.settle
    for construct in (settle.queue, settle.dead_letters):
        assert queues[_ref(stacks, construct)]["Properties"]["SqsManagedSseEnabled"] is True
        api_template.has_resource_properties(
            "AWS::SQS::QueuePolicy",
            {
                "Queues": [{"Ref": _ref(stacks, construct)}],
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Effect": "Deny",
                                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                }
                            )
                        ]
                    )
                },
            },
        )


def test_a_message_stays_hidden_six_times_the_functions_timeout(
    stacks: Stacks, queues: dict[str, Any]
) -> None:
    queue = queues[_ref(stacks, stacks.api.settle.queue)]["Properties"]
    timeout_s = SIZING["settle"].timeout.to_seconds()
    assert queue["VisibilityTimeout"] >= 6 * timeout_s
    assert queue["VisibilityTimeout"] == 1800


def test_the_settle_function_takes_small_batches_with_bounded_concurrency(
    stacks: Stacks, api_template: Template
) -> None:
    settle = stacks.api.settle
    (mapping,) = api_template.find_resources("AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"] == {
        "EventSourceArn": _arn(stacks, settle.queue),
        "FunctionName": {"Ref": _ref(stacks, settle.function)},
        "BatchSize": BATCH_SIZE,
        "MaximumBatchingWindowInSeconds": 5,
        # Only the records that raised are delivered again, never their batch-mates
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "ScalingConfig": {"MaximumConcurrency": MAX_CONCURRENCY},
    }
    assert (BATCH_SIZE, MAX_CONCURRENCY) == (5, 4)


def test_the_sweeper_sends_to_the_queue_and_the_settle_function_consumes_it(
    stacks: Stacks, api_template: Template
) -> None:
    queue = _arn(stacks, stacks.api.settle.queue)
    finder = by_sid(statements(stacks, api_template, "sweeper"))
    assert finder["EnqueueSettles"] == {
        "Sid": "EnqueueSettles",
        "Effect": "Allow",
        "Action": ["sqs:GetQueueAttributes", "sqs:SendMessage"],
        "Resource": queue,
    }
    consumer = by_sid(statements(stacks, api_template, "settle"))
    assert consumer["ConsumeSettles"] == {
        "Sid": "ConsumeSettles",
        "Effect": "Allow",
        "Action": ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"],
        "Resource": queue,
    }
    # Neither reaches the other's side of the queue, nor any other queue
    assert "ConsumeSettles" not in finder and "EnqueueSettles" not in consumer


def test_a_failed_finder_run_lands_in_its_dead_letters_unretried(
    stacks: Stacks, api_template: Template
) -> None:
    sweeper = stacks.api.sweeper
    config = invoke_config(stacks, api_template, "sweeper")
    assert config["FunctionName"] == {"Ref": _ref(stacks, sweeper.function)}
    assert config["MaximumRetryAttempts"] == 0
    assert config["DestinationConfig"] == {
        "OnFailure": {"Destination": _arn(stacks, sweeper.dead_letters)}
    }
    # So does an invocation EventBridge could not make
    (rule,) = api_template.find_resources("AWS::Events::Rule").values()
    (target,) = rule["Properties"]["Targets"]
    assert target["DeadLetterConfig"] == {"Arn": _arn(stacks, sweeper.dead_letters)}


def test_a_message_in_the_settle_dead_letters_raises_an_alarm(
    stacks: Stacks, api_template: Template
) -> None:
    dead = _ref(stacks, stacks.api.settle.dead_letters)
    topic = {"Ref": _ref(stacks, stacks.api.monitoring.topic)}
    alarms = [
        alarm["Properties"]
        for alarm in api_template.find_resources("AWS::CloudWatch::Alarm").values()
        if f'"{dead}"' in str(alarm).replace("'", '"')
    ]
    (alarm,) = alarms
    (query,) = alarm["Metrics"]
    metric = query["MetricStat"]["Metric"]
    assert (metric["Namespace"], metric["MetricName"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
    )
    assert metric["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [dead, "QueueName"]}}
    ]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["AlarmActions"] == [topic]
