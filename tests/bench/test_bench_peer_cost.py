"""The peer bench's arithmetic and Interlock's side of it, without langgraph installed:
capacity units from item sizes, the cost of an approval, the recorded peer figures, and
two identical approvals racing through the local server."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from bench.peers.cost import (
    API_GATEWAY_REST_USD,
    DYNAMODB_RRU_USD,
    DYNAMODB_WRU_USD,
    LAMBDA_REQUEST_USD,
    S3_GET_USD,
    S3_PUT_USD,
    approval_cost,
    capacity_units,
    s3_requests,
)
from bench.peers.interlock_race import race
from bench.peers.langgraph_cycle import recorded
from bench.peers.metering import item_size, metered, read_units, write_units
from local.emulator import Emulator


def _traffic(
    calls: dict[str, int], sent: dict[str, int] | None = None, **extra: object
) -> dict[str, Any]:
    return {"calls": calls, "total_calls": sum(calls.values()), "bytes_sent": sent or {}, **extra}


def test_a_write_pays_per_kilobyte_started_and_twice_in_a_transaction() -> None:
    assert [write_units(n) for n in (0, 1024, 1025, 3000)] == [1, 1, 2, 3]
    assert write_units(1025, transactional=True) == 4


def test_a_read_pays_per_four_kilobytes_halved_when_eventually_consistent() -> None:
    assert read_units(4096, consistent=True) == 1
    assert read_units(4097, consistent=True) == 2
    assert read_units(100, consistent=False) == 0.5
    assert read_units(8192, consistent=False) == 1
    assert read_units(100, consistent=True, transactional=True) == 2


def test_an_item_is_sized_by_its_names_and_values_as_dynamodb_bills_them() -> None:
    assert item_size({"pk": {"S": "ab"}, "n": {"N": "123"}}) == (2 + 2) + (1 + 3)
    # A number: one byte per two significant digits, plus one (a millisecond timestamp
    # is 8 bytes, not its 13 digits); trailing and leading zeros are not significant.
    assert item_size({"t": {"N": "1796418756551"}}) == 1 + 8
    assert item_size({"t": {"N": "1000"}}) == item_size({"t": {"N": "1"}}) == 1 + 2
    assert item_size({"t": {"N": "0"}}) == 1 + 1
    assert item_size({"t": {"N": "0.00120"}}) == 1 + 2
    # Up to DynamoDB's 38 significant digits, none rounded away
    assert item_size({"t": {"N": "1" + "0" * 36 + "1"}}) == 1 + 20
    # A binary by its bytes, not its base64; a boolean one byte.
    assert item_size({"b": {"B": b"\x00" * 30}, "f": {"BOOL": True}}) == (1 + 30) + (1 + 1)
    # A list or map: 3 bytes, plus 1 per element and the elements (a map's keys too).
    assert item_size({"l": {"L": [{"S": "ab"}, {"S": "c"}]}}) == 1 + 3 + (1 + 2) + (1 + 1)
    assert item_size({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + (1 + 1 + 1)


def test_measured_units_are_summed_over_operations() -> None:
    traffic = _traffic(
        {"dynamodb.PutItem": 2, "dynamodb.GetItem": 1},
        capacity_units={"dynamodb.PutItem": {"wru": 5}, "dynamodb.GetItem": {"rru": 0.5}},
    )
    assert capacity_units(traffic) == {
        "wru": 5,
        "table_wru": 5,
        "index_wru": 0,
        "rru": 0.5,
        "method": "item sizes at the emulator, index writes included",
    }


def test_without_measured_units_they_are_estimated_from_request_bytes() -> None:
    # Given two 1.5 KB puts, one 900-byte transaction, three reads and an S3 put
    traffic = _traffic(
        {
            "dynamodb.PutItem": 2,
            "dynamodb.TransactWriteItems": 1,
            "dynamodb.GetItem": 3,
            "s3.PutObject": 1,
        },
        {"dynamodb.PutItem": 3000, "dynamodb.TransactWriteItems": 900, "dynamodb.GetItem": 300},
    )
    # Then each put is 2 WRUs, the transaction 2, each read one strongly consistent RRU
    assert capacity_units(traffic) == {"wru": 6, "rru": 3, "method": "request bytes (rough)"}


def test_s3_requests_are_priced_by_class() -> None:
    traffic = _traffic(
        {"s3.PutObject": 2, "s3.GetObject": 1, "s3.HeadObject": 1, "s3.DeleteObject": 3}
    )
    assert s3_requests(traffic) == {"put_class": 2, "get_class": 2, "free": 3}


def test_an_approval_costs_both_phases_two_api_requests_and_two_invocations() -> None:
    pause = _traffic(
        {"dynamodb.PutItem": 1, "s3.PutObject": 1},
        capacity_units={"dynamodb.PutItem": {"wru": 10}, "dynamodb.Query": {"rru": 4}},
    )
    resume = _traffic(
        {"s3.PutObject": 1, "s3.GetObject": 1},
        capacity_units={
            "dynamodb.UpdateItem[journal]": {"wru": 20},
            "dynamodb.GetItem": {"rru": 2},
        },
    )

    cost = approval_cost(pause, resume)

    assert (cost["wru"], cost["rru"]) == (30, 6)
    assert cost["usd"]["dynamodb"] == pytest.approx(30 * DYNAMODB_WRU_USD + 6 * DYNAMODB_RRU_USD)
    assert cost["usd"]["s3"] == pytest.approx(2 * S3_PUT_USD + S3_GET_USD)
    assert cost["usd"]["api_gateway"] == pytest.approx(2 * API_GATEWAY_REST_USD)
    assert cost["usd"]["lambda_requests"] == pytest.approx(2 * LAMBDA_REQUEST_USD)
    assert cost["usd_per_approval"] == pytest.approx(37.3e-6)
    assert cost["usd_per_million_approvals"] == pytest.approx(37.3)


def test_the_meter_derives_units_from_the_items_at_the_emulator(emulator: Emulator) -> None:
    client = boto3.client("dynamodb", endpoint_url=emulator.endpoint, region_name="us-east-1")
    client.create_table(
        TableName="metered",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    big = {"pk": {"S": "a"}, "blob": {"S": "x" * 2500}}
    with metered(emulator):
        emulator.traffic.take()
        # When a 2.5 KB item is written, then read both ways, then updated by one byte
        client.put_item(TableName="metered", Item=big)
        client.get_item(TableName="metered", Key={"pk": {"S": "a"}}, ConsistentRead=True)
        client.get_item(TableName="metered", Key={"pk": {"S": "a"}})
        client.update_item(
            TableName="metered",
            Key={"pk": {"S": "a"}},
            UpdateExpression="SET f = :f",
            ExpressionAttributeValues={":f": {"S": "y"}},
        )
        units = emulator.traffic.take()["capacity_units"]

    # Then the put and the small update both pay for the whole item
    assert units["dynamodb.PutItem"] == {"wru": 3, "index_wru": 0}
    assert units["dynamodb.UpdateItem"] == {"wru": 3, "index_wru": 0}
    assert units["dynamodb.GetItem"] == {"rru": 1.5}
    assert "capacity_units" not in emulator.traffic.take(), "the meter is removed on exit"


def test_the_meter_counts_a_sparse_index_write_only_when_the_entry_changes(
    emulator: Emulator,
) -> None:
    client = boto3.client("dynamodb", endpoint_url=emulator.endpoint, region_name="us-east-1")
    client.create_table(
        TableName="indexed",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "part", "AttributeType": "S"},
            {"AttributeName": "due", "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_due",
                "KeySchema": [
                    {"AttributeName": "part", "KeyType": "HASH"},
                    {"AttributeName": "due", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    key = {"pk": {"S": "a"}}

    def update(expression: str, **values: Any) -> dict[str, float]:
        emulator.traffic.take()
        args = {"ExpressionAttributeValues": values} if values else {}
        client.update_item(TableName="indexed", Key=key, UpdateExpression=expression, **args)
        return dict(emulator.traffic.take()["capacity_units"]["dynamodb.UpdateItem"])

    with metered(emulator):
        client.put_item(TableName="indexed", Item={**key, "body": {"S": "x"}})
        # Entering the index, moving in it (a delete and a put), a change it does not
        # project, and leaving it
        entered = update("SET part = :s, due = :d", **{":s": {"S": "0"}, ":d": {"N": "1"}})
        moved = update("SET due = :d", **{":d": {"N": "2"}})
        unseen = update("SET body = :b", **{":b": {"S": "y"}})
        left = update("REMOVE part, due")

    assert [u["index_wru"] for u in (entered, moved, unseen, left)] == [1, 2, 0, 1]

    # In a transaction the table's write is doubled and the index's is not
    with metered(emulator):
        emulator.traffic.take()
        client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": "indexed",
                        "Key": key,
                        "UpdateExpression": "SET part = :s, due = :d",
                        "ExpressionAttributeValues": {":s": {"S": "0"}, ":d": {"N": "1"}},
                    }
                }
            ]
        )
        units = emulator.traffic.take()["capacity_units"]["dynamodb.TransactWriteItems"]
    assert units == {"wru": 2, "index_wru": 1}


def test_the_recorded_peer_figures_carry_what_the_comparison_needs() -> None:
    figures = recorded()

    assert figures["recorded"]["versions"]["langgraph-checkpoint-aws"]
    for phase in ("pause", "resume"):
        assert figures[phase]["total_calls"] > 0 and figures[phase]["bytes_written"] > 0
        assert figures[phase]["capacity_units"]
    assert figures["race"]["downloads"] == 2, "the peer downloads once per racer"
    assert approval_cost(figures["pause"], figures["resume"])["usd_per_approval"] > 0


def test_two_identical_approvals_racing_download_once(emulator: Emulator) -> None:
    figures = race(emulator)

    assert figures["race"]["downloads"] == 1
    assert figures["race"]["http_statuses"] == [200, 409]
    assert sorted(o["result"] for o in figures["race"]["outcomes"]) == ["completed", "in_progress"]
    assert figures["reruns"]["rerun_on_resume"]["model_calls"] == 0
