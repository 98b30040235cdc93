"""A first `cdk deploy` works in any region, or `cdk synth` says why not and what fixes it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment
from aws_cdk.assertions import Template

from infra.regions import NO_ARM64_ADAPTER, NO_SNAPSTART, plan_region
from infra.wiring import Stacks, build

README = Path(__file__).resolve().parents[2] / "README.md"
ACCOUNT = "123456789012"


def _synthesized(
    cdk_context: dict[str, Any], tmp_path: Path, region: str, **context: str
) -> Stacks:
    # Synthesized whole: the template validation and both rule packs run, as in `cdk synth`
    app = App(context={**cdk_context, **context}, outdir=str(tmp_path))
    stacks = build(app, Environment(account=ACCOUNT, region=region))
    app.synth()
    return stacks


def _functions(stacks: Stacks) -> dict[str, dict[str, Any]]:
    found = Template.from_stack(stacks.api).find_resources("AWS::Lambda::Function")
    return {k: v["Properties"] for k, v in found.items() if "POWERTOOLS_LOG_LEVEL" in json.dumps(v)}


def test_a_supported_region_gets_arm64_and_snapstart(
    cdk_context: dict[str, Any], tmp_path: Path
) -> None:
    functions = _functions(_synthesized(cdk_context, tmp_path, "eu-west-1"))
    assert {p["Architectures"][0] for p in functions.values()} == {"arm64"}
    restored = [p for p in functions.values() if "SnapStart" in p]
    assert len(restored) == 2  # requests and channels


def test_a_region_without_the_arm64_adapter_says_which_setting_fixes_it(
    cdk_context: dict[str, Any], tmp_path: Path
) -> None:
    # Given a region where AWS publishes no arm64 Web Adapter layer
    with pytest.raises(ValueError) as refused:
        _synthesized(cdk_context, tmp_path / "arm", "ap-south-2")
    message = str(refused.value)
    assert "ap-south-2" in message and "arm64 Lambda Web Adapter" in message
    assert "interlock:architecture=x86_64" in message

    # When the setting it names is given, the whole app synthesizes on x86_64, with the
    # adapter's x86 layer, and without SnapStart (not offered there)
    stacks = _synthesized(
        cdk_context, tmp_path / "x86", "ap-south-2", **{"interlock:architecture": "x86_64"}
    )
    functions = _functions(stacks)
    assert {p["Architectures"][0] for p in functions.values()} == {"x86_64"}
    assert not [p for p in functions.values() if "SnapStart" in p]
    adapters = [
        layer
        for p in functions.values()
        for layer in p["Layers"]
        if "LambdaAdapterLayer" in json.dumps(layer)
    ]
    assert adapters and all("LambdaAdapterLayerX86" in json.dumps(a) for a in adapters)
    layers = Template.from_stack(stacks.api).find_resources("AWS::Lambda::LayerVersion")
    assert {tuple(v["Properties"]["CompatibleArchitectures"]) for v in layers.values()} == {
        ("x86_64",)
    }


def test_a_region_without_snapstart_synthesizes_with_it_off(
    cdk_context: dict[str, Any], tmp_path: Path
) -> None:
    # Template validation refuses SnapStart in il-central-1: left on, synth would fail
    functions = _functions(_synthesized(cdk_context, tmp_path, "il-central-1"))
    assert functions and not [p for p in functions.values() if "SnapStart" in p]
    assert {p["Architectures"][0] for p in functions.values()} == {"arm64"}


@pytest.mark.parametrize(
    ("region", "why"),
    [
        ("cn-north-1", "no Cognito user pools or CloudFront"),
        ("us-gov-west-1", "no CloudFront"),
        ("us-iso-east-1", "no Cognito"),
        ("eusc-de-east-1", "no Cognito"),
    ],
)
def test_a_partition_without_what_the_page_needs_is_refused(region: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        plan_region(region, "arm64")


def test_an_unknown_region_is_left_to_the_deployment_and_a_bad_architecture_refused() -> None:
    assert plan_region(None, "arm64").snap_start
    assert plan_region("${Token[AWS.Region.12]}", "arm64").region is None
    with pytest.raises(ValueError, match="arm64 or x86_64"):
        plan_region("eu-west-1", "aarch64")
    # A layer of the operator's own stands in for AWS's missing one
    assert plan_region("ap-south-2", "arm64", own_adapter=True).snap_start is False


def test_the_readme_lists_every_region_with_an_exception() -> None:
    text = README.read_text()
    section = text[text.index("| region | SnapStart | arm64 |") :].split("\n\n")[0]
    rows = {
        cells[0].strip("` "): (cells[1].strip(), cells[2].strip())
        for line in section.splitlines()[2:]
        if (cells := [c.strip() for c in line.strip("|").split("|")])
    }
    assert set(rows) == NO_SNAPSTART | NO_ARM64_ADAPTER
    for region, (snap, arm) in rows.items():
        assert (snap == "no") == (region in NO_SNAPSTART), region
        assert (arm == "no") == (region in NO_ARM64_ADAPTER), region
    assert re.search(r"China|GovCloud", section + text)
