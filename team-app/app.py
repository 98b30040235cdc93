#!/usr/bin/env python3
"""A team's own CDK app with Interlock in it: the team's stack, and Interlock's stacks
serving the team's agent. Interlock comes from its wheel (`pip install
'interlock[cdk]'`): nothing here reaches into Interlock's repository.

    pip install 'interlock[cdk] @ file:///path/to/interlock-0.1.0-py3-none-any.whl'
    npx cdk synth
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct
from interlock_cdk import AgentChoice, ToolAccess, build

HERE = Path(__file__).resolve().parent


class ReportsStack(Stack):
    """The team's own stack, as it was before Interlock: a bucket of reports and a table
    of refunds. Interlock's checks are not its business (it would fail cdk-nag's: no
    access logs, no TLS rule, no point-in-time recovery)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        s3.Bucket(self, "Reports", removal_policy=RemovalPolicy.DESTROY)
        key = dynamodb.Attribute(name="order_id", type=dynamodb.AttributeType.STRING)
        self.refunds = dynamodb.Table(
            self, "Refunds", partition_key=key, removal_policy=RemovalPolicy.DESTROY
        )


app = App()
reports = ReportsStack(app, "TeamReports")
build(
    app,
    agent=AgentChoice.of(
        "my_agent.agent:build",
        HERE / "my_agent",
        HERE / "my_agent" / "requirements.txt",
    ),
    # The agent's tool records each refund in the team's table: the functions that run
    # the agent may write there, and know where it is.
    tools=ToolAccess(
        statements=[
            iam.PolicyStatement(actions=["dynamodb:PutItem"], resources=[reports.refunds.table_arn])
        ],
        environment={"REFUNDS_TABLE": reports.refunds.table_name},
    ),
)
app.synth()
