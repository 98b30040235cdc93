"""What the agent's own tools need from AWS, given to the functions that run the agent.

A team's tools call their own services: a table of orders, a queue, a database in a
VPC. `ToolAccess` adds those needs to the run, resume and settle functions (the ones
that run the agent) and to no other, on top of what Interlock grants itself. It never
reaches Interlock's own data: a statement naming Interlock's table or bucket, or one
that names every resource of a service Interlock keeps its data, keys or functions in,
is refused at synthesis, as is an environment variable of Interlock's, Powertools' or
Lambda's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aws_cdk import Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam

# Services whose every resource ("*") would include Interlock's own: its table and
# indexes, its bucket, its keys, its functions, its secrets and parameters.
GUARDED_SERVICES: Final = ("dynamodb", "s3", "kms", "lambda", "secretsmanager", "ssm")
RESERVED_PREFIXES: Final = ("INTERLOCK_", "POWERTOOLS_", "AWS_", "_HANDLER", "LAMBDA_")
MAX_MEMORY_MB: Final = 10_240
MAX_TIMEOUT: Final = Duration.minutes(15)


@dataclass(frozen=True)
class ToolAccess:
    """The agent's tools' own needs.

    Attributes:
        statements: IAM statements added to the roles of the functions that run the
            agent. Interlock's own Deny statements still apply.
        environment: Environment variables for those functions.
        vpc: A VPC to run them in; they then reach DynamoDB, S3, Bedrock and Cognito
            through the VPC's routes (endpoints or a NAT gateway), which are the VPC's.
        vpc_subnets: Which of the VPC's subnets (private ones with egress by default).
        security_groups: Their security groups (a new one when None).
        memory_mb: Memory for those functions, when more than Interlock's own sizing.
        timeout: Their timeout, when longer than Interlock's own (at most 15 minutes).
        wildcard_reasons: Why a statement's resources hold a wildcard, by the
            statement's `sid` (cdk-nag flags every wildcard; a reason acknowledges it on
            those roles). A wildcard with no reason fails synthesis.
    """

    statements: Sequence[iam.PolicyStatement] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    vpc: ec2.IVpc | None = None
    vpc_subnets: ec2.SubnetSelection | None = None
    security_groups: Sequence[ec2.ISecurityGroup] | None = None
    memory_mb: int | None = None
    timeout: Duration | None = None
    wildcard_reasons: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sids = {statement.sid for statement in self.statements}
        if unknown := set(self.wildcard_reasons) - sids:
            raise ValueError(
                f"ToolAccess.wildcard_reasons names no statement's sid: {sorted(unknown)}"
            )
        if blank := [sid for sid, reason in self.wildcard_reasons.items() if not reason.strip()]:
            raise ValueError(f"ToolAccess.wildcard_reasons: say why for {blank}")
        for name in self.environment:
            if name.upper().startswith(RESERVED_PREFIXES):
                raise ValueError(
                    f"ToolAccess.environment: {name} is Interlock's, Powertools' or Lambda's "
                    "own variable; give your tool's setting another name"
                )
        if self.memory_mb is not None and not 128 <= self.memory_mb <= MAX_MEMORY_MB:
            raise ValueError(
                f"ToolAccess.memory_mb must be 128-{MAX_MEMORY_MB}, not {self.memory_mb}"
            )
        if self.timeout is not None and self.timeout.to_seconds() > MAX_TIMEOUT.to_seconds():
            raise ValueError("ToolAccess.timeout must be at most 15 minutes (Lambda's limit)")

    def checked_statements(self, stack: Stack, own: Sequence[str]) -> list[iam.PolicyStatement]:
        """The statements, each checked against Interlock's own resources.

        Args:
            stack: The stack the functions are in (to resolve references).
            own: Interlock's table and bucket ARNs, as the stack refers to them.

        Raises:
            ValueError: a statement names one of `own`, or every resource of a
                service Interlock keeps its own resources in.
        """
        resolved_own = [json.dumps(stack.resolve(arn)) for arn in own]
        for statement in self.statements:
            shown = json.dumps(stack.resolve(statement.to_statement_json()))
            if any(arn.strip('"') in shown for arn in resolved_own):
                raise ValueError(
                    "ToolAccess.statements: a statement names Interlock's own table or "
                    f"bucket, which the agent's tools may not reach: {shown}"
                )
            if _every_resource_of_a_guarded_service(stack.resolve(statement.to_statement_json())):
                raise ValueError(
                    "ToolAccess.statements: name the resources your tools use; a statement "
                    f"on every resource of {', '.join(GUARDED_SERVICES)} would include "
                    f"Interlock's own: {shown}"
                )
        return list(self.statements)


def _every_resource_of_a_guarded_service(statement: Mapping[str, Any]) -> bool:
    if statement.get("Effect") != "Allow":
        return False
    resources = _listed(statement.get("Resource"))
    actions = _listed(statement.get("Action"))
    if "*" not in resources:
        return False
    return any(a == "*" or a.split(":")[0] in GUARDED_SERVICES for a in actions)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]
