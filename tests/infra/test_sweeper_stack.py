"""The expiry sweeper: a scheduled function outside the API, querying only the expiry index."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.wiring import Stacks
from interlock.adapters.schema import EXPIRY_INDEX, LEASE_INDEX, NOTICE_INDEX
from interlock.api.routes import FUNCTIONS, ROUTES
from tests.infra.support import (
    TABLE_ARN,
    by_sid,
    invoke_config,
    listed,
    resource,
    statements,
)

Resources = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def resources(api_template: Template) -> Resources:
    found: Resources = api_template.to_json()["Resources"]
    return found


def _of_type(resources: Resources, kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in resources.values() if r["Type"] == kind]


def _function_ref(stacks: Stacks) -> dict[str, Any]:
    return {"Fn::GetAtt": [_logical_id(stacks, stacks.api.sweeper.function), "Arn"]}


def _logical_id(stacks: Stacks, construct: Any) -> str:
    return stacks.api.get_logical_id(construct.node.default_child)


def test_a_rule_invokes_the_sweeper_every_minute(stacks: Stacks, resources: Resources) -> None:
    (rule,) = _of_type(resources, "AWS::Events::Rule")
    assert rule["ScheduleExpression"] == "rate(1 minute)"
    assert rule["State"] == "ENABLED"
    (target,) = rule["Targets"]
    assert target["Arn"] == _function_ref(stacks)
    # The next sweep does a failed one's work; a retry would only overlap it
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 0}


def test_the_interval_comes_from_context(
    configured_stacks: Stacks, configured_api_template: Template
) -> None:
    # Given `interlock:sweepEveryMinutes=5`
    (rule,) = configured_api_template.find_resources("AWS::Events::Rule").values()
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    invoke = invoke_config(configured_stacks, configured_api_template, "sweeper")
    assert invoke["MaximumEventAgeInSeconds"] == 300


def test_only_its_rule_may_invoke_the_sweeper(stacks: Stacks, resources: Resources) -> None:
    sweeper = _function_ref(stacks)
    permissions = _of_type(resources, "AWS::Lambda::Permission")
    invokers = [p for p in permissions if p["FunctionName"] == sweeper]
    (rule_id,) = [k for k, r in resources.items() if r["Type"] == "AWS::Events::Rule"]
    assert invokers == [
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": sweeper,
            "Principal": "events.amazonaws.com",
            "SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]},
        }
    ]


def test_a_failed_sweep_is_not_retried_by_lambda(stacks: Stacks, api_template: Template) -> None:
    invoke = invoke_config(stacks, api_template, "sweeper")
    assert invoke["FunctionName"] == {"Ref": _logical_id(stacks, stacks.api.sweeper.function)}
    assert (invoke["MaximumRetryAttempts"], invoke["MaximumEventAgeInSeconds"]) == (0, 60)


def test_sweeps_may_overlap(stacks: Stacks, api_template: Template) -> None:
    # Racing sweepers settle each request once (one conditional claim), so a slow sweep
    # must not hold up the next: no reserved concurrency
    function = resource(stacks, api_template, stacks.api.sweeper.function)["Properties"]
    assert "ReservedConcurrentExecutions" not in function


def test_the_sweeper_is_not_behind_the_api() -> None:
    assert "sweeper" not in FUNCTIONS
    assert {route.function for route in ROUTES} == set(FUNCTIONS)


def test_its_query_reaches_the_expiry_lease_and_notice_indexes_alone(
    stacks: Stacks, api_template: Template
) -> None:
    found = by_sid(statements(stacks, api_template, "sweeper"))
    queries = {sid for sid, s in found.items() if "dynamodb:Query" in listed(s["Action"])}
    # The index query is the finder itself; it reads no item of the table
    assert queries == {"ExpiryIndex"}
    assert "Table" not in found
    assert found["ExpiryIndex"] == {
        "Sid": "ExpiryIndex",
        "Effect": "Allow",
        "Action": "dynamodb:Query",
        "Resource": [
            {"Fn::Join": ["", [TABLE_ARN, f"/index/{EXPIRY_INDEX}"]]},
            {"Fn::Join": ["", [TABLE_ARN, f"/index/{LEASE_INDEX}"]]},
            {"Fn::Join": ["", [TABLE_ARN, f"/index/{NOTICE_INDEX}"]]},
        ],
    }
