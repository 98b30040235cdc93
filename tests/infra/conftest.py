"""Two syntheses of the whole app per test session: with the context `cdk.json` gives it,
and once more with the optional settings a deployment may add on top.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

# Read by the jsii runtime when it starts, i.e. on the first aws_cdk import.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App
from aws_cdk.assertions import Template

from infra.wiring import Stacks, build
from tests.infra.support import (
    AGENT_CONFIG_PARAMETER,
    CONFIGURED_AUTH_PREFIX,
    CONFIGURED_ORIGIN,
    CONFIGURED_QUALIFIER,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the default app leaves unset or at its default.
CONFIGURED_CONTEXT = {
    "interlock:agentConfigParameter": AGENT_CONFIG_PARAMETER,
    "interlock:sweepEveryMinutes": "5",
    "interlock:allowedOrigin": CONFIGURED_ORIGIN,
    "interlock:authDomainPrefix": CONFIGURED_AUTH_PREFIX,
    # An account bootstrapped with its own qualifier: the synth and its checks still pass.
    "@aws-cdk/core:bootstrapQualifier": CONFIGURED_QUALIFIER,
    # Both chat platforms: their secrets, the webhooks' readers, and the checks on them.
    "interlock:channels": "slack,telegram",
    # Access logs, with the account's API Gateway role set by the stack.
    "interlock:accessLogs": "create-role",
}


@pytest.fixture(scope="session")
def cdk_context() -> dict[str, Any]:
    """The feature flags of `cdk.json`, plus "bundle no stack" so assets are not built."""
    context: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    return {**context, "aws:cdk:bundling-stacks": []}


@pytest.fixture(scope="session")
def outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session's cloud assembly is written (not the checkout's cdk.out)."""
    return tmp_path_factory.mktemp("cdk.out")


@pytest.fixture(scope="session")
def synthesized(cdk_context: dict[str, Any], outdir: Path) -> tuple[App, Stacks]:
    """The app built as `app.py` builds it, synthesized once.

    Synthesis runs the AWS Solutions checks and fails on any unacknowledged finding.
    """
    app = App(context=cdk_context, outdir=str(outdir))
    stacks = build(app)
    app.synth()
    return app, stacks


@pytest.fixture(scope="session")
def app(synthesized: tuple[App, Stacks]) -> App:
    """The synthesized app."""
    return synthesized[0]


@pytest.fixture(scope="session")
def stacks(synthesized: tuple[App, Stacks]) -> Stacks:
    """The synthesized app's stacks."""
    return synthesized[1]


@pytest.fixture(scope="session")
def storage_template(stacks: Stacks) -> Template:
    """The storage stack's CloudFormation template."""
    return Template.from_stack(stacks.storage)


@pytest.fixture(scope="session")
def api_template(stacks: Stacks) -> Template:
    """The API stack's CloudFormation template."""
    return Template.from_stack(stacks.api)


@pytest.fixture(scope="session")
def web_template(stacks: Stacks) -> Template:
    """The hosting stack's template: the page's bucket and distribution."""
    return Template.from_stack(stacks.web)


@pytest.fixture(scope="session")
def web_content_template(stacks: Stacks) -> Template:
    """The content stack's template: the copy of `web/` and its `config.json`."""
    return Template.from_stack(stacks.web_content)


@pytest.fixture(scope="session")
def configured_stacks(
    cdk_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Stacks:
    """The app built with `CONFIGURED_CONTEXT` as well, synthesized once (checks included)."""
    outdir = tmp_path_factory.mktemp("configured.cdk.out")
    app = App(context={**cdk_context, **CONFIGURED_CONTEXT}, outdir=str(outdir))
    stacks = build(app)
    app.synth()
    return stacks


@pytest.fixture(scope="session")
def configured_api_template(configured_stacks: Stacks) -> Template:
    """The configured app's API stack template."""
    return Template.from_stack(configured_stacks.api)
