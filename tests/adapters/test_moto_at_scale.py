"""`local.moto_at_scale` keeps moto's semantics: a transaction applies all of its entries
or none, whatever entry fails; a query finds what it found before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from local import moto_at_scale
from tests.conftest import REGION

TABLE = "rollback"


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    moto_at_scale.install()  # as the emulator and the test session do (idempotent)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
        )
        client.put_item(TableName=TABLE, Item={**_key("a"), "n": {"N": "1"}})
        yield client


def _key(name: str) -> dict[str, Any]:
    return {"pk": {"S": name}, "sk": {"S": "ITEM"}}


def _items(client: Any) -> dict[str, Any]:
    found = client.scan(TableName=TABLE)["Items"]
    return {item["pk"]["S"]: item.get("n", {}).get("N") for item in found}


def _bump_a_and_put_b() -> list[dict[str, Any]]:
    return [
        {
            "Update": {
                "TableName": TABLE,
                "Key": _key("a"),
                "UpdateExpression": "SET n = :two",
                "ExpressionAttributeValues": {":two": {"N": "2"}},
            }
        },
        {"Put": {"TableName": TABLE, "Item": {**_key("b"), "n": {"N": "9"}}}},
    ]


def test_a_transaction_that_passes_applies_every_entry(dynamodb: Any) -> None:
    dynamodb.transact_write_items(TransactItems=_bump_a_and_put_b())
    assert _items(dynamodb) == {"a": "2", "b": "9"}


def test_a_failed_condition_after_writes_leaves_every_item_as_it_was(dynamodb: Any) -> None:
    failing = {
        "ConditionCheck": {
            "TableName": TABLE,
            "Key": _key("c"),
            "ConditionExpression": "attribute_exists(pk)",
        }
    }
    with pytest.raises(ClientError, match="TransactionCanceled"):
        dynamodb.transact_write_items(TransactItems=[*_bump_a_and_put_b(), failing])
    assert _items(dynamodb) == {"a": "1"}


def test_an_item_named_twice_is_refused_and_nothing_changes(dynamodb: Any) -> None:
    twice = {"Delete": {"TableName": TABLE, "Key": _key("a")}}
    with pytest.raises(ClientError):
        dynamodb.transact_write_items(TransactItems=[*_bump_a_and_put_b(), twice])
    assert _items(dynamodb) == {"a": "1"}


def test_a_query_finds_its_partition_in_order_and_nothing_else(dynamodb: Any) -> None:
    # Given a partition of several items beside others
    for sk in ("EVENT#3", "EVENT#1", "TURN#1", "EVENT#2"):
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "chat"}, "sk": {"S": sk}})
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "other"}, "sk": {"S": "EVENT#0"}})

    # When one is queried by its key and a range condition, newest first, two at a time
    found = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
        ExpressionAttributeValues={":pk": {"S": "chat"}, ":events": {"S": "EVENT#"}},
        ScanIndexForward=False,
        Limit=2,
    )

    # Then it is answered from that partition alone, as DynamoDB answers it
    assert [item["sk"]["S"] for item in found["Items"]] == ["EVENT#3", "EVENT#2"]
    assert found["LastEvaluatedKey"] == {"pk": {"S": "chat"}, "sk": {"S": "EVENT#2"}}
    rest = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
        ExpressionAttributeValues={":pk": {"S": "chat"}, ":events": {"S": "EVENT#"}},
        ScanIndexForward=False,
        ExclusiveStartKey=found["LastEvaluatedKey"],
    )
    assert [item["sk"]["S"] for item in rest["Items"]] == ["EVENT#1"]
