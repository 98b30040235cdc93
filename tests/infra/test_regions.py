"""A first `cdk deploy` works in every commercial region, or `cdk synth` says why not and
what fixes it; `docs/regions.md` says what each region gets.

Every region is planned here (fast); `test_synth_matrix` synthesizes one region of each
kind the table holds, on both architectures, with its checks on what deploys.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment
from aws_cdk.region_info import RegionInfo

from infra.regions import (
    ARCHITECTURES,
    DEFAULT_ADAPTER,
    REGIONS,
    WEB_ADAPTER_RELEASES,
    cloudfront_logs,
    markdown,
    plan_region,
    published_adapter,
)
from infra.wiring import build

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "regions.md"
ACCOUNT = "123456789012"
COMMERCIAL = sorted(r.name for r in RegionInfo.regions if r.partition == "aws")
# Where AWS published each Web Adapter release, by architecture, as the adapter's release
# pipeline listed them at the release's tag (aws/aws-lambda-web-adapter,
# .github/workflows/prod.json; an architecture only where `arm64_supported`).
_V091_X86 = frozenset(
    {
        "af-south-1", "ap-east-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
        "ap-south-1", "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3",
        "ap-southeast-4", "ca-central-1", "eu-central-1", "eu-central-2", "eu-north-1",
        "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3", "me-central-1",
        "me-south-1", "sa-east-1", "us-east-1", "us-east-2", "us-west-1", "us-west-2",
    }
)  # fmt: skip
_V091_ARM = _V091_X86 - {
    "ap-south-2",
    "ap-southeast-4",
    "eu-central-2",
    "eu-south-2",
    "me-central-1",
}
_NEW_IN_V100 = {
    "ap-east-2", "ap-southeast-5", "ap-southeast-6", "ap-southeast-7", "ca-west-1",
    "il-central-1", "mx-central-1",
}  # fmt: skip
_V100 = (_V091_X86 | _NEW_IN_V100) - {"me-south-1"}
PUBLISHED = {
    ("0.9.1", "arm64"): _V091_ARM,
    ("0.9.1", "x86_64"): _V091_X86,
    ("1.0.0", "arm64"): _V100,
    ("1.0.0", "x86_64"): _V100,
}
# The regions CloudFront's standard-logging guide says it delivers no standard logs to.
CLOUDFRONT_DOCUMENTED = frozenset(
    {
        "af-south-1", "ap-east-1", "ap-south-2", "ap-southeast-3", "ap-southeast-4",
        "ca-west-1", "eu-central-2", "eu-south-1", "eu-south-2", "il-central-1",
        "me-central-1", "me-south-1",
    }
)  # fmt: skip


def test_the_table_holds_every_commercial_region() -> None:
    # The CDK's own list of the aws partition's regions: a new one fails here until the
    # table says what it needs
    assert sorted(REGIONS) == COMMERCIAL
    assert len(COMMERCIAL) >= 34


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("region", COMMERCIAL)
def test_a_default_deployment_plans_in_every_commercial_region(
    region: str, architecture: str
) -> None:
    # Given a region and an architecture, with no layer of the operator's own
    plan = plan_region(region, architecture)

    # Then the plan is the table's, and the layer AWS published there on it
    assert plan.region == region
    assert plan.snap_start == REGIONS[region].snap_start
    assert (plan.note is None) == plan.snap_start
    layer = published_adapter(region, architecture)
    assert layer.version == WEB_ADAPTER_RELEASES[layer.release]
    assert region in PUBLISHED[(layer.release, architecture)]
    # the release the adapter is pinned at, wherever AWS published it
    if region in PUBLISHED[(DEFAULT_ADAPTER, architecture)]:
        assert layer.release == DEFAULT_ADAPTER


def test_cloudfront_logs_are_off_in_the_opt_in_regions() -> None:
    off = {code for code, region in REGIONS.items() if not region.cloudfront_logs}
    assert off == {
        r.name for r in RegionInfo.regions if r.partition == "aws" and r.is_opt_in_region
    }
    assert off >= CLOUDFRONT_DOCUMENTED
    assert {code for code in REGIONS if not cloudfront_logs(code)} == off
    # Unknown at synth: what the stacks always did; newer than the table: an opt-in region
    assert cloudfront_logs(None) and cloudfront_logs("${Token[AWS.Region.12]}")
    assert not cloudfront_logs("ap-southeast-9")


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
    # and the adapter it names is the pinned release, as before
    assert published_adapter("${Token[AWS.Region.12]}", "arm64").release == DEFAULT_ADAPTER
    with pytest.raises(ValueError, match="arm64 or x86_64"):
        plan_region("eu-west-1", "aarch64")


def test_a_region_newer_than_the_table_needs_a_layer_of_ones_own() -> None:
    with pytest.raises(ValueError) as refused:
        plan_region("ap-southeast-9", "arm64")
    message = str(refused.value)
    assert "ap-southeast-9" in message and "interlock:webAdapterLayer=<arn>" in message
    # With one named, it deploys with what may be missing left off
    plan = plan_region("ap-southeast-9", "arm64", own_adapter=True)
    assert (plan.region, plan.snap_start) == ("ap-southeast-9", False)


def test_synthesis_stops_where_aws_publishes_no_layer_and_says_what_fixes_it(
    cdk_context: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a region where AWS would publish no arm64 layer
    monkeypatch.setitem(REGIONS, "eu-south-2", replace(REGIONS["eu-south-2"], arm64=None))
    env = Environment(account=ACCOUNT, region="eu-south-2")

    # When the app is built there on arm64, it stops, naming the region and both fixes
    with pytest.raises(ValueError) as refused:
        build(App(context=cdk_context), env)
    message = str(refused.value)
    assert "eu-south-2 has no arm64 Lambda Web Adapter layer" in message
    assert "interlock:architecture=x86_64" in message
    assert "interlock:webAdapterLayer=<arn>" in message
    # and neither fix is refused: x86_64, or a layer of one's own on arm64
    build(App(context={**cdk_context, "interlock:architecture": "x86_64"}), env)
    own = "arn:aws:lambda:eu-south-2:123456789012:layer:MyAdapter:1"
    build(App(context={**cdk_context, "interlock:webAdapterLayer": own}), env)


def test_docs_regions_md_is_the_table() -> None:
    assert DOCS.read_text(encoding="utf-8") == markdown(), (
        "docs/regions.md is stale: regenerate it with "
        "`.venv/bin/python -m infra.regions > docs/regions.md`"
    )
    printed = subprocess.run(
        [sys.executable, "-m", "infra.regions"], cwd=REPO, capture_output=True, check=True
    )
    assert printed.stdout.decode("utf-8") == markdown()
    # One row per region, each saying what it gets
    rows = [line for line in markdown().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == sorted(REGIONS)
