"""The functions: one minimal role each, the layer, sizes that fit their work."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from infra.functions import environment
from infra.permissions import (
    WILDCARD_REASONS,
    FunctionName,
    config_statements,
    model_statements,
    runtime_statements,
    star_reason,
    wildcard_findings,
)
from infra.settings import ModelChoice, Settings
from infra.storage import StorageRefs
from infra.wiring import Stacks
from interlock.api.routes import STREAMED
from tests.infra.support import (
    AGENT_CONFIG_PARAMETER,
    ALL_FUNCTIONS,
    BUCKET_ARN,
    SITE_ORIGIN,
    TABLE_ARN,
    actions,
    by_sid,
    function_construct,
    listed,
    logical_id,
    resource,
    statements,
)

EXPECTED_ACTIONS = {
    # Invoking the resume function: answers posted to the one endpoint are handed over
    "run": [
        "bedrock:InvokeModel",
        "bedrock:InvokeModelWithResponseStream",
        "dynamodb:BatchGetItem",
        "dynamodb:ConditionCheckItem",
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "lambda:InvokeFunction",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:PutObject",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ],
    "resume": [
        "bedrock:InvokeModel",
        "bedrock:InvokeModelWithResponseStream",
        "dynamodb:BatchGetItem",
        "dynamodb:ConditionCheckItem",
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        # Verifying a handed-over tap's signature with the hand-over key
        "kms:VerifyMac",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:GetObject",
        "s3:ListBucket",
        "s3:PutObject",
        # Its own dead letters: a handed-over tap Lambda gave up on
        "sqs:SendMessage",
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
        "s3:ListBucket",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ],
    # The administrators' routes: puts, gets and deletes, only of their own rows
    "admin": [
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ],
    # The webhooks: two reads and a delivery's put, and the signed hand-over of a tap
    "channels": [
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "kms:GenerateMac",
        "lambda:InvokeFunction",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ],
    # The finder: the index query, the settle queue's depth and sends, its own dead letters
    "sweeper": [
        "dynamodb:Query",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "sqs:GetQueueAttributes",
        "sqs:SendMessage",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ],
    # No BatchWriteItem anywhere an agent runs: its grants are fenced transactions. The
    # SQS actions are the event source's polling of the settle queue
    "settle": [
        "bedrock:InvokeModel",
        "bedrock:InvokeModelWithResponseStream",
        "dynamodb:BatchGetItem",
        "dynamodb:ConditionCheckItem",
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:GetObject",
        "s3:PutObject",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:ReceiveMessage",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ],
}


def _objects(prefix: str) -> dict[str, Any]:
    return {"Fn::Join": ["", [BUCKET_ARN, f"/{prefix}*"]]}


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_each_role_allows_exactly_its_actions(
    stacks: Stacks, api_template: Template, name: FunctionName
) -> None:
    found = statements(stacks, api_template, name)
    assert actions(found) == EXPECTED_ACTIONS[name]
    # Every denial is about the table's rows (which ones: test_least_privilege.py)
    denials = [statement for statement in found if statement["Effect"] == "Deny"]
    assert all(statement["Resource"] == TABLE_ARN for statement in denials)


def test_requests_calls_no_model_and_writes_no_object(
    stacks: Stacks, api_template: Template
) -> None:
    allowed = actions(statements(stacks, api_template, "requests"))
    assert not {a for a in allowed if a.startswith("bedrock:") or a.startswith("s3:Put")}


@pytest.mark.parametrize(
    ("name", "reads", "writes"),
    [
        ("run", None, ["snapshots/"]),
        ("resume", ["snapshots/", "answers/", "steps/"], ["snapshots/", "answers/", "steps/"]),
        ("requests", ["answers/"], None),
        ("settle", ["snapshots/", "steps/"], ["snapshots/", "answers/", "steps/"]),
        ("sweeper", None, None),
    ],
)
def test_object_access_is_limited_to_prefixes(
    stacks: Stacks,
    api_template: Template,
    name: FunctionName,
    reads: list[str] | None,
    writes: list[str] | None,
) -> None:
    found = by_sid(statements(stacks, api_template, name))
    for sid, prefixes in (("ReadPayloads", reads), ("WritePayloads", writes)):
        if prefixes is None:
            assert sid not in found
        else:
            resources = listed(found[sid]["Resource"])
            assert sorted(map(str, resources)) == sorted(str(_objects(p)) for p in prefixes)


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_only_answer_readers_may_list_and_only_answer_keys(
    stacks: Stacks, api_template: Template, name: FunctionName
) -> None:
    # Given that S3 answers a GET for a missing key with 404 only to a caller that may list
    # it, and that an answer replayed after its lifecycle expiry is missing by design
    found = by_sid(statements(stacks, api_template, name))
    if name not in ("resume", "requests"):
        assert "ListPayloads" not in found
        return

    # Then a function that reads answers may list the bucket under answers/ and no wider
    listing = found["ListPayloads"]
    assert listing["Action"] == "s3:ListBucket"
    assert listing["Resource"] == BUCKET_ARN
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["answers/*"]}}


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_table_access_is_the_table_and_only_the_sweeper_reads_the_index(
    stacks: Stacks, api_template: Template, name: FunctionName
) -> None:
    found = by_sid(statements(stacks, api_template, name))
    if name == "sweeper":
        # The finder reads the index alone, never an item
        assert "Table" not in found
        index = found["ExpiryIndex"]
        assert index["Action"] == "dynamodb:Query"
        assert index["Resource"] == [
            {"Fn::Join": ["", [TABLE_ARN, "/index/by_expiry"]]},
            {"Fn::Join": ["", [TABLE_ARN, "/index/by_lease"]]},
            {"Fn::Join": ["", [TABLE_ARN, "/index/by_notice"]]},
        ]
    elif name in ("admin", "channels"):
        # Only rows of named partitions (which ones: test_least_privilege.py)
        assert "Table" not in found
        rows = [s for sid, s in found.items() if sid.startswith("TableRows")]
        assert rows
        for statement in rows:
            assert statement["Resource"] == TABLE_ARN
            assert "dynamodb:LeadingKeys" in statement["Condition"]["ForAllValues:StringLike"]
    else:
        assert found["Table"]["Resource"] == TABLE_ARN
        assert "ExpiryIndex" not in found


@pytest.mark.parametrize("name", ["run", "resume", "settle"])
def test_model_access_is_one_profile_and_its_model(
    stacks: Stacks, api_template: Template, name: FunctionName
) -> None:
    found = by_sid(statements(stacks, api_template, name))
    profile = found["InvokeProfile"]["Resource"]
    assert profile["Fn::Join"][1][-1] == (
        ":inference-profile/global.anthropic.claude-sonnet-4-5-20250929-v1:0"
    )
    routed = found["InvokeModelThroughProfile"]
    # Any region, or none (a global profile's models are named without one)
    assert routed["Resource"]["Fn::Join"][1][-1] == (
        ":bedrock:*::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0"
    )
    assert routed["Condition"] == {"StringEquals": {"bedrock:InferenceProfileArn": profile}}


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_logs_go_to_the_functions_own_group(
    stacks: Stacks, api_template: Template, name: FunctionName
) -> None:
    construct = function_construct(stacks, name)
    group = stacks.api.get_logical_id(construct.log_group.node.default_child)
    logs = by_sid(statements(stacks, api_template, name))["Logs"]
    assert logs["Resource"] == {"Fn::GetAtt": [group, "Arn"]}
    function = resource(stacks, api_template, construct.function)["Properties"]
    # JSON records, at the deployment's level (the platform's own at WARN)
    assert function["LoggingConfig"] == {
        "LogGroup": {"Ref": group},
        "LogFormat": "JSON",
        "ApplicationLogLevel": "INFO",
        "SystemLogLevel": "WARN",
    }
    assert api_template.to_json()["Resources"][group]["Properties"]["RetentionInDays"] == 30


def test_roles_are_separate_and_hold_no_other_policy(api_template: Template) -> None:
    # One per function (the account's API Gateway role only when asked for)
    api_template.resource_count_is("AWS::IAM::Role", len(ALL_FUNCTIONS))
    api_template.resource_count_is("AWS::IAM::Policy", 0)
    api_template.resource_count_is("AWS::IAM::ManagedPolicy", 0)
    for role in api_template.find_resources("AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]


@pytest.mark.parametrize(
    ("name", "timeout", "memory"),
    [
        ("run", 300, 1024),
        ("resume", 300, 1024),
        ("requests", 10, 256),
        ("admin", 10, 256),
        ("sweeper", 60, 256),
        ("settle", 300, 1024),
    ],
)
def test_function_runtime_size_and_tracing(
    stacks: Stacks, api_template: Template, name: FunctionName, timeout: int, memory: int
) -> None:
    construct = function_construct(stacks, name)
    properties = resource(stacks, api_template, construct.function)["Properties"]
    layers = api_template.find_resources("AWS::Lambda::LayerVersion")
    by_description = {
        layer["Properties"]["Description"].split()[1]: key for key, layer in layers.items()
    }
    assert set(by_description) == {"interlock", "agent"}
    assert properties["Runtime"] == "python3.12"
    assert properties["Architectures"] == ["arm64"]
    streams = name in STREAMED
    assert properties["Handler"] == ("run.sh" if streams else "handler.lambda_handler")
    # Only the functions that run the agent carry its layer
    expected = ["interlock"] if name in ("requests", "admin", "sweeper") else ["interlock", "agent"]
    own = [ref["Ref"] for ref in properties["Layers"] if isinstance(ref, dict) and "Ref" in ref]
    assert sorted(own) == sorted(by_description[kind] for kind in expected)
    # and only the streaming ones the Web Adapter, AWS's layer in the stack's region
    adapter = [ref for ref in properties["Layers"] if not (isinstance(ref, dict) and "Ref" in ref)]
    if streams:
        (arn,) = adapter
        text = "".join(p if isinstance(p, str) else "|" for p in arn["Fn::Join"][1])
        assert text == "arn:|:lambda:|:753240598075:layer:LambdaAdapterLayerArm64:25"
    else:
        assert adapter == []
    assert properties["TracingConfig"] == {"Mode": "Active"}
    assert (properties["Timeout"], properties["MemorySize"]) == (timeout, memory)


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_environment_names_storage_and_powertools(
    stacks: Stacks, api_template: Template, name: FunctionName
) -> None:
    construct = function_construct(stacks, name)
    properties = resource(stacks, api_template, construct.function)["Properties"]
    output = {"StackName": "InterlockStorage"}
    expected = {
        "INTERLOCK_TABLE": {"Fn::GetStackOutput": {**output, "OutputName": "TableName"}},
        "INTERLOCK_BUCKET": {"Fn::GetStackOutput": {**output, "OutputName": "BucketName"}},
        "INTERLOCK_REQUEST_TTL_S": "86400",
        "INTERLOCK_LEASE_MS": "30000",
        "POWERTOOLS_SERVICE_NAME": "interlock",
        "POWERTOOLS_METRICS_NAMESPACE": "Interlock",
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }
    if name not in ("sweeper", "settle", "channels"):
        # Unset in context: the card page's own CloudFront URL
        expected["INTERLOCK_ALLOWED_ORIGIN"] = SITE_ORIGIN
    if name == "sweeper":
        # Where the finder sends each overdue request
        queue = stacks.api.settle.queue.node.default_child
        expected["INTERLOCK_SETTLE_QUEUE_URL"] = {"Ref": stacks.api.get_logical_id(queue)}  # type: ignore[arg-type]
    if name not in ("requests", "admin", "channels", "sweeper"):
        expected["INTERLOCK_MODEL"] = "bedrock:global.anthropic.claude-sonnet-4-5-20250929-v1:0"
        expected["INTERLOCK_AGENT"] = "examples.analyst:build"
    if name in STREAMED:
        # The Web Adapter runs the app and streams its answers; the app serves this one
        expected |= {
            "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
            "AWS_LWA_INVOKE_MODE": "response_stream",
            "AWS_LWA_PORT": "8080",
            "AWS_LWA_PASS_THROUGH_PATH": "/events",
            # a tap hand-over that failed is a failed invocation: retried, then queued
            "AWS_LWA_ERROR_STATUS_CODES": "502",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "INTERLOCK_FUNCTION": name,
        }
    if name in ("run", "channels"):
        # The function it hands resumes (or taps) to, and which it alone may invoke
        resume = stacks.api.functions["resume"].function
        expected["INTERLOCK_RESUME_FUNCTION"] = {
            "Ref": stacks.api.get_logical_id(resume.node.default_child)
        }
    if name in ("channels", "resume"):
        # The key the channels function signs a tap with and the resume function verifies
        key = logical_id(stacks, stacks.api.hand_over_key)
        expected["INTERLOCK_HAND_OVER_KEY"] = {"Fn::GetAtt": [key, "Arn"]}
    if name in ("run", "resume"):
        # The pool and its one sign-in client, to verify a person's ID token against
        auth = stacks.api.auth
        expected["INTERLOCK_USER_POOL_ID"] = {"Ref": logical_id(stacks, auth.user_pool)}
        expected["INTERLOCK_USER_POOL_CLIENT_IDS"] = {"Ref": logical_id(stacks, auth.client)}
    # No per-agent configuration parameter was named, so none is read
    assert properties["Environment"]["Variables"] == expected


def test_environment_carries_the_configured_settings() -> None:
    # Given settings read from context, as `-c interlock:...=...` passes them
    app = App(
        context={
            "interlock:model": "bedrock:eu.amazon.nova-pro-v1:0",
            "interlock:requestTtlSeconds": "3600",
            "interlock:leaseMs": 45000,
            "interlock:allowedOrigin": "https://cards.example.com/",
            "interlock:agentConfigParameter": "support-agent",
        }
    )
    settings = Settings.from_context(app.node)
    storage = StorageRefs("table", "table-arn", "bucket", "bucket-arn")

    # When each is given the origin its stack gives it (the API's functions only)
    origin = settings.allowed_origin
    run, requests = (environment(name, storage, settings, origin) for name in ("run", "requests"))
    settle, sweeper = (environment(name, storage, settings) for name in ("settle", "sweeper"))

    # Then every function shares the store policy and the agent's document; only the API's
    # functions get the origin, and only agents the model
    assert run["INTERLOCK_MODEL"] == settle["INTERLOCK_MODEL"] == "bedrock:eu.amazon.nova-pro-v1:0"
    assert "INTERLOCK_MODEL" not in requests and "INTERLOCK_MODEL" not in sweeper
    assert "INTERLOCK_ALLOWED_ORIGIN" not in settle and "INTERLOCK_ALLOWED_ORIGIN" not in sweeper
    for variables in (run, requests, settle, sweeper):
        assert variables["INTERLOCK_REQUEST_TTL_S"] == "3600"
        assert variables["INTERLOCK_LEASE_MS"] == "45000"
        assert variables["INTERLOCK_AGENT_CONFIG_PARAM"] == "support-agent"
    for variables in (run, requests):
        assert variables["INTERLOCK_ALLOWED_ORIGIN"] == "https://cards.example.com"


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_no_function_reads_parameters_unless_one_is_named(
    stacks: Stacks, api_template: Template, name: FunctionName
) -> None:
    assert not [a for a in actions(statements(stacks, api_template, name)) if a.startswith("ssm:")]


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_a_named_agent_config_parameter_is_read_by_every_function_and_no_other(
    configured_stacks: Stacks, configured_api_template: Template, name: FunctionName
) -> None:
    # Given an app synthesized with `interlock:agentConfigParameter` set
    found = statements(configured_stacks, configured_api_template, name)
    construct = function_construct(configured_stacks, name)
    properties = resource(configured_stacks, configured_api_template, construct.function)

    # Then the function is told the name and may get exactly that one parameter
    variables = properties["Properties"]["Environment"]["Variables"]
    assert variables["INTERLOCK_AGENT_CONFIG_PARAM"] == AGENT_CONFIG_PARAMETER
    reads = [s for s in found if any(a.startswith("ssm:") for a in listed(s["Action"]))]
    assert reads == [
        {
            "Sid": "AgentConfig",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":ssm:",
                        {"Ref": "AWS::Region"},
                        ":",
                        {"Ref": "AWS::AccountId"},
                        f":parameter{AGENT_CONFIG_PARAMETER}",
                    ],
                ]
            },
        }
    ]
    # And nothing else about the role changed (the configured app has channels too, whose
    # secrets every function but the sweeper and admin read: test_channels_stack.py)
    configured = {"ssm:GetParameter"}
    if name not in ("sweeper", "admin"):
        configured.add("secretsmanager:GetSecretValue")
    assert sorted({*EXPECTED_ACTIONS[name], *configured}) == actions(found)


def test_the_parameter_is_the_operators_not_the_stacks(configured_api_template: Template) -> None:
    configured_api_template.resource_count_is("AWS::SSM::Parameter", 0)


@pytest.mark.parametrize(
    ("name", "arn_suffix"),
    [("support-agent", ":parameter/support-agent"), ("/a/b.c", ":parameter/a/b.c")],
)
def test_parameter_arns_have_one_slash_for_plain_and_hierarchical_names(
    name: str, arn_suffix: str
) -> None:
    stack = Stack(App(), "Probe")
    (statement,) = config_statements(stack, name)
    (arn,) = stack.resolve(statement.resources)
    assert arn["Fn::Join"][1][-1] == arn_suffix


def test_a_foundation_model_is_granted_in_the_stack_region_only() -> None:
    stack = Stack(App(), "Probe")
    (statement,) = model_statements(stack, ModelChoice.parse("bedrock:amazon.nova-pro-v1:0"))
    (arn,) = stack.resolve(statement.resources)
    assert arn["Fn::Join"][1] == [
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


def test_a_grant_on_every_resource_is_explained_by_its_statement() -> None:
    # Given a role's statements, one of which (X-Ray's) names the resource "*"
    log_group = logs.LogGroup(Stack(App(), "Probe"), "Logs")
    granted = runtime_statements(log_group)

    # Then the reason for the Serverless finding names that statement and why
    reason = star_reason(granted)
    assert reason is not None
    assert f"Tracing: {WILDCARD_REASONS['Tracing']}" in reason
    assert "Logs" not in reason
    # And a role without such a grant has nothing to explain
    assert star_reason([s for s in granted if s.sid != "Tracing"]) is None


@pytest.mark.parametrize(
    ("action", "resource"), [("s3:*", "arn:aws:s3:::bucket"), ("s3:GetObject", "*")]
)
def test_a_grant_on_everything_nobody_explained_fails_the_synth(action: str, resource: str) -> None:
    # Given a statement granting a whole service, or on every resource, with no reason
    statement = iam.PolicyStatement(sid="Everything", actions=[action], resources=[resource])

    # Then it is refused rather than acknowledged
    with pytest.raises(ValueError, match="Everything"):
        star_reason([statement])


def test_a_scripted_model_gets_no_model_access() -> None:
    assert model_statements(Stack(App(), "Probe"), ModelChoice.parse("scripted")) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("bedrock", "bedrock:global.anthropic.claude-sonnet-4-5-20250929-v1:0"),
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
        {"interlock:sweepEveryMinutes": "0"},
        # A timed-out card would sit open for hours past its deadline
        {"interlock:sweepEveryMinutes": 61},
        # Names only: a role is scoped to one parameter of this account and region
        {"interlock:agentConfigParameter": "arn:aws:ssm:us-east-1:1:parameter/agent"},
        {"interlock:agentConfigParameter": "/interlock/*"},
        {"interlock:agentConfigParameter": "interlock/agent"},
        # Values the runtime would refuse at cold start fail the synth instead
        {"interlock:leaseMs": 1000},
        {"interlock:requestTtlSeconds": 30},
        # The agent: a factory reference, and the package it starts with
        {"interlock:agent": "examples.analyst"},
        {"interlock:agent": "other.agent:build"},
        {"interlock:agentPackage": "shared"},
        {"interlock:agentRequirements": "no-such-requirements.txt"},
    ],
)
def test_unusable_settings_fail_the_synth(context: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="interlock:"):
        Settings.from_context(App(context=context).node)
