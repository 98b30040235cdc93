"""Durable state: the DynamoDB table and the S3 bucket behind it.

The table's keys and indexes are translated from `interlock.adapters.schema`, the same
definition the local server and the moto fixtures create their tables from, so the
deployed table cannot drift from the one the tests exercise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aws_cdk import (
    Acknowledgment,
    CfnOutput,
    CfnResource,
    Duration,
    Fn,
    RemovalPolicy,
    Stack,
    Validations,
)
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from interlock.adapters import schema

# Long enough to investigate a request that someone questions a quarter later.
ACCESS_LOG_RETENTION_DAYS: Final = 90
# An abandoned multipart upload is billed yet invisible to listings; any real upload of a
# snapshot or answer finishes within seconds.
INCOMPLETE_UPLOAD_DAYS: Final = 1
# The indexes the previous release's table lacks (commit a789256 had by_expiry and
# by_user), in the order an upgrade creates them. CloudFormation creates at most one
# global secondary index on a table per stack update, so an upgrade deploys the storage
# stack once per index: `interlock:upgradeStep` (UPGRADING.md).
UPGRADE_INDEXES: Final = (schema.LEASE_INDEX, schema.NOTICE_INDEX)
# The logs of the function that empties a torn-down stage's buckets: long enough to
# look into a teardown that failed.
AUTO_DELETE_LOG_RETENTION: Final = logs.RetentionDays.ONE_MONTH
# CDK's singleton provider of that function, one per stack.
_AUTO_DELETE_PROVIDER: Final = "Custom::S3AutoDeleteObjectsCustomResourceProvider"

_LOGS_USE_BUCKET_POLICY: Final = "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"
_ATTRIBUTE_TYPES: Final = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}
_BILLING_MODES: Final = {"PAY_PER_REQUEST": dynamodb.BillingMode.PAY_PER_REQUEST}
_PROJECTIONS: Final = {
    "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
    "INCLUDE": dynamodb.ProjectionType.INCLUDE,
    "ALL": dynamodb.ProjectionType.ALL,
}


class Storage(Construct):
    """The table and the payload bucket, private and encrypted.

    Attributes:
        table: Pointers, approvals, turns, audit events, limits and the outbox.
        bucket: Paused-agent snapshots and large answers, each expiring by prefix.
        access_logs: Receives the server access logs of `bucket`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        upgrade_step: int | None = None,
    ) -> None:
        """Create the storage resources.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            removal_policy: What happens to the data when the stack is deleted. RETAIN by
                default: open requests and their audit trail must outlive a stack.
            upgrade_step: While upgrading a table that lacks `UPGRADE_INDEXES`, how many
                of them this deploy has (`indexes_left_out`); None for every index.
        """
        super().__init__(scope, construct_id)
        # ACLs are disabled on every bucket, so S3 may deliver access logs only through
        # the log bucket's policy. Pinned here so the construct does not depend on the
        # app's cdk.json carrying this flag.
        self.node.set_context(_LOGS_USE_BUCKET_POLICY, True)
        self.table = _table(self, removal_policy, indexes_left_out(upgrade_step))
        self.access_logs = _access_log_bucket(self, removal_policy)
        self.bucket = _payload_bucket(self, removal_policy, self.access_logs)
        _log_auto_deletes(self, removal_policy)


@dataclass(frozen=True)
class StorageRefs:
    """The table and the bucket as another stack of the same account and region sees them.

    Each value reads a named output of the storage stack with `Fn::GetStackOutput`: a
    weak reference, as the app's `@aws-cdk/core:defaultCrossStackReferences` flag asks,
    so no export pins the storage stack. Named outputs rather than CDK's generated ones
    keep the values (and the checks' findings that quote them) stable and readable.
    """

    table_name: str
    table_arn: str
    bucket_name: str
    bucket_arn: str

    def objects(self, prefix: str) -> str:
        """The ARN pattern of every object under `prefix` in the bucket."""
        return f"{self.bucket_arn}/{prefix}*"

    def index(self, name: str) -> str:
        """The ARN of the table's global secondary index `name`."""
        return f"{self.table_arn}/index/{name}"


class StorageStack(Stack):
    """A stack holding only `Storage`, so stateless stacks can be replaced freely.

    Attributes:
        table: The table.
        bucket: The payload bucket.
        refs: Both, for use in other stacks (only there: the values read this stack's
            outputs).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        upgrade_step: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Create the stack.

        Args:
            scope: The app or stage.
            construct_id: The stack id.
            removal_policy: Passed to `Storage`.
            upgrade_step: Passed to `Storage`.
            **kwargs: Passed to `Stack` (env, stack_name, ...).
        """
        super().__init__(scope, construct_id, **kwargs)
        storage = Storage(self, "Storage", removal_policy=removal_policy, upgrade_step=upgrade_step)
        self.table = storage.table
        self.bucket = storage.bucket
        outputs = {
            "table_name": ("TableName", self.table.table_name),
            "table_arn": ("TableArn", self.table.table_arn),
            "bucket_name": ("BucketName", self.bucket.bucket_name),
            "bucket_arn": ("BucketArn", self.bucket.bucket_arn),
        }
        for output_name, value in outputs.values():
            CfnOutput(self, output_name, value=value)
        self.refs = StorageRefs(
            **{
                field: Fn.get_stack_output(self.stack_name, output_name)
                for field, (output_name, _) in outputs.items()
            }
        )


def indexes_left_out(upgrade_step: int | None) -> frozenset[str]:
    """The new indexes an upgrade step leaves to a later deploy: all of `UPGRADE_INDEXES`
    but the first `upgrade_step`; none without a step (the table the code needs)."""
    if upgrade_step is None:
        return frozenset()
    return frozenset(UPGRADE_INDEXES[upgrade_step:])


def _table(
    scope: Construct, removal_policy: RemovalPolicy, left_out: frozenset[str]
) -> dynamodb.Table:
    # The name is a placeholder: CloudFormation names the table, so a replacement or a
    # second stage in the same account never collides.
    request = schema.create_table_request("unused")
    types = {d["AttributeName"]: d["AttributeType"] for d in request["AttributeDefinitions"]}
    partition_key, sort_key = _keys(request["KeySchema"], types)
    table = dynamodb.Table(
        scope,
        "Table",
        partition_key=partition_key,
        sort_key=sort_key,
        billing_mode=_BILLING_MODES[request["BillingMode"]],
        time_to_live_attribute=schema.TTL_ATTRIBUTE,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        # AWS-managed key rather than a customer-managed one: key use is still logged in
        # CloudTrail, yet the functions need no kms: statements (the key policy admits any
        # principal of the account that DynamoDB authorizes), and there is no key policy
        # or rotation to run. Revisit if another account must ever read the table.
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        deletion_protection=removal_policy == RemovalPolicy.RETAIN,
        removal_policy=removal_policy,
    )
    for index in request.get("GlobalSecondaryIndexes", []):
        if index["IndexName"] in left_out:
            # Its key attributes go too: DynamoDB refuses a definition no key uses.
            continue
        projection = index["Projection"]
        partition_key, sort_key = _keys(index["KeySchema"], types)
        table.add_global_secondary_index(
            index_name=index["IndexName"],
            partition_key=partition_key,
            sort_key=sort_key,
            projection_type=_PROJECTIONS[projection["ProjectionType"]],
            non_key_attributes=projection.get("NonKeyAttributes"),
        )
    return table


def _keys(
    key_schema: Sequence[Mapping[str, str]], types: Mapping[str, str]
) -> tuple[dynamodb.Attribute, dynamodb.Attribute | None]:
    """The partition key and the optional sort key of a boto3-style key schema."""
    by_role = {
        element["KeyType"]: dynamodb.Attribute(
            name=element["AttributeName"],
            type=_ATTRIBUTE_TYPES[types[element["AttributeName"]]],
        )
        for element in key_schema
    }
    return by_role["HASH"], by_role.get("RANGE")


def _payload_bucket(
    scope: Construct, removal_policy: RemovalPolicy, access_logs: s3.IBucket
) -> s3.Bucket:
    return _private_bucket(
        scope,
        "Payloads",
        removal_policy,
        lifecycle_rules=[
            _expire("ExpireSnapshots", schema.SNAPSHOT_PREFIX, schema.SNAPSHOT_LIFECYCLE_DAYS),
            _expire("ExpireAnswers", schema.ANSWER_PREFIX, schema.ANSWER_LIFECYCLE_DAYS),
            # A journal step lives no longer than the paused run it belongs to.
            _expire("ExpireSteps", schema.STEP_PREFIX, schema.SNAPSHOT_LIFECYCLE_DAYS),
        ],
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix="payloads/",
    )


def _access_log_bucket(scope: Construct, removal_policy: RemovalPolicy) -> s3.Bucket:
    bucket = _private_bucket(
        scope,
        "AccessLogs",
        removal_policy,
        lifecycle_rules=[_expire("ExpireAccessLogs", None, ACCESS_LOG_RETENTION_DAYS)],
    )
    Validations.of(bucket).acknowledge(
        Acknowledgment(
            id="AwsSolutions-S1",
            reason=(
                "This is the access-log destination of the payload bucket; logging it too "
                "would only move the finding to yet another bucket. Its one intended writer "
                "is the S3 logging service, admitted by its bucket policy."
            ),
        )
    )
    return bucket


def _private_bucket(
    scope: Construct,
    construct_id: str,
    removal_policy: RemovalPolicy,
    *,
    lifecycle_rules: Sequence[s3.LifecycleRule],
    **kwargs: Any,
) -> s3.Bucket:
    return s3.Bucket(
        scope,
        construct_id,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        # ACLs off: only IAM and the bucket policy decide who may read.
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        # SSE-S3 rather than SSE-KMS: readers are already limited to the function roles by
        # IAM and the bucket policy, so a key policy would add no boundary, only per-request
        # KMS calls on the resume path. Access-log delivery also requires SSE-S3.
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        # Unversioned on purpose: each key belongs to one interrupt of one chat, the table
        # (with PITR) is the authority that points at it, and lifecycle expiry must really
        # delete chat content instead of leaving noncurrent versions behind.
        versioned=False,
        lifecycle_rules=[
            *lifecycle_rules,
            s3.LifecycleRule(
                id="AbortIncompleteUploads",
                abort_incomplete_multipart_upload_after=Duration.days(INCOMPLETE_UPLOAD_DAYS),
            ),
        ],
        removal_policy=removal_policy,
        # CloudFormation deletes only empty buckets: a stage torn down empties its own.
        auto_delete_objects=removal_policy == RemovalPolicy.DESTROY,
        **kwargs,
    )


def _log_auto_deletes(scope: Construct, removal_policy: RemovalPolicy) -> None:
    """Give the function that empties a torn-down stage's buckets a log group the stack
    owns, with the stack's removal policy.

    CDK creates that function with no log group, so Lambda would create
    `/aws/lambda/<name>` on its first run (the stack's creation, and again its deletion)
    and keep it, with no retention, after `cdk destroy`. Named in the function's logging
    config, this group is deleted after the function, so nothing writes to it once gone.
    """
    provider = Stack.of(scope).node.try_find_child(_AUTO_DELETE_PROVIDER)
    if provider is None:  # a retained stage's buckets are not emptied
        return
    handler = provider.node.find_child("Handler")
    assert isinstance(handler, CfnResource)
    group = logs.LogGroup(
        scope,
        "AutoDeleteLogs",
        retention=AUTO_DELETE_LOG_RETENTION,
        removal_policy=removal_policy,
    )
    handler.add_property_override("LoggingConfig", {"LogGroup": group.log_group_name})


def _expire(rule_id: str, prefix: str | None, days: int) -> s3.LifecycleRule:
    return s3.LifecycleRule(id=rule_id, prefix=prefix, expiration=Duration.days(days))
