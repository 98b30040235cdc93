"""Monitoring as code: every alarm the deployment needs, all notifying one encrypted
topic; one dashboard; the sweeper's failures kept in a dead-letter queue."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Template

from infra.wiring import Stacks
from tests.infra.support import ALL_FUNCTIONS, invoke_config


def _alarms(template: Template) -> list[dict[str, Any]]:
    return [a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()]


def _metric_names(alarm: dict[str, Any]) -> set[str]:
    names = {alarm.get("MetricName")}
    for query in alarm.get("Metrics", []):
        names.add(query.get("MetricStat", {}).get("Metric", {}).get("MetricName"))
    return {str(name) for name in names if name is not None}


def _topic(stacks: Stacks) -> dict[str, Any]:
    topic = stacks.api.monitoring.topic
    return {"Ref": stacks.api.get_logical_id(topic.node.default_child)}  # type: ignore[arg-type]


def test_every_alarm_notifies_the_one_encrypted_topic(
    stacks: Stacks, api_template: Template
) -> None:
    (topic,) = api_template.find_resources("AWS::SNS::Topic").values()
    key_ref = topic["Properties"]["KmsMasterKeyId"]
    (key,) = [
        k
        for name, k in api_template.find_resources("AWS::KMS::Key").items()
        if {"Fn::GetAtt": [name, "Arn"]} == key_ref or {"Ref": name} == key_ref
    ]
    assert key["Properties"]["EnableKeyRotation"] is True
    alarms = _alarms(api_template)
    assert alarms and all(_topic(stacks) in a["AlarmActions"] for a in alarms)
    assert "AlarmTopicArn" in api_template.find_outputs("*")


def test_the_alarms_cover_the_api_the_functions_the_queue_and_interlocks_own_metrics(
    api_template: Template, configured_api_template: Template
) -> None:
    names = [n for a in _alarms(api_template) for n in _metric_names(a)]
    # API Gateway's 5XX rate; its 504s are read from the access log, when there is one
    assert "5XXError" in names and "Api504" not in names
    logged = [n for a in _alarms(configured_api_template) for n in _metric_names(a)]
    assert "Api504" in logged
    # Each function's errors, throttles and duration (near its timeout)
    for metric in ("Errors", "Throttles", "Duration"):
        assert names.count(metric) == len(ALL_FUNCTIONS), metric
    # The sweeper's dead letters, failures and stuck claims; claim conflicts; Bedrock
    for metric in (
        "ApproximateNumberOfMessagesVisible",
        "SweepFailures",
        "StuckClaims",
        "NoticesAbandoned",
        "ClaimConflicts",
        # A hand-over the Web Adapter would route to the wrong path, or one not signed
        "MisroutedHandOvers",
        "ForgedHandOvers",
        "InvocationThrottles",
    ):
        assert metric in names, metric


def test_a_single_forged_hand_over_alarms(stacks: Stacks, api_template: Template) -> None:
    # The resume function answers it 403 (no retry, no dead letter): the metric alone tells
    (alarm,) = [a for a in _alarms(api_template) if "ForgedHandOvers" in _metric_names(a)]
    assert alarm["Namespace"] == "Interlock"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "interlock"}]
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"]) == ("Sum", 300, 1)
    # One in a period: greater than zero
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [_topic(stacks)]
    assert "other than the channels function" in alarm["AlarmDescription"]


def test_one_dashboard(api_template: Template) -> None:
    api_template.resource_count_is("AWS::CloudWatch::Dashboard", 1)


def test_a_failed_sweep_lands_in_an_encrypted_dead_letter_queue(
    stacks: Stacks, api_template: Template
) -> None:
    sweeper = stacks.api.sweeper
    queue = stacks.api.get_logical_id(sweeper.dead_letters.node.default_child)  # type: ignore[arg-type]
    properties = invoke_config(stacks, api_template, "sweeper")
    assert properties["MaximumRetryAttempts"] == 0
    assert properties["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [queue, "Arn"]
    }
    queues = api_template.find_resources("AWS::SQS::Queue")
    assert queues[queue]["Properties"]["SqsManagedSseEnabled"] is True
    policies = json.dumps(api_template.find_resources("AWS::SQS::QueuePolicy"))
    assert "aws:SecureTransport" in policies


def test_alarm_names_hold_no_unresolved_token(api_template: Template) -> None:
    # A token's number moves as the app grows; in a name it would replace the alarm
    alarms = api_template.find_resources("AWS::CloudWatch::Alarm")
    names = [str(a["Properties"].get("AlarmName", "")) for a in alarms.values()]
    assert names and not [n for n in names if "TOKEN" in n.upper()]
    assert [n for n in names if n.endswith("-v1-Fault-Rate-Critical")]
