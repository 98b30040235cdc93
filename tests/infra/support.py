"""Reading the functions and their roles back out of a synthesized API template."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Template

from infra.functions import InterlockFunction
from infra.permissions import FunctionName
from infra.wiring import Stacks
from interlock.api.routes import FUNCTIONS

# Every function the API stack deploys: the route table's, then the scheduled sweeper and
# the settle function that consumes its queue.
ALL_FUNCTIONS: tuple[FunctionName, ...] = (*FUNCTIONS, "sweeper", "settle")
# The per-agent configuration parameter the configured app names (see conftest).
AGENT_CONFIG_PARAMETER = "/interlock/agents/support"
TABLE_ARN = {"Fn::GetStackOutput": {"StackName": "InterlockStorage", "OutputName": "TableArn"}}
BUCKET_ARN = {"Fn::GetStackOutput": {"StackName": "InterlockStorage", "OutputName": "BucketArn"}}
SITE_DOMAIN = {
    "Fn::GetStackOutput": {"StackName": "InterlockWeb", "OutputName": "DistributionDomainName"}
}
# The default CORS origin: the card page's CloudFront URL, read from the hosting stack.
SITE_ORIGIN = {"Fn::Join": ["", ["https://", SITE_DOMAIN]]}
SITE_URL = {"Fn::Join": ["", ["https://", SITE_DOMAIN, "/"]]}
# What the configured app (see conftest) overrides.
CONFIGURED_ORIGIN = "https://cards.example.com"
CONFIGURED_AUTH_PREFIX = "interlock-cards"
CONFIGURED_QUALIFIER = "team42abc"


def function_construct(stacks: Stacks, name: FunctionName) -> InterlockFunction:
    """The construct of function `name`, whether it serves the API, the schedule or the
    settle queue."""
    if name == "sweeper":
        return stacks.api.sweeper
    if name == "settle":
        return stacks.api.settle
    return stacks.api.functions[name]


def resource(stacks: Stacks, template: Template, construct: Any) -> dict[str, Any]:
    """The template resource of `construct`'s CloudFormation element in the API stack."""
    logical_id = stacks.api.get_logical_id(construct.node.default_child)
    found: dict[str, Any] = template.to_json()["Resources"][logical_id]
    return found


def statements(stacks: Stacks, template: Template, name: FunctionName) -> list[dict[str, Any]]:
    """The statements of function `name`'s one inline policy."""
    role = resource(stacks, template, function_construct(stacks, name).role)
    (policy,) = role["Properties"]["Policies"]
    found: list[dict[str, Any]] = policy["PolicyDocument"]["Statement"]
    return found


def by_sid(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Statements by their Sid."""
    return {statement["Sid"]: statement for statement in found}


def listed(value: Any) -> list[Any]:
    """A policy field that may be one value or a list, as a list."""
    return value if isinstance(value, list) else [value]


def actions(found: list[dict[str, Any]]) -> list[str]:
    """Every action the statements allow, sorted and without repeats (a Deny statement
    narrows what these allow: `tests/infra/test_least_privilege.py`)."""
    allowed = [statement for statement in found if statement["Effect"] == "Allow"]
    return sorted({action for statement in allowed for action in listed(statement["Action"])})


def logical_id(stacks: Stacks, construct: Any) -> str:
    """The logical id of `construct`'s CloudFormation element in the API stack."""
    return stacks.api.get_logical_id(construct.node.default_child)


def invoke_config(stacks: Stacks, template: Template, name: FunctionName) -> dict[str, Any]:
    """The properties of function `name`'s asynchronous invocation settings."""
    function = {"Ref": logical_id(stacks, function_construct(stacks, name).function)}
    (found,) = [
        config["Properties"]
        for config in template.find_resources("AWS::Lambda::EventInvokeConfig").values()
        if config["Properties"]["FunctionName"] == function
    ]
    properties: dict[str, Any] = found
    return properties
