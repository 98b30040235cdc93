"""SnapStart where it applies: the requests and channels functions restore from a
snapshot of a published version, and the API invokes that version's alias."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.permissions import FunctionName
from infra.snapstart import ALIAS_NAME, SNAPSTART_FUNCTIONS
from infra.wiring import Stacks
from tests.infra.support import function_construct, resource


@pytest.mark.parametrize("name", ["requests", "channels"])
def test_the_api_functions_restore_from_a_snapshot_through_an_alias(
    stacks: Stacks, api_template: Template, name: FunctionName
) -> None:
    construct = function_construct(stacks, name)
    properties = resource(stacks, api_template, construct.function)["Properties"]
    assert properties["SnapStart"] == {"ApplyOn": "PublishedVersions"}

    # The alias names the current published version
    alias = resource(stacks, api_template, construct.invocable)["Properties"]
    assert alias["Name"] == ALIAS_NAME
    version_id = alias["FunctionVersion"]["Fn::GetAtt"][0]
    version = api_template.to_json()["Resources"][version_id]
    assert version["Type"] == "AWS::Lambda::Version"

    # and every API method of the function invokes the alias, never $LATEST
    alias_id = stacks.api.get_logical_id(construct.invocable.node.default_child)
    uris = [json.dumps(m["Properties"]["Integration"]["Uri"]) for m in _methods_of(api_template)]
    function_id = stacks.api.get_logical_id(construct.function.node.default_child)
    assert any(alias_id in uri for uri in uris)
    assert not any(f'"{function_id}"' in uri for uri in uris)


@pytest.mark.parametrize("name", ["run", "resume", "sweeper"])
def test_the_others_start_as_they_always_did(
    stacks: Stacks, api_template: Template, name: FunctionName
) -> None:
    construct = function_construct(stacks, name)
    properties = resource(stacks, api_template, construct.function)["Properties"]
    assert "SnapStart" not in properties
    assert construct.invocable is construct.function
    assert name not in SNAPSTART_FUNCTIONS


def _methods_of(template: Template) -> list[dict[str, Any]]:
    methods = template.find_resources("AWS::ApiGateway::Method")
    return [m for m in methods.values() if "Uri" in m["Properties"].get("Integration", {})]
