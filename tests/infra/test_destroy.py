"""`cdk destroy` of a stage that does not keep its data leaves nothing that bills: every
log group and KMS key goes with its stack, and no function logs to a group that Lambda
would create outside the stack. A stage that keeps its data keeps them too."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.wiring import Stacks, build

# The API's access logs add a log group to those of the functions.
EVERY_PART = {"interlock:accessLogs": "on"}
FOLLOWING = ("AWS::Logs::LogGroup", "AWS::KMS::Key")
# The shortest wait KMS allows before it deletes a key.
SHORTEST_PENDING_WINDOW_DAYS = 7


def _templates(stacks: Stacks) -> list[dict[str, Any]]:
    return [
        Template.from_stack(stack).to_json()
        for stack in (stacks.storage, stacks.web, stacks.api, stacks.web_content)
    ]


@pytest.fixture(scope="module")
def torn_down(cdk_context: dict[str, Any]) -> list[dict[str, Any]]:
    """A named stage other than prod: destroyed with its data."""
    return _templates(build(App(context={**cdk_context, **EVERY_PART, "interlock:stage": "dev"})))


@pytest.fixture(scope="module")
def kept(cdk_context: dict[str, Any]) -> list[dict[str, Any]]:
    """The prod stage: its data outlives its stacks."""
    return _templates(build(App(context={**cdk_context, **EVERY_PART, "interlock:stage": "prod"})))


def _following(templates: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for template in templates
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in FOLLOWING
    }


def test_a_torn_down_stage_deletes_every_log_group_and_key(
    torn_down: list[dict[str, Any]],
) -> None:
    found = _following(torn_down)
    for logical_id, resource in found.items():
        assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == (
            "Delete",
            "Delete",
        ), logical_id
    # Each function's, the API's access logs, the page copier's and the bucket emptier's;
    # the alarm topic's key and the hand-over key
    assert sum(r["Type"] == "AWS::Logs::LogGroup" for r in found.values()) >= 10
    assert sum(r["Type"] == "AWS::KMS::Key" for r in found.values()) == 2


def test_a_torn_down_stage_deletes_its_keys_after_the_shortest_wait(
    torn_down: list[dict[str, Any]],
) -> None:
    keys = [r for r in _following(torn_down).values() if r["Type"] == "AWS::KMS::Key"]
    assert keys
    assert all(k["Properties"]["PendingWindowInDays"] == SHORTEST_PENDING_WINDOW_DAYS for k in keys)


def test_a_kept_stage_keeps_every_log_group_and_key(kept: list[dict[str, Any]]) -> None:
    found = _following(kept)
    assert found
    for logical_id, resource in found.items():
        assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == (
            "Retain",
            "Retain",
        ), logical_id


def test_every_function_logs_to_a_log_group_of_its_stack(
    torn_down: list[dict[str, Any]],
) -> None:
    # A function without one has Lambda create `/aws/lambda/<name>` on its first run,
    # which no stack owns: it outlives `cdk destroy` and keeps its logs forever.
    for template in torn_down:
        resources = template["Resources"]
        groups = {i: r for i, r in resources.items() if r["Type"] == "AWS::Logs::LogGroup"}
        names = [group["Properties"].get("LogGroupName") for group in groups.values()]
        for logical_id, function in resources.items():
            if function["Type"] != "AWS::Lambda::Function":
                continue
            # Its logging config names one, or the stack creates the default group itself
            named = function["Properties"].get("LoggingConfig", {}).get("LogGroup", {})
            default = {"Fn::Join": ["", ["/aws/lambda/", {"Ref": logical_id}]]}
            assert named.get("Ref") in groups or default in names, logical_id
