#!/usr/bin/env python3
"""CDK entry point, run by `npx cdk synth` and `npx cdk deploy` through `cdk.json`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The layer's package lives in shared/ and defines the table layout the stacks deploy.
sys.path.insert(0, str(Path(__file__).resolve().parent / "shared"))

from aws_cdk import App, Environment

from infra.wiring import build


def main() -> None:
    """Synthesize every Interlock stack into `cdk.out`."""
    app = App()
    # The CLI's account and region (from the profile), so the model is checked against
    # the region at synth; without them the stacks stay environment-agnostic.
    region = os.environ.get("CDK_DEFAULT_REGION")
    account = os.environ.get("CDK_DEFAULT_ACCOUNT")
    build(app, Environment(account=account, region=region) if region else None)
    app.synth()


if __name__ == "__main__":
    main()
