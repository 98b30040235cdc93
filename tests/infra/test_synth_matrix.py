"""The app synthesizes, every check passing, across the settings that change its roles.

Four settings decide which statements the functions' roles hold: the chat channels
(none, Slack, Telegram, both: their secrets), the model (Bedrock, an OpenAI-compatible
endpoint with its key's secret, the scripted stand-in with neither), the API's access
logs (off, on, or with the account's logging role created) and the functions'
architecture (arm64, x86_64). All of them together are 4 x 3 x 3 x 2 = 72 deployments,
too many to synthesize in a test run.

`COMBINATIONS` is a covering array of strength two instead: every pair of values of any
two settings is synthesized together at least once. Its twelve rows are the full product
of channels and models (the pair whose secrets once gave a role two statements with one
id), each pair exactly once, with the access logs and the architecture varied across
them so that their pairs with each other and with the first two are covered too; twelve
is the fewest rows any such array can have. `test_every_pair_of_values_is_synthesized`
checks the covering without synthesizing.

Each row also deploys to a region of its own, as `cdk deploy` does with the profile's:
the regions are chosen so that every kind of region `infra.regions.REGIONS` holds (what
synthesis changes there: SnapStart, CloudFront's logs, the Web Adapter release) is
synthesized on both architectures; `test_every_kind_of_region_is_synthesized` checks it.

Each row is synthesized as `app.py` does it, so the AWS Solutions and Serverless checks
and CloudFormation's own validation for the row's region run as part of it and fail it on
any unacknowledged finding; then its roles, dependencies and what its region needs are
read back from the cloud assembly.
"""

from __future__ import annotations

import json
from collections import Counter
from fnmatch import fnmatchcase
from graphlib import CycleError, TopologicalSorter
from itertools import combinations, product
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from aws_cdk import App, Environment

from infra.regions import REGIONS, WEB_ADAPTER_LAYER_NAMES, WEB_ADAPTER_RELEASES
from infra.wiring import build

CHANNELS = {
    "none": "",
    "slack": "slack",
    "telegram": "telegram",
    "slack+telegram": "slack,telegram",
}
MODELS = {
    "bedrock": None,
    "openai": "openai:https://api.example.org/v1#gpt-x",
    "scripted": "scripted",
}
ACCESS_LOGS = ("off", "on", "create-role")
ARCHITECTURES = ("arm64", "x86_64")
SETTINGS = {
    "channels": tuple(CHANNELS),
    "model": tuple(MODELS),
    "access_logs": ACCESS_LOGS,
    "architecture": ARCHITECTURES,
}


class Combination(NamedTuple):
    """One deployment's values of the four settings, and the region it deploys to."""

    channels: str
    model: str
    access_logs: str
    architecture: str
    region: str

    def context(self) -> dict[str, Any]:
        """The `-c` settings that deploy it (the default model is left unset)."""
        context = {
            "interlock:channels": CHANNELS[self.channels],
            "interlock:accessLogs": self.access_logs,
            "interlock:architecture": self.architecture,
        }
        model = MODELS[self.model]
        return context if model is None else {**context, "interlock:model": model}

    def __str__(self) -> str:
        return (
            f"{'no' if self.channels == 'none' else self.channels} channels, {self.model} model, "
            f"access logs {self.access_logs}, {self.architecture} in {self.region}"
        )


COMBINATIONS = [
    Combination("none", "bedrock", "off", "arm64", "us-east-1"),
    Combination("none", "openai", "on", "arm64", "ap-south-2"),
    Combination("none", "scripted", "create-role", "x86_64", "af-south-1"),
    Combination("slack", "bedrock", "on", "arm64", "eu-south-1"),
    Combination("slack", "openai", "create-role", "arm64", "ap-southeast-5"),
    Combination("slack", "scripted", "off", "x86_64", "eu-central-2"),
    Combination("telegram", "bedrock", "create-role", "arm64", "me-south-1"),
    Combination("telegram", "openai", "off", "arm64", "mx-central-1"),
    Combination("telegram", "scripted", "on", "x86_64", "ca-west-1"),
    Combination("slack+telegram", "bedrock", "off", "x86_64", "us-west-2"),
    Combination("slack+telegram", "openai", "on", "x86_64", "ap-east-2"),
    Combination("slack+telegram", "scripted", "create-role", "arm64", "il-central-1"),
]
ACCOUNT = "123456789012"
# The roles that hold each end of the signed hand-over of a tap, and no other.
HAND_OVER = {"kms:GenerateMac": {"Channels"}, "kms:VerifyMac": {"Resume"}}
# The roles that run the agent, and so read an OpenAI-compatible endpoint's key.
AGENT_ROLES = {"Run", "Resume", "Settle"}


def test_every_pair_of_values_is_synthesized() -> None:
    # Every two settings: each pair of their values is in some row
    for first, second in combinations(range(len(SETTINGS)), 2):
        values = list(SETTINGS.values())
        found = {(row[first], row[second]) for row in COMBINATIONS}
        assert found == set(product(values[first], values[second])), (first, second)
    # And channels with models, the reported pair, exactly once each
    pairs = Counter((row.channels, row.model) for row in COMBINATIONS)
    assert pairs == Counter(product(CHANNELS, MODELS))
    assert len(set(COMBINATIONS)) == len(COMBINATIONS)


def test_every_kind_of_region_is_synthesized() -> None:
    # What synthesis changes for a region, on each architecture, is in some row
    kinds = {_kind(region, architecture) for region in REGIONS for architecture in ARCHITECTURES}
    assert {_kind(row.region, row.architecture) for row in COMBINATIONS} == kinds
    assert len({row.region for row in COMBINATIONS}) == len(COMBINATIONS)


@pytest.mark.parametrize("combination", COMBINATIONS, ids=str)
def test_each_combination_synthesizes_with_every_check_passing(
    cdk_context: dict[str, Any], tmp_path: Path, combination: Combination
) -> None:
    # Given the app built with the combination's settings, for its region
    app = App(context={**cdk_context, **combination.context()}, outdir=str(tmp_path))
    stacks = build(app, Environment(account=ACCOUNT, region=combination.region))

    # When it is synthesized (a finding left unacknowledged would raise here)
    app.synth()

    # Then the validation report holds no finding of any plugin
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert [v for plugin in report["pluginReports"] for v in plugin["violations"]] == []
    template = json.loads((tmp_path / stacks.api.template_file).read_text())
    resources: dict[str, Any] = template["Resources"]
    # No resource of the API stack waits on itself through others
    _assert_no_cycle(resources)
    roles = {
        logical_id.removesuffix(_hash(logical_id)).removesuffix("Role"): _statements(resource)
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::IAM::Role" and "Policies" in resource["Properties"]
    }
    for role, found in roles.items():
        # Every statement of a role has its own id
        sids = [statement["Sid"] for statement in found if "Sid" in statement]
        assert len(sids) == len(set(sids)), (role, sids)
    # The channels' secrets are read under one id, the model's key under another
    channel_readers = {role for role, found in roles.items() if _has(found, "ChannelSecrets")}
    expected = set() if combination.channels == "none" else AGENT_ROLES | {"Requests", "Channels"}
    assert channel_readers == expected
    key_readers = {role for role, found in roles.items() if _has(found, "ModelKeySecret")}
    assert key_readers == (AGENT_ROLES if combination.model == "openai" else set())
    # Only the channels role signs a hand-over and only the resume role verifies one
    for action, holders in HAND_OVER.items():
        assert {role for role, found in roles.items() if _allows(found, action)} == holders
    # And the region gets what the table says it needs
    web = json.loads((tmp_path / stacks.web.template_file).read_text())
    _assert_region_needs(combination, resources, web["Resources"])


def _kind(region: str, architecture: str) -> tuple[str, bool, bool, str | None]:
    """What synthesis changes for `region` on `architecture`."""
    needs = REGIONS[region]
    return (architecture, needs.snap_start, needs.cloudfront_logs, needs.adapter(architecture))


def _assert_region_needs(
    combination: Combination, api: dict[str, Any], web: dict[str, Any]
) -> None:
    needs = REGIONS[combination.region]
    functions = [
        resource["Properties"]
        for resource in api.values()
        if resource["Type"] == "AWS::Lambda::Function"
        and "POWERTOOLS_LOG_LEVEL" in json.dumps(resource)
    ]
    assert {f["Architectures"][0] for f in functions} == {combination.architecture}
    # SnapStart for the requests and channels functions, where the region offers it
    assert len([f for f in functions if "SnapStart" in f]) == (2 if needs.snap_start else 0)
    # The run and resume functions carry the adapter release AWS published there
    release = needs.adapter(combination.architecture)
    assert release is not None
    name = WEB_ADAPTER_LAYER_NAMES[combination.architecture]
    adapters = [_joined(layer) for f in functions for layer in f["Layers"] if "Fn::Join" in layer]
    assert len(adapters) == 2
    assert all(a.endswith(f":layer:{name}:{WEB_ADAPTER_RELEASES[release]}") for a in adapters)
    # The distribution writes standard logs only where CloudFront delivers them
    (distribution,) = [r for r in web.values() if r["Type"] == "AWS::CloudFront::Distribution"]
    logs = distribution["Properties"]["DistributionConfig"].get("Logging")
    assert (logs is not None) == needs.cloudfront_logs


def _joined(value: dict[str, Any]) -> str:
    """An `Fn::Join`'s text, each intrinsic written as `|`."""
    return "".join(part if isinstance(part, str) else "|" for part in value["Fn::Join"][1])


def _hash(logical_id: str) -> str:
    # CDK ends a logical id with eight hex digits of its path's hash
    return logical_id[-8:]


def _statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        statement
        for policy in role["Properties"]["Policies"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]


def _has(found: list[dict[str, Any]], sid: str) -> bool:
    return any(statement.get("Sid") == sid for statement in found)


def _allows(found: list[dict[str, Any]], action: str) -> bool:
    """Whether a statement allows `action` on some resource (wildcards included)."""
    return any(
        statement["Effect"] == "Allow"
        and any(fnmatchcase(action, allowed) for allowed in _listed(statement["Action"]))
        for statement in found
    )


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _references(node: Any) -> set[str]:
    """The logical ids `node` refers to (Ref, Fn::GetAtt, and Fn::Sub's ${...})."""
    if isinstance(node, list):
        return {found for item in node for found in _references(item)}
    if not isinstance(node, dict):
        return set()
    if set(node) == {"Ref"}:
        return {node["Ref"]}
    if set(node) == {"Fn::GetAtt"}:
        target = node["Fn::GetAtt"]
        return {target[0] if isinstance(target, list) else target.split(".")[0]}
    found = {found for value in node.values() for found in _references(value)}
    if "Fn::Sub" in node:
        text = node["Fn::Sub"][0] if isinstance(node["Fn::Sub"], list) else node["Fn::Sub"]
        found |= {name.split(".")[0] for name in _substituted(text)}
    return found


def _substituted(text: str) -> list[str]:
    names, rest = [], text
    while "${" in rest:
        rest = rest.split("${", 1)[1]
        name, _, rest = rest.partition("}")
        names.append(name)
    return names


def _assert_no_cycle(resources: dict[str, Any]) -> None:
    graph = {
        logical_id: (
            _references(resource.get("Properties", {}))
            | set(_listed(resource.get("DependsOn", [])))
        )
        & set(resources)
        for logical_id, resource in resources.items()
    }
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:  # pragma: no cover - the failure's message
        pytest.fail(f"a dependency cycle: {error.args[1]}")
