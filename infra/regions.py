"""Where Interlock deploys, and what each region needs, checked at synth.

A first deployment should fail at `cdk synth` with the region, the missing piece and the
setting that fixes it, not halfway through `cdk deploy`; and what a region merely lacks,
synthesis leaves off. `REGIONS` is the one table of every commercial region and what it
needs; `python -m infra.regions` prints it as `docs/regions.md`. Four things vary:

- SnapStart (`infra.snapstart`). Synthesis validates templates against CloudFormation's
  own rules, which refuse SnapStart in more regions than Lambda's documentation
  excludes; where either says no, SnapStart is simply left off (it only shortens cold
  starts) and synthesis says so.
- The Lambda Web Adapter layer of the run and resume functions. AWS publishes a release
  under one layer version number in every region its release pipeline covers at the
  time, so a region (or an architecture) added later has only the releases since. Each
  region gets 0.9.1 where AWS published it, else 1.0.0, the next release that is not a
  release candidate; `interlock:webAdapterLayer` names a layer of the operator's own.
- CloudFront's standard (legacy) logs, which CloudFront does not deliver to a bucket in
  an opt-in region: there the distribution logs nothing.
- The model's inference profile (`infra.settings.check_model_region`).

Partitions without Cognito user pools or CloudFront (China, the isolated regions) and
GovCloud (no CloudFront) cannot host the card page and its sign-in, so they are refused,
as is a commercial region newer than the table unless a layer of the operator's own is
named (no published adapter is known there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, TypeGuard

ARCHITECTURES: Final = ("arm64", "x86_64")
WEB_ADAPTER_ACCOUNT: Final = "753240598075"
WEB_ADAPTER_LAYER_NAMES: Final = {
    "arm64": "LambdaAdapterLayerArm64",
    "x86_64": "LambdaAdapterLayerX86",
}
# Each release's layer version, the same in every region the release reached.
WEB_ADAPTER_RELEASES: Final = {"0.9.1": 25, "1.0.0": 27}
# The release the adapter was pinned at, deployed wherever AWS published it; a stack whose
# region is unknown at synth (environment-agnostic) names it too.
DEFAULT_ADAPTER: Final = "0.9.1"


@dataclass(frozen=True)
class Region:
    """A commercial region and what Interlock needs there.

    Attributes:
        code: The region (`eu-south-1`).
        location: Where it is (`Europe (Milan)`).
        snap_start: Whether synthesis may turn SnapStart on there.
        cloudfront_logs: Whether CloudFront delivers standard logs to a bucket there.
        arm64: The Web Adapter release deployed there on arm64, None where AWS publishes none.
        x86_64: The same on x86_64.
    """

    code: str
    location: str
    snap_start: bool
    cloudfront_logs: bool
    arm64: str | None
    x86_64: str | None

    def adapter(self, architecture: str) -> str | None:
        """The Web Adapter release deployed here on `architecture`, if AWS publishes one."""
        return self.arm64 if architecture == "arm64" else self.x86_64


# Where each column comes from:
# - SnapStart: synthesis's template validation refuses it in the regions marked False
#   (they include the two Lambda's SnapStart page excludes).
# - CF logs: off in every opt-in region. CloudFront's standard-logging guide names the
#   regions it delivers no standard logs to: af-south-1, ap-east-1, ap-south-2,
#   ap-southeast-3, ap-southeast-4, ca-west-1, eu-central-2, eu-south-1, eu-south-2,
#   il-central-1, me-central-1 and me-south-1, the opt-in regions of its time. Those
#   opened since (ap-east-2, ap-southeast-5, ap-southeast-6, ap-southeast-7, mx-central-1)
#   are marked alike: a distribution whose logs CloudFront cannot deliver fails to
#   deploy, while one that logs nothing only lacks the logs.
# - arm64, x86_64: the regions the adapter's release pipeline published each release to
#   (aws/aws-lambda-web-adapter, .github/workflows/prod.json at the release's tag): 0.9.1
#   reached 27 regions, arm64 in 22 of them; 1.0.0 reached 33 (not me-south-1), both
#   architectures.
# fmt: off
_TABLE: Final = (
    # region            location                        SnapStart  CF logs  arm64    x86_64
    ("af-south-1",      "Africa (Cape Town)",           True,      False,   "0.9.1", "0.9.1"),
    ("ap-east-1",       "Asia Pacific (Hong Kong)",     True,      False,   "0.9.1", "0.9.1"),
    ("ap-east-2",       "Asia Pacific (Taipei)",        False,     False,   "1.0.0", "1.0.0"),
    ("ap-northeast-1",  "Asia Pacific (Tokyo)",         True,      True,    "0.9.1", "0.9.1"),
    ("ap-northeast-2",  "Asia Pacific (Seoul)",         True,      True,    "0.9.1", "0.9.1"),
    ("ap-northeast-3",  "Asia Pacific (Osaka)",         True,      True,    "0.9.1", "0.9.1"),
    ("ap-south-1",      "Asia Pacific (Mumbai)",        True,      True,    "0.9.1", "0.9.1"),
    ("ap-south-2",      "Asia Pacific (Hyderabad)",     False,     False,   "1.0.0", "0.9.1"),
    ("ap-southeast-1",  "Asia Pacific (Singapore)",     True,      True,    "0.9.1", "0.9.1"),
    ("ap-southeast-2",  "Asia Pacific (Sydney)",        True,      True,    "0.9.1", "0.9.1"),
    ("ap-southeast-3",  "Asia Pacific (Jakarta)",       True,      False,   "0.9.1", "0.9.1"),
    ("ap-southeast-4",  "Asia Pacific (Melbourne)",     False,     False,   "1.0.0", "0.9.1"),
    ("ap-southeast-5",  "Asia Pacific (Malaysia)",      False,     False,   "1.0.0", "1.0.0"),
    ("ap-southeast-6",  "Asia Pacific (New Zealand)",   False,     False,   "1.0.0", "1.0.0"),
    ("ap-southeast-7",  "Asia Pacific (Thailand)",      False,     False,   "1.0.0", "1.0.0"),
    ("ca-central-1",    "Canada (Central)",             True,      True,    "0.9.1", "0.9.1"),
    ("ca-west-1",       "Canada West (Calgary)",        False,     False,   "1.0.0", "1.0.0"),
    ("eu-central-1",    "Europe (Frankfurt)",           True,      True,    "0.9.1", "0.9.1"),
    ("eu-central-2",    "Europe (Zurich)",              False,     False,   "1.0.0", "0.9.1"),
    ("eu-north-1",      "Europe (Stockholm)",           True,      True,    "0.9.1", "0.9.1"),
    ("eu-south-1",      "Europe (Milan)",               True,      False,   "0.9.1", "0.9.1"),
    ("eu-south-2",      "Europe (Spain)",               False,     False,   "1.0.0", "0.9.1"),
    ("eu-west-1",       "Europe (Ireland)",             True,      True,    "0.9.1", "0.9.1"),
    ("eu-west-2",       "Europe (London)",              True,      True,    "0.9.1", "0.9.1"),
    ("eu-west-3",       "Europe (Paris)",               True,      True,    "0.9.1", "0.9.1"),
    ("il-central-1",    "Israel (Tel Aviv)",            False,     False,   "1.0.0", "1.0.0"),
    ("me-central-1",    "Middle East (UAE)",            False,     False,   "1.0.0", "0.9.1"),
    ("me-south-1",      "Middle East (Bahrain)",        True,      False,   "0.9.1", "0.9.1"),
    ("mx-central-1",    "Mexico (Central)",             False,     False,   "1.0.0", "1.0.0"),
    ("sa-east-1",       "South America (São Paulo)",    True,      True,    "0.9.1", "0.9.1"),
    ("us-east-1",       "US East (N. Virginia)",        True,      True,    "0.9.1", "0.9.1"),
    ("us-east-2",       "US East (Ohio)",               True,      True,    "0.9.1", "0.9.1"),
    ("us-west-1",       "US West (N. California)",      True,      True,    "0.9.1", "0.9.1"),
    ("us-west-2",       "US West (Oregon)",             True,      True,    "0.9.1", "0.9.1"),
)
# fmt: on
REGIONS: Final = {row[0]: Region(*row) for row in _TABLE}
_REFUSED: Final = (
    (
        re.compile(r"cn-"),
        "`cn-*` (China)",
        "the China regions have no Cognito user pools or CloudFront",
    ),
    (
        re.compile(r"us-gov-"),
        "`us-gov-*` (GovCloud)",
        "GovCloud has no CloudFront for the card page",
    ),
    (
        re.compile(r"(us-iso|eu-iso|eusc-)"),
        "`us-iso*`, `eu-iso*`, `eusc-*` (isolated and sovereign)",
        "this partition has no Cognito hosted sign-in",
    ),
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


@dataclass(frozen=True)
class AdapterLayer:
    """One of AWS's published Lambda Web Adapter layer versions.

    Attributes:
        release: The adapter's release (`0.9.1`).
        name: The layer's name, one per architecture.
        version: The layer version that holds the release.
    """

    release: str
    name: str
    version: int

    def arn(self, partition: str, region: str) -> str:
        """The layer version's ARN in `region` (either may be a CloudFormation token)."""
        return (
            f"arn:{partition}:lambda:{region}:{WEB_ADAPTER_ACCOUNT}:layer:"
            f"{self.name}:{self.version}"
        )


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
    if not _known_at_synth(region):
        return RegionPlan(None, snap_start=True)
    for pattern, _, why in _REFUSED:
        if pattern.match(region):
            raise ValueError(f"Interlock cannot be deployed to {region}: {why}")
    known = REGIONS.get(region)
    if known is None and not own_adapter:
        raise ValueError(
            f"{region} is not in Interlock's region table (infra/regions.py), so no "
            "published Lambda Web Adapter layer is known there: name your own layer with "
            "-c interlock:webAdapterLayer=<arn>, or add the region to the table"
        )
    if known is not None and known.adapter(architecture) is None and not own_adapter:
        raise ValueError(_no_adapter(known, architecture))
    if known is None:
        return RegionPlan(
            region,
            snap_start=False,
            note=f"{region} is newer than Interlock's region table: SnapStart is left off",
        )
    if not known.snap_start:
        return RegionPlan(
            region,
            snap_start=False,
            note=f"SnapStart is not offered in {region}: its functions start without it",
        )
    return RegionPlan(region, snap_start=True)


def published_adapter(region: str | None, architecture: str) -> AdapterLayer:
    """AWS's Lambda Web Adapter layer for `architecture` in `region`.

    A region unknown at synth (None or a token) gets `DEFAULT_ADAPTER`, as the stacks
    always named.

    Raises:
        ValueError: AWS publishes no layer for `architecture` in `region` (`plan_region`
            refuses the region first, naming the fix).
    """
    release: str | None = DEFAULT_ADAPTER
    if _known_at_synth(region):
        known = REGIONS.get(region)
        release = known.adapter(architecture) if known else None
    if release is None:
        raise ValueError(f"AWS publishes no {architecture} Lambda Web Adapter layer in {region}")
    name = WEB_ADAPTER_LAYER_NAMES[architecture]
    return AdapterLayer(release, name, WEB_ADAPTER_RELEASES[release])


def cloudfront_logs(region: str | None) -> bool:
    """Whether CloudFront delivers standard logs to a bucket in `region`.

    Yes where the region is unknown at synth (an environment-agnostic stack logs, as in
    the regions opened before 2019); no in a region newer than the table, since new
    regions are opt-in ones.
    """
    if not _known_at_synth(region):
        return True
    known = REGIONS.get(region)
    return known is not None and known.cloudfront_logs


def markdown() -> str:
    """`docs/regions.md`: every commercial region and what a deployment there needs."""
    rows = [
        f"| `{r.code}` | {r.location} | {_layer(r, 'arm64')} | {_layer(r, 'x86_64')} "
        f"| {_on(r.snap_start)} | {_on(r.cloudfront_logs)} |"
        for r in REGIONS.values()
    ]
    refused = [f"- {partition}: {why}." for _, partition, why in _REFUSED]
    return "\n".join(
        [
            "# Regions",
            "",
            "<!-- Generated from infra/regions.py by `python -m infra.regions`; "
            "edit the table there. -->",
            "",
            "A default deployment (`npx cdk deploy --all` on arm64) works in every commercial",
            "region below. Synthesis reads the region from the CLI's profile and adjusts the",
            "stacks to it, so nothing needs setting by hand:",
            "",
            "- **Web Adapter**: the AWS Lambda Web Adapter release (and layer version) the run",
            "  and resume functions get on each architecture: 0.9.1 where AWS published it,",
            "  else 1.0.0, the next release that is not a release candidate.",
            "  `interlock:webAdapterLayer` names a layer of your own instead.",
            "- **SnapStart**: off where synthesis's template validation refuses it; the",
            "  requests and channels functions then start without a snapshot.",
            "- **CloudFront logs**: off where CloudFront does not deliver standard logs to a",
            "  bucket in the region (the opt-in regions); the page's bucket still keeps its",
            "  S3 server access logs.",
            "",
            "| region | location | Web Adapter, arm64 | Web Adapter, x86_64 | SnapStart "
            "| CloudFront logs |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            "Refused at synth:",
            "",
            *refused,
            "- A commercial region newer than this table: no published Web Adapter layer is",
            "  known there, unless `interlock:webAdapterLayer` names one (SnapStart and",
            "  CloudFront logs are then left off).",
            "",
        ]
    )


def main() -> None:
    """Print `docs/regions.md`."""
    print(markdown(), end="")


def _known_at_synth(region: str | None) -> TypeGuard[str]:
    return region is not None and _REGION.fullmatch(region) is not None


def _no_adapter(region: Region, architecture: str) -> str:
    others = [a for a in ARCHITECTURES if a != architecture and region.adapter(a)]
    fix = f"deploy with -c interlock:architecture={others[0]}, or " if others else ""
    return (
        f"{region.code} has no {architecture} Lambda Web Adapter layer, which the run and "
        f"resume functions need: {fix}name your own layer with "
        "-c interlock:webAdapterLayer=<arn>"
    )


def _layer(region: Region, architecture: str) -> str:
    release = region.adapter(architecture)
    return "none" if release is None else f"{release} (layer {WEB_ADAPTER_RELEASES[release]})"


def _on(value: bool) -> str:
    return "on" if value else "**off**"


if __name__ == "__main__":
    main()
