"""Deployments that differ from the default: another region, a torn-down stage, another
Web Adapter layer. Each builds the whole app; the region's is synthesized, so the AWS
Solutions checks run on it too."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Environment
from aws_cdk.assertions import Template

from infra.settings import Settings, check_model_region
from infra.wiring import build
from local import smoke

EU = Environment(account="123456789012", region="eu-west-1")


def test_a_stack_in_a_non_us_region_synthesizes_with_the_default_model(
    cdk_context: dict[str, Any], tmp_path: Any
) -> None:
    app = App(context=cdk_context, outdir=str(tmp_path))
    stacks = build(app, EU)
    app.synth()  # the checks pass in eu-west-1 as well

    functions = Template.from_stack(stacks.api).find_resources("AWS::Lambda::Function")
    models = {
        f["Properties"]["Environment"]["Variables"].get("INTERLOCK_MODEL")
        for f in functions.values()
    } - {None}
    # A global profile: callable from this region as from any other
    assert models == {"bedrock:global.anthropic.claude-sonnet-4-5-20250929-v1:0"}


def test_a_profile_of_another_geography_fails_the_synth(cdk_context: dict[str, Any]) -> None:
    context = {
        **cdk_context,
        "interlock:model": "bedrock:us.anthropic.claude-3-haiku-20240307-v1:0",
    }
    with pytest.raises(ValueError, match="eu-west-1 cannot call"):
        build(App(context=context), EU)


@pytest.mark.parametrize(
    ("model_id", "region", "fits"),
    [
        ("us.anthropic.claude-3-haiku-20240307-v1:0", "us-west-2", True),
        ("us.anthropic.claude-3-haiku-20240307-v1:0", "us-gov-west-1", False),
        ("eu.amazon.nova-pro-v1:0", "eu-central-1", True),
        ("eu.amazon.nova-pro-v1:0", "ap-southeast-2", False),
        ("apac.amazon.nova-pro-v1:0", "ap-southeast-2", True),
        ("jp.anthropic.claude-3-haiku-20240307-v1:0", "ap-northeast-1", True),
        ("jp.anthropic.claude-3-haiku-20240307-v1:0", "ap-south-1", False),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "sa-east-1", True),
        ("anthropic.claude-3-haiku-20240307-v1:0", "eu-west-3", True),
        # The region is not known at synth: left to Bedrock
        ("eu.amazon.nova-pro-v1:0", "${Token[AWS.Region.7]}", True),
    ],
)
def test_a_geographic_profile_must_fit_the_region(model_id: str, region: str, fits: bool) -> None:
    from interlock.config import ModelSpec

    model = ModelSpec.parse(f"bedrock:{model_id}")
    if fits:
        check_model_region(model, region)
    else:
        with pytest.raises(ValueError, match="inference profile"):
            check_model_region(model, region)


def _policies(stacks: Any) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for stack in (stacks.storage, stacks.api):
        for resource in Template.from_stack(stack).to_json()["Resources"].values():
            if resource["Type"] in (
                "AWS::DynamoDB::Table",
                "AWS::S3::Bucket",
                "AWS::Cognito::UserPool",
            ):
                found.setdefault(resource["Type"], set()).add(
                    resource.get("DeletionPolicy", "Delete")
                )
    return found


def test_the_default_and_prod_stages_keep_their_data(cdk_context: dict[str, Any]) -> None:
    for context in (cdk_context, {**cdk_context, "interlock:stage": "prod"}):
        policies = _policies(build(App(context=context)))
        assert policies == {
            "AWS::DynamoDB::Table": {"Retain"},
            "AWS::S3::Bucket": {"Retain"},
            "AWS::Cognito::UserPool": {"Retain"},
        }


def test_another_stage_is_torn_down_with_its_data_unless_told_otherwise(
    cdk_context: dict[str, Any],
) -> None:
    stacks = build(App(context={**cdk_context, "interlock:stage": "dev"}))
    assert _policies(stacks) == {
        "AWS::DynamoDB::Table": {"Delete"},
        "AWS::S3::Bucket": {"Delete"},
        "AWS::Cognito::UserPool": {"Delete"},
    }
    storage = Template.from_stack(stacks.storage)
    storage.has_resource_properties("AWS::DynamoDB::Table", {"DeletionProtectionEnabled": False})
    # A bucket with objects would stop the deletion: the stage empties its own
    storage.resource_count_is("Custom::S3AutoDeleteObjects", 2)

    kept = build(
        App(context={**cdk_context, "interlock:stage": "dev", "interlock:removalPolicy": "retain"})
    )
    assert _policies(kept)["AWS::DynamoDB::Table"] == {"Retain"}
    with pytest.raises(ValueError, match="interlock:removalPolicy"):
        build(App(context={**cdk_context, "interlock:removalPolicy": "snapshot"}))


def test_the_web_adapter_layer_can_be_named(cdk_context: dict[str, Any]) -> None:
    arn = "arn:aws:lambda:eu-west-1:123456789012:layer:MyAdapter:3"
    stacks = build(App(context={**cdk_context, "interlock:webAdapterLayer": arn}))
    functions = Template.from_stack(stacks.api).find_resources("AWS::Lambda::Function")
    streaming = [f for f in functions.values() if f["Properties"]["Handler"] == "run.sh"]
    assert len(streaming) == 2
    assert all(arn in f["Properties"]["Layers"] for f in streaming)
    with pytest.raises(ValueError, match="interlock:webAdapterLayer"):
        Settings.from_context(App(context={"interlock:webAdapterLayer": "my-adapter"}).node)


def test_the_log_level_is_a_setting(cdk_context: dict[str, Any]) -> None:
    stacks = build(App(context={**cdk_context, "interlock:logLevel": "debug"}))
    functions = Template.from_stack(stacks.api).find_resources("AWS::Lambda::Function")
    ours = [f for f in functions.values() if "POWERTOOLS_LOG_LEVEL" in json.dumps(f)]
    # The route table's five, the sweeper and the settle function
    assert len(ours) == 7
    for function in ours:
        properties = function["Properties"]
        assert properties["Environment"]["Variables"]["POWERTOOLS_LOG_LEVEL"] == "DEBUG"
        assert properties["LoggingConfig"]["ApplicationLogLevel"] == "DEBUG"
        assert properties["LoggingConfig"]["LogFormat"] == "JSON"
    with pytest.raises(ValueError, match="interlock:logLevel"):
        build(App(context={**cdk_context, "interlock:logLevel": "loud"}))


def test_an_openai_compatible_model_gets_a_key_secret_and_no_bedrock(
    cdk_context: dict[str, Any],
) -> None:
    context = {**cdk_context, "interlock:model": "openai:https://llm.example.org/v1#gpt-oss-20b"}
    stacks = build(App(context=context))
    template = Template.from_stack(stacks.api)

    # One secret for the key, named to exactly the functions that run the agent
    secrets = template.find_resources("AWS::SecretsManager::Secret")
    (secret_id,) = [k for k in secrets if k.startswith("ModelKeySecret")]
    functions = template.find_resources("AWS::Lambda::Function")
    named = {
        key: f["Properties"]["Environment"]["Variables"].get("INTERLOCK_OPENAI_KEY_SECRET")
        for key, f in functions.items()
        if "Environment" in f["Properties"]
    }
    holders = {key.split("Function")[0] for key, value in named.items() if value}
    assert holders == {"Run", "Resume", "Settle"}, holders
    # Their roles may read it; none may call Bedrock
    roles = json.dumps(template.find_resources("AWS::IAM::Role"))
    assert "bedrock:InvokeModel" not in roles
    assert roles.count(f'"Ref": "{secret_id}"') == 3


def test_the_smoke_stage_runs_the_scripted_model_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The deploy and the destroy it prints name the model
    assert smoke.plan("smk3").count("-c interlock:model=scripted") == 2
    runs: list[smoke.Run] = []
    monkeypatch.setattr(smoke, "STEPS", (smoke.Step("deploy", "", runs.append),))
    assert smoke.main(["--stage", "smk3"]) == 0
    assert smoke.main(["--stage", "smk3", "--model", "bedrock"]) == 0

    # The app each run's cdk commands synthesize: the scripted model plays the approval
    # its prompt asks for, with no Bedrock access needed; a real model only when named
    default, told = (Settings.from_context(App(context=smoke.cdk_context(r)).node) for r in runs)
    assert (default.stage, default.retain_data) == ("smk3", False)
    assert default.model.provider == "scripted"
    assert told.model.provider == "bedrock"
