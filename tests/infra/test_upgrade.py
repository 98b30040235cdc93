"""Upgrading a deployment of the previous release in place: each deploy of the storage
stack creates at most one global secondary index, removes none, and replaces nothing
that holds data.

The previous release is commit a789256, the last before the `by_lease` and `by_notice`
indexes; `fixtures/storage_a789256.json` holds its storage stack's table and buckets as
that commit synthesizes them. UPGRADING.md runs the steps compared here: the storage stack
with `interlock:upgradeStep=1`, then as this release builds it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.settings import UPGRADE_STEP_KEY, Settings
from infra.storage import UPGRADE_INDEXES
from infra.wiring import build
from interlock.adapters import schema

PREVIOUS_RELEASE = Path(__file__).parent / "fixtures" / "storage_a789256.json"
# What would replace the resource if it changed (CloudFormation's "Update requires:
# Replacement"), by resource type.
REPLACING: dict[str, tuple[str, ...]] = {
    "AWS::DynamoDB::Table": ("TableName", "KeySchema", "LocalSecondaryIndexes"),
    "AWS::S3::Bucket": ("BucketName",),
}

Resources = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def previous() -> Resources:
    """The previous release's table and buckets."""
    resources: Resources = json.loads(PREVIOUS_RELEASE.read_text())["Resources"]
    return resources


@pytest.fixture(scope="module")
def first_step(cdk_context: dict[str, Any]) -> Resources:
    """The storage stack as the first upgrade deploy synthesizes it."""
    stacks = build(App(context={**cdk_context, UPGRADE_STEP_KEY: "1"}))
    resources: Resources = Template.from_stack(stacks.storage).to_json()["Resources"]
    return resources


@pytest.fixture(scope="module")
def current(storage_template: Template) -> Resources:
    """The storage stack as this release deploys it."""
    resources: Resources = storage_template.to_json()["Resources"]
    return resources


def _table(resources: Resources) -> dict[str, Any]:
    (table,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::DynamoDB::Table"]
    found: dict[str, Any] = table
    return found


def _indexes(resources: Resources) -> dict[str, dict[str, Any]]:
    return {i["IndexName"]: i for i in _table(resources).get("GlobalSecondaryIndexes", [])}


def _types(resources: Resources) -> dict[str, str]:
    return {
        d["AttributeName"]: d["AttributeType"] for d in _table(resources)["AttributeDefinitions"]
    }


def _assert_one_update(before: Resources, after: Resources) -> None:
    """`after` deploys over `before` as one CloudFormation update of the table."""
    # The table and the buckets keep their logical ids, types, retention and every
    # property whose change would replace them (and lose their data).
    for logical_id, resource in before.items():
        if resource["Type"] not in REPLACING:
            continue
        assert logical_id in after, f"{logical_id} would be deleted"
        kept = after[logical_id]
        assert kept["Type"] == resource["Type"]
        assert kept.get("DeletionPolicy") == resource.get("DeletionPolicy")
        for name in REPLACING[resource["Type"]]:
            assert kept["Properties"].get(name) == resource["Properties"].get(name), name
    # At most one index created and none deleted (the running code queries each of them),
    # the others untouched: changing one deletes and creates it.
    old, new = _indexes(before), _indexes(after)
    assert not set(old) - set(new)
    assert len(set(new) - set(old)) <= 1
    assert all(new[name] == old[name] for name in old)
    # DynamoDB refuses an attribute definition that no key uses, and a changed type.
    table = _table(after)
    keyed = {
        element["AttributeName"]
        for key_schema in [table["KeySchema"], *(i["KeySchema"] for i in new.values())]
        for element in key_schema
    }
    types, old_types = _types(after), _types(before)
    assert set(types) == keyed
    assert all(types[name] == kind for name, kind in old_types.items() if name in types)


def test_each_upgrade_deploy_is_one_update_cloudformation_accepts(
    previous: Resources, first_step: Resources, current: Resources
) -> None:
    _assert_one_update(previous, first_step)
    _assert_one_update(first_step, current)


def test_the_first_step_adds_the_lease_index_alone(
    previous: Resources, first_step: Resources
) -> None:
    assert set(_indexes(first_step)) - set(_indexes(previous)) == {schema.LEASE_INDEX}
    # Nor the attribute only the notice index is keyed on: no key would use it
    assert schema.NOTICE_INDEX_SORT not in _types(first_step)


def test_without_the_step_the_upgrade_would_create_two_indexes_at_once(
    previous: Resources, current: Resources
) -> None:
    # The update CloudFormation refuses, which the step splits in two
    added = set(_indexes(current)) - set(_indexes(previous))
    assert added == set(UPGRADE_INDEXES) == {schema.LEASE_INDEX, schema.NOTICE_INDEX}


def test_the_previous_release_had_the_expiry_and_inbox_indexes(previous: Resources) -> None:
    assert set(_indexes(previous)) == {schema.EXPIRY_INDEX, schema.INBOX_INDEX}


@pytest.mark.parametrize("step", ["0", "2", "-1", "one"])
def test_a_step_outside_the_upgrade_is_refused(step: str) -> None:
    with pytest.raises(ValueError, match=UPGRADE_STEP_KEY):
        Settings.from_context(App(context={UPGRADE_STEP_KEY: step}).node)


def test_no_step_is_the_table_the_code_needs() -> None:
    assert Settings.from_context(App().node).upgrade_step is None
