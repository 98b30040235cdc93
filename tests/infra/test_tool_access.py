"""What the agent's own tools need (`infra.tools.ToolAccess`), given to the functions that
run the agent and to no other, and never a way into Interlock's own data."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from infra.tools import ToolAccess
from infra.wiring import Stacks, build

AGENT_FUNCTIONS = {"run", "resume", "settle"}
ORDERS = "arn:aws:sqs:eu-west-1:123456789012:orders"


def _functions(stacks: Stacks) -> dict[str, dict[str, Any]]:
    """Each Interlock function's properties, by handler name."""
    template = Template.from_stack(stacks.api).to_json()
    found: dict[str, dict[str, Any]] = {}
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        props = resource["Properties"]
        if name := _name(props):
            found[name] = props
    return found


def _name(props: dict[str, Any]) -> str | None:
    description = str(props.get("Description", ""))
    if description.startswith("Interlock ") and ":" in description:
        return description.removeprefix("Interlock ").split(":")[0]
    return None


def _role_statements(stacks: Stacks, name: str) -> list[dict[str, Any]]:
    template = Template.from_stack(stacks.api).to_json()
    for resource in template["Resources"].values():
        props = resource["Properties"]
        if resource["Type"] == "AWS::IAM::Role" and props.get("Description", "").endswith(
            f"Interlock {name} function."
        ):
            return [s for p in props["Policies"] for s in p["PolicyDocument"]["Statement"]]
    raise AssertionError(f"no role for {name}")


def test_the_tools_needs_go_to_the_functions_that_run_the_agent_and_no_other(
    cdk_context: dict[str, Any],
) -> None:
    # Given a team's tools that send to their own queue and need more time and memory
    tools = ToolAccess(
        statements=[iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[ORDERS])],
        environment={"ORDERS_QUEUE": ORDERS},
        memory_mb=2048,
        timeout=Duration.minutes(10),
    )

    # When Interlock is built with them
    app = App(context=cdk_context)
    stacks = build(app, tools=tools)
    app.synth()

    # Then the run, resume and settle functions have them, and no other function does
    functions = _functions(stacks)
    assert set(functions) > AGENT_FUNCTIONS
    for name, props in functions.items():
        sends = any(
            s.get("Action") == "sqs:SendMessage" and s.get("Resource") == ORDERS
            for s in _role_statements(stacks, name)
        )
        variables = props["Environment"]["Variables"]
        if name in AGENT_FUNCTIONS:
            assert sends and variables["ORDERS_QUEUE"] == ORDERS, name
            assert (props["MemorySize"], props["Timeout"]) == (2048, 600), name
        else:
            assert not sends and "ORDERS_QUEUE" not in variables, name
            assert props["MemorySize"] <= 1024, name


def test_the_agents_functions_run_in_the_teams_vpc(cdk_context: dict[str, Any]) -> None:
    app = App(context=cdk_context)
    vpc = ec2.Vpc(Stack(app, "TeamNetwork"), "Vpc", max_azs=2)
    stacks = build(app, tools=ToolAccess(vpc=vpc))
    app.synth()

    functions = _functions(stacks)
    assert {name for name, props in functions.items() if "VpcConfig" in props} == AGENT_FUNCTIONS


@pytest.mark.parametrize(
    "statement",
    [
        iam.PolicyStatement(actions=["dynamodb:PutItem"], resources=["*"]),
        iam.PolicyStatement(actions=["s3:*"], resources=["*"]),
        iam.PolicyStatement(actions=["*"], resources=["*"]),
    ],
)
def test_a_statement_on_every_resource_of_interlocks_services_is_refused(
    cdk_context: dict[str, Any], statement: iam.PolicyStatement
) -> None:
    app = App(context=cdk_context)
    with pytest.raises(ValueError, match="name the resources your tools use"):
        build(app, tools=ToolAccess(statements=[statement]))


def test_a_statement_naming_interlocks_table_is_refused(cdk_context: dict[str, Any]) -> None:
    app = App(context=cdk_context)
    probe = App(context=cdk_context)
    table_arn = build(probe).storage.refs.table_arn
    statement = iam.PolicyStatement(actions=["dynamodb:UpdateItem"], resources=[table_arn])
    with pytest.raises(ValueError, match="Interlock's own table or bucket"):
        build(app, tools=ToolAccess(statements=[statement]))


@pytest.mark.parametrize("name", ["INTERLOCK_TABLE", "POWERTOOLS_SERVICE_NAME", "AWS_REGION"])
def test_a_variable_of_interlocks_or_lambdas_own_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        ToolAccess(environment={name: "x"})


REPORTS = "arn:aws:s3:::team-reports/reports/*"


def test_a_wildcard_of_the_tools_is_acknowledged_with_the_teams_reason_or_refused(
    cdk_context: dict[str, Any],
) -> None:
    statement = iam.PolicyStatement(
        sid="FileReports", actions=["s3:PutObject"], resources=[REPORTS]
    )
    # With no reason, synthesis refuses it
    with pytest.raises(ValueError, match="unexplained wildcard"):
        build(App(context=cdk_context), tools=ToolAccess(statements=[statement]))
    # With one, it is acknowledged on the roles that hold it and the checks pass
    app = App(context=cdk_context)
    why = {"FileReports": "A report's key names its chat, known at run time."}
    build(app, tools=ToolAccess(statements=[statement], wildcard_reasons=why))
    app.synth()
