"""Lambda SnapStart for the functions it suits, and the alias API Gateway then invokes.

With SnapStart, Lambda initializes a published version once, snapshots it, and resumes
new execution environments from the snapshot instead of importing the handler again.
Only a published version restores from it, so the API invokes an alias of the current
version rather than `$LATEST`.

Where it applies: `requests` and `channels`, plain handlers on the managed Python
runtime behind the API (people and chat platforms wait on their cold starts; Slack
gives three seconds). Their init creates nothing that must be unique per environment:
the Powertools logger, metrics, tracer and resolver hold no ids, the stores and clients
are made on the first invocation (`interlock.api.wiring`), ids and secrets are drawn
from `os.urandom` when used, and the one seeded state, `random` (botocore's retry
jitter), is reseeded after each restore (`interlock.api.snapstart`).

Where it does not:

- `run` and `resume`: the Web Adapter runs the app as a separate program; the pinned
  adapter relays no runtime hooks to it, so nothing could reseed or reconnect the app's
  process (its agent and clients are built at start) after a restore; and the run and
  channels functions hand work to the resume function by name, which is `$LATEST`.
- `admin`: a handful of calls by administrators, who can wait out a cold start, while
  SnapStart for Python bills the snapshot's cache whether or not it is used.
- `sweeper` and `settle`: a schedule and a queue invoke them, nobody waits on their cold
  start, and SnapStart for Python bills the snapshot's cache and every restore.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Acknowledgment, Validations
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

SNAPSTART_FUNCTIONS: Final = frozenset({"requests", "channels"})
ALIAS_NAME: Final = "live"
PUBLISH_WARNING: Final = "@aws-cdk/aws-lambda:snapStartRequirePublish"


def snap_start(name: str, *, offered: bool = True) -> lambda_.SnapStartConf | None:
    """The SnapStart setting of the function called `name`; none where the region does
    not offer SnapStart (`infra.regions`)."""
    restores = offered and name in SNAPSTART_FUNCTIONS
    return lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if restores else None


def invocable(
    scope: Construct, name: str, function: lambda_.Function, *, offered: bool = True
) -> lambda_.IFunction:
    """What callers invoke: an alias of the current published version when the function
    restores from a snapshot (a new version is published whenever it changes), else the
    function itself."""
    if not offered or name not in SNAPSTART_FUNCTIONS:
        return function
    Validations.of(function).acknowledge(
        Acknowledgment(
            id=f"Annotation::{PUBLISH_WARNING}",
            reason="The function's current version is published, and the API invokes it "
            "through this alias: never $LATEST, which would not restore a snapshot.",
        )
    )
    return lambda_.Alias(scope, "Live", alias_name=ALIAS_NAME, version=function.current_version)
