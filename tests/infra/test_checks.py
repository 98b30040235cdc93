"""cdk-nag's AWS Solutions and Serverless checks and the CDK's own validation: every
finding fixed or explained."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, DefaultStackSynthesizer, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks, NagPack, ServerlessChecks

from infra.snapstart import PUBLISH_WARNING
from infra.web import bootstrap_qualifier
from infra.wiring import Stacks, build
from tests.infra.support import CONFIGURED_QUALIFIER

# Each acknowledgment is a decision someone wrote a reason for; a new one must be added
# here on purpose, never slip in unnoticed.
_BUCKET = '{"Fn::GetStackOutput":{"StackName":"InterlockStorage","OutputName":"BucketArn"}}'
_SNAPSHOTS = f"AwsSolutions-IAM5[Resource::{_BUCKET}/snapshots/*]"
_ANSWERS = f"AwsSolutions-IAM5[Resource::{_BUCKET}/answers/*]"
_STEPS = f"AwsSolutions-IAM5[Resource::{_BUCKET}/steps/*]"
_MODEL_REGIONS = (
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::"
    "foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0]"
)
_TRACING = "AwsSolutions-IAM5[Resource::*]"
_SITE = '{"Fn::GetStackOutput":{"StackName":"InterlockWeb","OutputName":"SiteBucketArn"}}'
_PAGE_COPY = {
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
    "AWSLambdaBasicExecutionRole]",
    "AwsSolutions-IAM5[Action::s3:GetBucket*]",
    "AwsSolutions-IAM5[Action::s3:GetObject*]",
    "AwsSolutions-IAM5[Action::s3:List*]",
    "AwsSolutions-IAM5[Action::s3:Abort*]",
    "AwsSolutions-IAM5[Action::s3:DeleteObject*]",
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
    "cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*]",
    f"AwsSolutions-IAM5[Resource::{_SITE}/*]",
    "AwsSolutions-IAM5[Resource::*]",
    "AwsSolutions-L1",
    # aws-cdk-lib's handler: its runtime, tracing and invocation are aws-cdk-lib's
    "Serverless-LambdaLatestVersion",
    "Serverless-LambdaTracing",
    "Serverless-LambdaDLQ",
}
# Every function runs the Python its layer was built for (not the newest), and none has a
# Lambda dead-letter queue: each is invoked synchronously, or keeps its failed
# asynchronous invocations in an on-failure destination (infra.functions)
_FUNCTION = {"AwsSolutions-L1", "Serverless-LambdaLatestVersion", "Serverless-LambdaDLQ"}
# Every role may upload X-Ray segments, which name no resource
_ROLE = {_TRACING, "Serverless-LambdaStarPermissions"}
# A dead-letter queue has no dead-letter queue of its own
_DEAD_LETTERS = {"AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"}
_SNAPSTART = PUBLISH_WARNING
_PAGE_COPY_HANDLER = (
    "InterlockWebContent/Custom::CDKBucketDeployment8693BB64968944B69AAFB0CC9EB8756C"
)
EXPECTED_ACKNOWLEDGMENTS = {
    "InterlockStorage/Storage/AccessLogs": {"AwsSolutions-S1"},
    "InterlockApi/Run/Role": {*_ROLE, _SNAPSHOTS, _MODEL_REGIONS},
    "InterlockApi/Resume/Role": {*_ROLE, _SNAPSHOTS, _ANSWERS, _STEPS, _MODEL_REGIONS},
    "InterlockApi/Requests/Role": {*_ROLE, _ANSWERS},
    "InterlockApi/Admin/Role": _ROLE,
    # The sweeper only queries the index and queues: no object, no model
    "InterlockApi/Sweeper/Role": _ROLE,
    "InterlockApi/Settle/Role": {*_ROLE, _SNAPSHOTS, _ANSWERS, _STEPS, _MODEL_REGIONS},
    "InterlockApi/Channels/Role": _ROLE,
    "InterlockApi/Run/Function": _FUNCTION,
    "InterlockApi/Resume/Function": _FUNCTION,
    # Restored from SnapStart snapshots of the version their alias names (infra.snapstart)
    "InterlockApi/Requests/Function": {*_FUNCTION, _SNAPSTART},
    "InterlockApi/Channels/Function": {*_FUNCTION, _SNAPSTART},
    "InterlockApi/Admin/Function": _FUNCTION,
    "InterlockApi/Sweeper/Function": _FUNCTION,
    # Its SQS event source takes no destination: the queue's redrive policy is its own
    "InterlockApi/Settle/Function": {*_FUNCTION, "Serverless-LambdaEventSourceMappingDestination"},
    "InterlockApi/Resume/DeadLetters": _DEAD_LETTERS,
    "InterlockApi/Sweeper/DeadLetters": _DEAD_LETTERS,
    "InterlockApi/Settle/DeadLetters": _DEAD_LETTERS,
    # The platforms' webhooks: verified by signature, not by Cognito
    "InterlockApi/Api/Default/channels/slack/interactions/POST": {
        "AwsSolutions-APIG4",
        "AwsSolutions-COG4",
    },
    "InterlockApi/Api/Default/channels/telegram/webhook/POST": {
        "AwsSolutions-APIG4",
        "AwsSolutions-COG4",
    },
    "InterlockApi/Auth/Users": {"AwsSolutions-COG8"},
    # No access logs by default: they need an account-wide role (interlock:accessLogs)
    "InterlockApi/Api/DeploymentStage.v1": {
        "AwsSolutions-APIG1",
        "Serverless-APIGWAccessLogging",
        "AwsSolutions-APIG3",
        "AwsSolutions-APIG6",
    },
    "InterlockWeb/Web/AccessLogs": {"AwsSolutions-S1"},
    "InterlockWeb/Web/Distribution": {
        "AwsSolutions-CFR1",
        "AwsSolutions-CFR2",
        "AwsSolutions-CFR4",
    },
    _PAGE_COPY_HANDLER: _PAGE_COPY,
}
_ANNOTATION_NAMESPACE = "Annotation::"


def _acknowledgments(app: App) -> dict[str, dict[str, str]]:
    """Construct path -> {rule id: reason}, as recorded by `Validations.acknowledge`."""
    found: dict[str, dict[str, str]] = {}
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                rules = {k.removeprefix(_ANNOTATION_NAMESPACE): v for k, v in entry.data.items()}
                found.setdefault(construct.node.path, {}).update(rules)
    return found


def _findings(
    app: App, pack: type[NagPack] = AwsSolutionsChecks
) -> list[tuple[str, str | None, list[str | None]]]:
    report = pack().validate_scope(app)
    return [
        (v.rule_name, v.severity, [r.construct_path for r in v.violating_resources])
        for v in report.violations
    ]


@pytest.mark.parametrize("pack", [AwsSolutionsChecks, ServerlessChecks])
def test_the_checks_leave_no_error_or_warning(app: App, pack: type[NagPack]) -> None:
    # Warnings count too: an unexplained warning is as unreviewed as an error
    assert _findings(app, pack) == []


def test_synthesis_validation_report_is_clean(stacks: Stacks, outdir: Path) -> None:
    report: dict[str, Any] = json.loads((outdir / "validation-report.json").read_text())
    violations = [v for plugin in report["pluginReports"] for v in plugin["violations"]]
    assert violations == []


@pytest.mark.parametrize("name", ["storage", "web", "api", "web_content"])
def test_no_construct_carries_an_error_or_warning_annotation(stacks: Stacks, name: str) -> None:
    annotations = Annotations.from_stack(getattr(stacks, name))
    assert annotations.find_error("*", Match.any_value()) == []
    assert annotations.find_warning("*", Match.any_value()) == []


def test_every_acknowledgment_is_expected_and_has_a_reason(app: App) -> None:
    acknowledged = _acknowledgments(app)
    assert {path: set(rules) for path, rules in acknowledged.items()} == EXPECTED_ACKNOWLEDGMENTS
    reasons = [reason for rules in acknowledged.values() for reason in rules.values()]
    assert all(reason.strip() for reason in reasons)


def test_each_serverless_acknowledgment_answers_a_finding(
    cdk_context: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the real app built with every acknowledgment left out
    monkeypatch.setattr(Validations, "acknowledge", lambda *_args, **_kwargs: None)
    app = App(context=cdk_context)
    build(app)

    # When the Serverless pack checks it
    found = [
        (rule, str(path)) for rule, _, paths in _findings(app, ServerlessChecks) for path in paths
    ]

    # Then each Serverless rule acknowledged is reported on the construct it is
    # acknowledged on (or a resource within it): none outlives a finding since fixed
    acknowledged = [
        (path, rule)
        for path, rules in EXPECTED_ACKNOWLEDGMENTS.items()
        for rule in rules
        if rule.startswith("Serverless-")
    ]
    assert acknowledged
    for path, rule in acknowledged:
        assert any(r == rule and f"{p}/".startswith(f"{path}/") for r, p in found), (path, rule)


def test_checks_flag_an_unprotected_bucket() -> None:
    # Given a bucket with none of the storage stack's protections
    app = App()
    s3.Bucket(Stack(app, "Bare"), "Bucket")

    # When the same checks run over it
    rules = {rule for rule, _, _ in _findings(app)}

    # Then they report the missing access logs and plain-HTTP access
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


def _add_bare_bucket(stacks: Stacks) -> None:
    s3.Bucket(stacks.storage, "Unprotected")


def _add_table_without_recovery(stacks: Stacks) -> None:
    key = dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    dynamodb.Table(stacks.storage, "Unrecoverable", partition_key=key)


def _add_log_group_kept_forever(stacks: Stacks) -> None:
    logs.LogGroup(stacks.api, "Forever", retention=logs.RetentionDays.INFINITE)


@pytest.mark.parametrize(
    ("add_finding", "rule", "severity"),
    [
        (_add_bare_bucket, "AwsSolutions-S10", "error"),
        (_add_table_without_recovery, "AwsSolutions-DDB3", "warning"),
        # Only the Serverless pack checks a log group's retention
        (_add_log_group_kept_forever, "Serverless-CloudWatchLogGroupRetentionPeriod", "warning"),
    ],
)
def test_synthesis_fails_on_an_unacknowledged_finding(
    cdk_context: dict[str, Any],
    tmp_path: Path,
    add_finding: Callable[[Stacks], None],
    rule: str,
    severity: str,
) -> None:
    # Given the real app with one unprotected resource added to it
    app = App(context=cdk_context, outdir=str(tmp_path))
    add_finding(build(app))

    # When it is synthesized, Then the checks registered by build() stop it, for a
    # warning as much as for an error
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    reported = {
        (v["ruleName"], v["severity"])
        for plugin in report["pluginReports"]
        for v in plugin["violations"]
    }
    assert (rule, severity) in reported


def test_a_teams_own_stack_in_the_same_app_is_not_judged_by_interlocks_checks(
    cdk_context: dict[str, Any], tmp_path: Path
) -> None:
    # Given a team's app: a stack of its own whose bucket the checks would flag, and
    # Interlock's stacks added beside it
    app = App(context=cdk_context, outdir=str(tmp_path))
    s3.Bucket(Stack(app, "TeamReports"), "Reports")
    build(app)

    # When it is synthesized, Then it passes: Interlock's checks are over its own stacks
    app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert [v for plugin in report["pluginReports"] for v in plugin["violations"]] == []


def test_an_account_bootstrapped_with_its_own_qualifier_synthesizes_clean(
    configured_stacks: Stacks,
) -> None:
    # The configured synth ran the checks with a custom qualifier (a finding left
    # unacknowledged would have failed it); the acknowledgement names that qualifier
    content = configured_stacks.web_content
    assert bootstrap_qualifier(content) == CONFIGURED_QUALIFIER
    synthesizer = content.synthesizer
    assert isinstance(synthesizer, DefaultStackSynthesizer)
    template = Template.from_stack(content).to_json()
    assert f"cdk-{CONFIGURED_QUALIFIER}-assets" in json.dumps(template)
