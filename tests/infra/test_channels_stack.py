"""The chat platforms in the stack (synthesized with `interlock:channels=slack,telegram`):
a secret per platform, read by exactly the functions that post, edit or verify; the
webhook routes answered by the channels function with no Cognito authorizer; cdk-nag
(the configured synth runs it) and cfn-lint clean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template
from cfnlint.api import lint_file

from infra.api import page_url_for
from infra.wiring import Stacks
from tests.infra.support import (
    ALL_FUNCTIONS,
    by_sid,
    function_construct,
    invoke_config,
    logical_id,
    resource,
    statements,
)
from tests.infra.test_lint import IGNORED_RULES


def _secret_refs(stacks: Stacks) -> dict[str, Any]:
    api = stacks.api
    return {
        channel: {"Ref": api.get_logical_id(secret.node.default_child)}  # type: ignore[arg-type]
        for channel, secret in api.channel_secrets.items()
    }


def test_each_channel_has_a_secret_holding_its_tokens(
    configured_stacks: Stacks, configured_api_template: Template
) -> None:
    secrets = configured_api_template.find_resources("AWS::SecretsManager::Secret")
    assert len(secrets) == 2
    templates = {
        json.dumps(sorted(json.loads(s["Properties"]["SecretString"]))) for s in secrets.values()
    }
    assert templates == {
        json.dumps(["botToken", "signingSecret"]),
        json.dumps(["botToken", "webhookSecret"]),
    }


def test_only_the_secrets_are_read_and_by_every_function_that_uses_them(
    configured_stacks: Stacks, configured_api_template: Template
) -> None:
    refs = _secret_refs(configured_stacks)
    # The sweeper only finds overdue requests and queues them, and the administrators'
    # routes only write links: neither posts nor edits anything
    for name in ("sweeper", "admin"):
        found = by_sid(statements(configured_stacks, configured_api_template, name))
        assert "ChannelSecrets" not in found
    for name in (name for name in ALL_FUNCTIONS if name not in ("sweeper", "admin")):
        found = by_sid(statements(configured_stacks, configured_api_template, name))
        read = found["ChannelSecrets"]
        assert read["Action"] == "secretsmanager:GetSecretValue"
        assert sorted(map(json.dumps, read["Resource"])) == sorted(map(json.dumps, refs.values()))
        construct = function_construct(configured_stacks, name)
        variables = resource(configured_stacks, configured_api_template, construct.function)[
            "Properties"
        ]["Environment"]["Variables"]
        assert {"INTERLOCK_SLACK_SECRET", "INTERLOCK_TELEGRAM_SECRET"} <= set(variables)


def test_the_channels_function_hands_taps_to_the_resume_function_only(
    configured_stacks: Stacks, configured_api_template: Template
) -> None:
    found = by_sid(statements(configured_stacks, configured_api_template, "channels"))
    resume = configured_stacks.api.functions["resume"].function
    assert found["HandOverResumes"]["Resource"] == {
        "Fn::GetAtt": [configured_stacks.api.get_logical_id(resume.node.default_child), "Arn"]  # type: ignore[arg-type]
    }
    assert not any(
        a.startswith(("bedrock:", "s3:")) for s in found.values() for a in _listed(s["Action"])
    )


def test_a_handed_over_tap_lambda_gives_up_on_lands_in_alarmed_dead_letters(
    configured_stacks: Stacks, configured_api_template: Template
) -> None:
    # Given the channels function's asynchronous hand-over of a tap to the resume function
    api, template = configured_stacks.api, configured_api_template
    queue = logical_id(configured_stacks, api.resume_dead_letters)
    arn = {"Fn::GetAtt": [queue, "Arn"]}

    # Then an invocation Lambda gives up on (after its own retries) goes to a queue, with
    # its error, on the version the channels function invokes ($LATEST, by name)
    config = invoke_config(configured_stacks, template, "resume")
    assert config["DestinationConfig"] == {"OnFailure": {"Destination": arn}}
    assert config["Qualifier"] == "$LATEST"
    # Lambda's own retry and age limits are kept
    assert "MaximumRetryAttempts" not in config and "MaximumEventAgeInSeconds" not in config
    # Lambda sends there with the resume function's own role, which may do so
    found = by_sid(statements(configured_stacks, template, "resume"))
    assert found["DeadLetters"] == {
        "Sid": "DeadLetters",
        "Effect": "Allow",
        "Action": "sqs:SendMessage",
        "Resource": arn,
    }
    # Encrypted, kept two weeks, and alarmed at its first message
    properties = template.find_resources("AWS::SQS::Queue")[queue]["Properties"]
    assert properties == {"SqsManagedSseEnabled": True, "MessageRetentionPeriod": 14 * 24 * 3600}
    alarms = [
        alarm["Properties"]
        for alarm in template.find_resources("AWS::CloudWatch::Alarm").values()
        if f'"{queue}"' in json.dumps(alarm)
    ]
    (alarm,) = alarms
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["AlarmActions"] == [{"Ref": logical_id(configured_stacks, api.monitoring.topic)}]


def _listed(value: Any) -> list[str]:
    return value if isinstance(value, list) else [value]


def test_the_configured_templates_pass_cfn_lint(configured_stacks: Stacks) -> None:
    outdir = Path(configured_stacks.api.node.root.outdir)  # type: ignore[attr-defined]
    findings = [
        f"{path.name}: {match.rule.id} {match.message}"
        for path in sorted(outdir.glob("*.template.json"))
        for match in lint_file(path)
        if match.rule.id not in IGNORED_RULES
    ]
    assert findings == []


def test_every_functions_environment_is_one_the_runtime_accepts(
    api_template: Template, configured_api_template: Template
) -> None:
    # Each function reads its settings at start: a value the stack writes that the
    # runtime would refuse (a page URL of '*', say) fails here, not at a cold start.
    from interlock.config import Deployment, assemble

    for template in (api_template, configured_api_template):
        for function in template.find_resources("AWS::Lambda::Function").values():
            variables = function["Properties"].get("Environment", {}).get("Variables", {})
            # Names of resources are references, resolved at deploy; the rest is literal.
            literal = {k: v for k, v in variables.items() if isinstance(v, str)}
            Deployment.from_env(literal)
            assemble(literal)


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        ("https://cards.example.com", "https://cards.example.com"),
        ("*", "https://d1.cloudfront.net"),
        (None, "https://d1.cloudfront.net"),
    ],
)
def test_posts_link_to_the_page_and_never_to_any_origin(allowed: str | None, expected: str) -> None:
    assert page_url_for(allowed, "https://d1.cloudfront.net") == expected
