"""The three functions: one minimal role each, the layer, sizes that fit their work."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from infra.functions import environment
from infra.permissions import model_statements, wildcard_findings
from infra.settings import ModelChoice, Settings
from infra.storage import StorageRefs
from infra.wiring import Stacks
from interlock.api.routes import FUNCTIONS

EXPECTED_ACTIONS = {
    "run": [
        "bedrock:InvokeModel",
        "bedrock:InvokeModelWithResponseStream",
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:PutObject",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ],
    "resume": [
        "bedrock:InvokeModel",
        "bedrock:InvokeModelWithResponseStream",
        "dynamodb:BatchWriteItem",
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:GetObject",
        "s3:PutObject",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ],
    "requests": [
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:GetObject",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ],
}
_OUTPUT = {"Fn::GetStackOutput": {"StackName": "InterlockStorage", "OutputName": "BucketArn"}}
TABLE_ARN = {"Fn::GetStackOutput": {"StackName": "InterlockStorage", "OutputName": "TableArn"}}


def _objects(prefix: str) -> dict[str, Any]:
    return {"Fn::Join": ["", [_OUTPUT, f"/{prefix}*"]]}


def _resource(stacks: Stacks, template: Template, construct: Any) -> dict[str, Any]:
    logical_id = stacks.api.get_logical_id(construct.node.default_child)
    resource: dict[str, Any] = template.to_json()["Resources"][logical_id]
    return resource


def _statements(stacks: Stacks, template: Template, name: str) -> list[dict[str, Any]]:
    role = _resource(stacks, template, stacks.api.functions[name].role)
    (policy,) = role["Properties"]["Policies"]
    statements: list[dict[str, Any]] = policy["PolicyDocument"]["Statement"]
    return statements


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _by_sid(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {statement["Sid"]: statement for statement in statements}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_role_allows_exactly_its_actions(
    stacks: Stacks, api_template: Template, name: str
) -> None:
    statements = _statements(stacks, api_template, name)
    actions = sorted({a for s in statements for a in _listed(s["Action"])})
    assert actions == EXPECTED_ACTIONS[name]
    assert all(statement["Effect"] == "Allow" for statement in statements)


def test_requests_calls_no_model_and_writes_no_object(
    stacks: Stacks, api_template: Template
) -> None:
    statements = _statements(stacks, api_template, "requests")
    actions = {a for s in statements for a in _listed(s["Action"])}
    assert not {a for a in actions if a.startswith("bedrock:") or a.startswith("s3:Put")}


@pytest.mark.parametrize(
    ("name", "reads", "writes"),
    [
        ("run", None, ["snapshots/"]),
        ("resume", ["snapshots/", "answers/"], ["snapshots/", "answers/"]),
        ("requests", ["answers/"], None),
    ],
)
def test_object_access_is_limited_to_prefixes(
    stacks: Stacks,
    api_template: Template,
    name: str,
    reads: list[str] | None,
    writes: list[str] | None,
) -> None:
    statements = _by_sid(_statements(stacks, api_template, name))
    for sid, prefixes in (("ReadPayloads", reads), ("WritePayloads", writes)):
        if prefixes is None:
            assert sid not in statements
        else:
            resources = _listed(statements[sid]["Resource"])
            assert sorted(map(str, resources)) == sorted(str(_objects(p)) for p in prefixes)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_table_access_is_the_table_only(stacks: Stacks, api_template: Template, name: str) -> None:
    # No index ARN: the functions never query the expiry index (the sweeper will)
    table = _by_sid(_statements(stacks, api_template, name))["Table"]
    assert table["Resource"] == TABLE_ARN


@pytest.mark.parametrize("name", ["run", "resume"])
def test_model_access_is_one_profile_and_its_model(
    stacks: Stacks, api_template: Template, name: str
) -> None:
    statements = _by_sid(_statements(stacks, api_template, name))
    profile = statements["InvokeProfile"]["Resource"]
    assert profile["Fn::Join"][1][-1] == (
        ":inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0"
    )
    routed = statements["InvokeModelThroughProfile"]
    assert routed["Resource"]["Fn::Join"][1][-1] == (
        ":bedrock:*::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0"
    )
    assert routed["Condition"] == {"StringEquals": {"bedrock:InferenceProfileArn": profile}}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_logs_go_to_the_functions_own_group(
    stacks: Stacks, api_template: Template, name: str
) -> None:
    construct = stacks.api.functions[name]
    group = stacks.api.get_logical_id(construct.log_group.node.default_child)
    logs = _by_sid(_statements(stacks, api_template, name))["Logs"]
    assert logs["Resource"] == {"Fn::GetAtt": [group, "Arn"]}
    function = _resource(stacks, api_template, construct.function)["Properties"]
    assert function["LoggingConfig"] == {"LogGroup": {"Ref": group}}
    assert api_template.to_json()["Resources"][group]["Properties"]["RetentionInDays"] == 30


def test_roles_are_separate_and_hold_no_other_policy(api_template: Template) -> None:
    api_template.resource_count_is("AWS::IAM::Role", 3)
    api_template.resource_count_is("AWS::IAM::Policy", 0)
    api_template.resource_count_is("AWS::IAM::ManagedPolicy", 0)
    for role in api_template.find_resources("AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]


@pytest.mark.parametrize(
    ("name", "timeout", "memory"),
    [("run", 300, 1024), ("resume", 300, 1024), ("requests", 10, 256)],
)
def test_function_runtime_size_and_tracing(
    stacks: Stacks, api_template: Template, name: str, timeout: int, memory: int
) -> None:
    properties = _resource(stacks, api_template, stacks.api.functions[name].function)["Properties"]
    (layer,) = api_template.find_resources("AWS::Lambda::LayerVersion")
    assert properties["Runtime"] == "python3.12"
    assert properties["Architectures"] == ["x86_64"]
    assert properties["Handler"] == "handler.lambda_handler"
    assert properties["Layers"] == [{"Ref": layer}]
    assert properties["TracingConfig"] == {"Mode": "Active"}
    assert (properties["Timeout"], properties["MemorySize"]) == (timeout, memory)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_environment_names_storage_and_powertools(
    stacks: Stacks, api_template: Template, name: str
) -> None:
    properties = _resource(stacks, api_template, stacks.api.functions[name].function)["Properties"]
    output = {"StackName": "InterlockStorage"}
    expected = {
        "INTERLOCK_TABLE": {"Fn::GetStackOutput": {**output, "OutputName": "TableName"}},
        "INTERLOCK_BUCKET": {"Fn::GetStackOutput": {**output, "OutputName": "BucketName"}},
        "INTERLOCK_REQUEST_TTL_S": "86400",
        "INTERLOCK_LEASE_MS": "30000",
        "INTERLOCK_ALLOWED_ORIGIN": "*",
        "POWERTOOLS_SERVICE_NAME": "interlock",
        "POWERTOOLS_METRICS_NAMESPACE": "Interlock",
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }
    if name != "requests":
        expected["INTERLOCK_MODEL"] = "bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0"
    assert properties["Environment"]["Variables"] == expected


def test_environment_carries_the_configured_settings() -> None:
    # Given settings read from context, as `-c interlock:...=...` passes them
    app = App(
        context={
            "interlock:model": "bedrock:eu.amazon.nova-pro-v1:0",
            "interlock:requestTtlSeconds": "3600",
            "interlock:leaseMs": 45000,
            "interlock:allowedOrigin": "https://cards.example.com/",
        }
    )
    settings = Settings.from_context(app.node)
    storage = StorageRefs("table", "table-arn", "bucket", "bucket-arn")

    # Then every function shares the store policy and origin; only agents get the model
    run, requests = (environment(name, storage, settings) for name in ("run", "requests"))
    assert run["INTERLOCK_MODEL"] == "bedrock:eu.amazon.nova-pro-v1:0"
    assert "INTERLOCK_MODEL" not in requests
    for variables in (run, requests):
        assert variables["INTERLOCK_REQUEST_TTL_S"] == "3600"
        assert variables["INTERLOCK_LEASE_MS"] == "45000"
        assert variables["INTERLOCK_ALLOWED_ORIGIN"] == "https://cards.example.com"


def test_a_foundation_model_is_granted_in_the_stack_region_only() -> None:
    stack = Stack(App(), "Probe")
    (statement,) = model_statements(stack, ModelChoice.parse("bedrock:amazon.nova-pro-v1:0"))
    (resource,) = stack.resolve(statement.resources)
    assert resource["Fn::Join"][1] == [
        "arn:",
        {"Ref": "AWS::Partition"},
        ":bedrock:",
        {"Ref": "AWS::Region"},
        "::foundation-model/amazon.nova-pro-v1:0",
    ]
    assert statement.conditions == {}


def test_a_wildcard_nobody_explained_fails_the_synth() -> None:
    # Given a statement whose wildcard has no recorded reason
    statement = iam.PolicyStatement(
        sid="Everything", actions=["s3:GetObject"], resources=["arn:aws:s3:::bucket/*"]
    )

    # Then it is refused rather than acknowledged
    with pytest.raises(ValueError, match="Everything"):
        wildcard_findings(Stack(App(), "Probe"), [statement])


def test_a_scripted_model_gets_no_model_access() -> None:
    assert model_statements(Stack(App(), "Probe"), ModelChoice.parse("scripted")) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("bedrock", "bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0"),
        ("bedrock:anthropic.claude-3-haiku-20240307-v1:0", None),
        ("scripted", None),
    ],
)
def test_model_specs_normalize(spec: str, expected: str | None) -> None:
    assert ModelChoice.parse(spec).spec == (expected or spec)


@pytest.mark.parametrize(
    "context",
    [
        {"interlock:model": "openai:gpt-4o"},
        {"interlock:model": "bedrock:arn:aws:bedrock:us-east-1:1:inference-profile/x"},
        {"interlock:leaseMs": "0"},
        {"interlock:requestTtlSeconds": "a day"},
        # Longer than a snapshot lives: the store would cut it short without a word
        {"interlock:requestTtlSeconds": 8 * 86_400},
        {"interlock:allowedOrigin": "cards.example.com"},
    ],
)
def test_unusable_settings_fail_the_synth(context: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="interlock:"):
        Settings.from_context(App(context=context).node)
