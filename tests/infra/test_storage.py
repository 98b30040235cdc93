"""The storage stack's template: the table the code expects, private expiring buckets."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import CfnElement, Stack
from aws_cdk.assertions import Match, Template

from infra.wiring import Stacks
from interlock.adapters import schema


def _properties(stack: Stack, template: Template, element: CfnElement) -> dict[str, Any]:
    logical_id = stack.get_logical_id(element)
    properties: dict[str, Any] = template.to_json()["Resources"][logical_id]["Properties"]
    return properties


@pytest.fixture(scope="module")
def table(stacks: Stacks, storage_template: Template) -> dict[str, Any]:
    child = stacks.storage.table.node.default_child
    assert isinstance(child, CfnElement)
    return _properties(stacks.storage, storage_template, child)


@pytest.fixture(scope="module")
def bucket(stacks: Stacks, storage_template: Template) -> dict[str, Any]:
    child = stacks.storage.bucket.node.default_child
    assert isinstance(child, CfnElement)
    return _properties(stacks.storage, storage_template, child)


def test_table_keys_and_indexes_are_those_of_the_shared_schema(table: dict[str, Any]) -> None:
    # Given the CreateTable request the moto fixtures and the local server use
    request = schema.create_table_request("any")

    # Then the deployed table has exactly its keys, attribute types, indexes and billing
    def by_name(definitions: list[dict[str, str]]) -> list[dict[str, str]]:
        return sorted(definitions, key=lambda d: d["AttributeName"])

    assert table["KeySchema"] == request["KeySchema"]
    assert by_name(table["AttributeDefinitions"]) == by_name(request["AttributeDefinitions"])
    assert table["GlobalSecondaryIndexes"] == request["GlobalSecondaryIndexes"]
    assert table["BillingMode"] == request["BillingMode"] == "PAY_PER_REQUEST"


def test_expiry_index_is_keyed_by_shard_and_logical_expiry(table: dict[str, Any]) -> None:
    indexes = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
    assert set(indexes) == {
        schema.EXPIRY_INDEX,
        schema.LEASE_INDEX,
        schema.NOTICE_INDEX,
        schema.INBOX_INDEX,
    }
    assert indexes[schema.EXPIRY_INDEX] == {
        "IndexName": schema.EXPIRY_INDEX,
        "KeySchema": [
            {"AttributeName": schema.EXPIRY_INDEX_PARTITION, "KeyType": "HASH"},
            {"AttributeName": schema.EXPIRY_INDEX_SORT, "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }
    types = {d["AttributeName"]: d["AttributeType"] for d in table["AttributeDefinitions"]}
    assert types[schema.EXPIRY_INDEX_PARTITION] == "S"
    assert types[schema.EXPIRY_INDEX_SORT] == "N"


def test_lease_index_is_keyed_by_shard_and_lease_and_holds_keys_only(
    table: dict[str, Any],
) -> None:
    indexes = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
    assert indexes[schema.LEASE_INDEX] == {
        "IndexName": schema.LEASE_INDEX,
        "KeySchema": [
            {"AttributeName": schema.EXPIRY_INDEX_PARTITION, "KeyType": "HASH"},
            {"AttributeName": schema.LEASE_INDEX_SORT, "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }
    types = {d["AttributeName"]: d["AttributeType"] for d in table["AttributeDefinitions"]}
    assert types[schema.LEASE_INDEX_SORT] == "N"


def test_notice_index_is_keyed_by_shard_and_due_time_and_holds_keys_only(
    table: dict[str, Any],
) -> None:
    indexes = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
    assert indexes[schema.NOTICE_INDEX] == {
        "IndexName": schema.NOTICE_INDEX,
        "KeySchema": [
            {"AttributeName": schema.EXPIRY_INDEX_PARTITION, "KeyType": "HASH"},
            {"AttributeName": schema.NOTICE_INDEX_SORT, "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }
    types = {d["AttributeName"]: d["AttributeType"] for d in table["AttributeDefinitions"]}
    assert types[schema.NOTICE_INDEX_SORT] == "N"


def test_inbox_index_is_keyed_by_user_and_creation_and_projects_an_inbox_row(
    table: dict[str, Any],
) -> None:
    indexes = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
    index = indexes[schema.INBOX_INDEX]
    assert index["KeySchema"] == [
        {"AttributeName": schema.INBOX_INDEX_PARTITION, "KeyType": "HASH"},
        {"AttributeName": schema.INBOX_INDEX_SORT, "KeyType": "RANGE"},
    ]
    # What a row shows, not the run's snapshot pointer, journal or secret hash
    assert index["Projection"]["ProjectionType"] == "INCLUDE"
    assert sorted(index["Projection"]["NonKeyAttributes"]) == sorted(schema.INBOX_PROJECTION)
    assert not {"secret_hash", "journal", "snapshot_key"} & set(schema.INBOX_PROJECTION)


def test_table_expires_items_by_ttl_attribute(table: dict[str, Any]) -> None:
    assert table["TimeToLiveSpecification"] == {
        "AttributeName": schema.TTL_ATTRIBUTE,
        "Enabled": True,
    }


def test_table_has_point_in_time_recovery_and_encryption(table: dict[str, Any]) -> None:
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["SSESpecification"] == {"SSEEnabled": True}
    assert table["DeletionProtectionEnabled"] is True


def test_stateful_resources_are_retained(storage_template: Template) -> None:
    retained = {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}
    storage_template.resource_count_is("AWS::DynamoDB::Table", 1)
    storage_template.all_resources("AWS::DynamoDB::Table", retained)
    storage_template.all_resources("AWS::S3::Bucket", retained)


def test_every_bucket_blocks_public_access_and_is_encrypted(storage_template: Template) -> None:
    storage_template.all_resources_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        },
    )


def test_every_bucket_refuses_plain_http(storage_template: Template) -> None:
    buckets = storage_template.find_resources("AWS::S3::Bucket")
    policies = storage_template.find_resources(
        "AWS::S3::BucketPolicy",
        {
            "Properties": {
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Effect": "Deny",
                                    "Action": "s3:*",
                                    "Principal": {"AWS": "*"},
                                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                }
                            )
                        ]
                    )
                }
            }
        },
    )
    guarded = {policy["Properties"]["Bucket"]["Ref"] for policy in policies.values()}
    assert guarded == set(buckets)


def test_payload_objects_expire_by_prefix(bucket: dict[str, Any]) -> None:
    rules = {rule["Id"]: rule for rule in bucket["LifecycleConfiguration"]["Rules"]}
    expiring = {
        rule["Prefix"]: rule["ExpirationInDays"] for rule in rules.values() if "Prefix" in rule
    }
    assert expiring == {
        schema.SNAPSHOT_PREFIX: schema.SNAPSHOT_LIFECYCLE_DAYS,
        schema.ANSWER_PREFIX: schema.ANSWER_LIFECYCLE_DAYS,
        schema.STEP_PREFIX: schema.SNAPSHOT_LIFECYCLE_DAYS,
    }
    assert all(rule["Status"] == "Enabled" for rule in rules.values())


def test_incomplete_multipart_uploads_are_aborted(storage_template: Template) -> None:
    abort = Match.object_like({"AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}})
    storage_template.all_resources_properties(
        "AWS::S3::Bucket",
        {"LifecycleConfiguration": {"Rules": Match.array_with([abort])}},
    )


def test_payload_bucket_logs_access_to_a_separate_bucket(
    stacks: Stacks, storage_template: Template, bucket: dict[str, Any]
) -> None:
    destination = bucket["LoggingConfiguration"]["DestinationBucketName"]["Ref"]
    assert destination != _ref_of_payload_bucket(stacks)
    assert destination in storage_template.find_resources("AWS::S3::Bucket")


def test_payload_bucket_is_unversioned(bucket: dict[str, Any]) -> None:
    # A decision, not an oversight (see infra.storage): expiry must really delete
    assert "VersioningConfiguration" not in bucket


def test_outputs_name_the_table_and_the_bucket(stacks: Stacks, storage_template: Template) -> None:
    storage = stacks.storage
    outputs = storage_template.find_outputs("*")
    assert outputs["TableName"]["Value"] == storage.resolve(storage.table.table_name)
    assert outputs["TableArn"]["Value"] == storage.resolve(storage.table.table_arn)
    assert outputs["BucketName"]["Value"] == storage.resolve(storage.bucket.bucket_name)
    assert outputs["BucketArn"]["Value"] == storage.resolve(storage.bucket.bucket_arn)
    # No export: another stack reads them without pinning this one
    assert all("Export" not in output for output in outputs.values())


def test_other_stacks_read_storage_through_its_named_outputs(stacks: Stacks) -> None:
    refs, api = stacks.storage.refs, stacks.api
    read = {"StackName": stacks.storage.stack_name}
    assert api.resolve(refs.table_name) == {
        "Fn::GetStackOutput": {**read, "OutputName": "TableName"}
    }
    assert api.resolve(refs.bucket_arn) == {
        "Fn::GetStackOutput": {**read, "OutputName": "BucketArn"}
    }


def _ref_of_payload_bucket(stacks: Stacks) -> str:
    ref: dict[str, str] = stacks.storage.resolve(stacks.storage.bucket.bucket_name)
    return ref["Ref"]
