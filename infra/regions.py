"""Where Interlock deploys, and what each region lacks, checked at synth.

A first deployment should fail at `cdk synth` with the region, the missing service and
the setting that fixes it, not halfway through `cdk deploy`. Three things vary by
region:

- SnapStart (`infra.snapstart`). Synthesis validates templates against CloudFormation's
  own rules, which refuse SnapStart in more regions than Lambda's documentation
  excludes; where either says no, SnapStart is simply left off (it only shortens cold
  starts) and synthesis says so.
- The Lambda Web Adapter's arm64 layer, which AWS does not publish everywhere: there the
  functions must run on x86_64 (`interlock:architecture=x86_64`), or name a layer of
  your own (`interlock:webAdapterLayer`).
- The model's inference profile (`infra.settings.check_model_region`).

Partitions without Cognito user pools or CloudFront (China, the isolated regions) and
GovCloud (no CloudFront) cannot host the card page and its sign-in, so they are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

ARCHITECTURES: Final = ("arm64", "x86_64")
# The regions synthesis's template validation refuses SnapStart in (it includes the
# two Lambda's SnapStart page excludes).
NO_SNAPSTART: Final = frozenset(
    {
        "ap-east-2",
        "ap-south-2",
        "ap-southeast-4",
        "ap-southeast-5",
        "ap-southeast-6",
        "ap-southeast-7",
        "ca-west-1",
        "eu-central-2",
        "eu-south-2",
        "il-central-1",
        "me-central-1",
        "mx-central-1",
    }
)
# Where AWS publishes no arm64 Lambda Web Adapter layer.
NO_ARM64_ADAPTER: Final = frozenset(
    {"ap-south-2", "ap-southeast-4", "eu-central-2", "eu-south-2", "me-central-1"}
)
_REFUSED: Final = (
    (re.compile(r"cn-"), "the China regions have no Cognito user pools or CloudFront"),
    (re.compile(r"us-gov-"), "GovCloud has no CloudFront for the card page"),
    (re.compile(r"(us-iso|eu-iso|eusc-)"), "this partition has no Cognito hosted sign-in"),
)
_REGION: Final = re.compile(r"[a-z]{2,4}(-[a-z]+)+-\d+")


@dataclass(frozen=True)
class RegionPlan:
    """What a deployment to one region gets.

    Attributes:
        region: The region, or None when the stacks are environment-agnostic.
        snap_start: Whether the functions that suit it restore from SnapStart snapshots.
        note: Why SnapStart is off here, if it is.
    """

    region: str | None
    snap_start: bool
    note: str | None = None


def plan_region(region: str | None, architecture: str, *, own_adapter: bool = False) -> RegionPlan:
    """Check `region` against what Interlock needs with `architecture`.

    An unknown region (a token: the stacks are environment-agnostic) is not checked;
    synthesize with the CLI's profile (`CDK_DEFAULT_REGION`) to have it checked.

    Args:
        region: The stacks' region, or None or a token when not known at synth.
        architecture: The functions' architecture, `arm64` or `x86_64`.
        own_adapter: Whether `interlock:webAdapterLayer` names a layer of the
            operator's own, so AWS's published one is not needed.

    Raises:
        ValueError: the region cannot host Interlock, or not with this architecture;
            the message names the region, what it lacks and the setting that fixes it.
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"interlock:architecture must be arm64 or x86_64, not {architecture!r}")
    if region is None or not _REGION.fullmatch(region):
        return RegionPlan(None, snap_start=True)
    for pattern, why in _REFUSED:
        if pattern.match(region):
            raise ValueError(f"Interlock cannot be deployed to {region}: {why}")
    if architecture == "arm64" and region in NO_ARM64_ADAPTER and not own_adapter:
        raise ValueError(
            f"{region} has no arm64 Lambda Web Adapter layer, which the run and resume "
            "functions need: deploy with -c interlock:architecture=x86_64, or name your "
            "own layer with -c interlock:webAdapterLayer=<arn>"
        )
    if region in NO_SNAPSTART:
        return RegionPlan(
            region,
            snap_start=False,
            note=f"SnapStart is not offered in {region}: its functions start without it",
        )
    return RegionPlan(region, snap_start=True)
