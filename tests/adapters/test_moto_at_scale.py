"""`local.moto_at_scale` keeps moto's semantics: a transaction applies all of its entries
or none, whatever entry fails; a query finds what it found before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.serialize import BaseJSONSerializer, JSONSerializer, XFormedAttributePicker
from moto.core.utils import get_service_model

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


# Every kind of attribute value, nested, with the edge cases moto's serializer has rules for
EVERY_KIND: Final = {
    "s": {"S": "x"},
    "empty": {"S": ""},
    "n": {"N": "12.5"},
    "b": {"B": b"\x00\xff"},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2"]},
    "bs": {"BS": [b"a", b"b"]},
    "l": {"L": [{"S": "y"}, {"L": []}, {"M": {}}, {"M": {"deep": {"N": "1"}}}]},
    "null": {"NULL": True},
    "yes": {"BOOL": True},
    "no": {"BOOL": False},
}


def test_an_attribute_value_is_written_as_mots_own_serializer_writes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    moto_at_scale.install()
    service = get_service_model("dynamodb")
    serializer = JSONSerializer(
        service.operation_model("GetItem"), value_picker=XFormedAttributePicker()
    )
    shape = service.shape_for("AttributeValue")
    value = {"M": EVERY_KIND}

    fast: dict[str, Any] = {}
    serializer._serialize_type_structure(fast, value, shape, "v")
    monkeypatch.setattr(
        BaseJSONSerializer, "_serialize_type_structure", moto_at_scale.PLAIN_STRUCTURE
    )
    plain: dict[str, Any] = {}
    serializer._serialize_type_structure(plain, value, shape, "v")

    # the same members, in the same order, to the byte
    assert json.dumps(fast) == json.dumps(plain)
    assert fast["v"]["M"]["b"] == {"B": "AP8="}


def test_every_kind_of_value_comes_back_as_it_was_put(dynamodb: Any) -> None:
    item = {**_key("kinds"), **EVERY_KIND}
    dynamodb.put_item(TableName=TABLE, Item=item)
    got = dynamodb.get_item(TableName=TABLE, Key=_key("kinds"), ConsistentRead=True)["Item"]
    assert got == item
