"""What one approval cycle (a turn that pauses, then the resume that finishes it) costs
in AWS requests, excluding the model, from the traffic the emulator counted.

Prices are published on-demand list prices for us-east-1, without free tiers. DynamoDB
on-demand bills request units, not calls: each phase's units come from
`bench.peers.metering` (item sizes at the emulator, an estimate) when the traffic
carries them, else from request bytes (a rougher estimate; see `capacity_units`).
"""

from __future__ import annotations

import math
from typing import Any, Final

from bench.peers.metering import write_units

REGION: Final = "us-east-1"
PRICES_CHECKED: Final = "2026-12-01"
# DynamoDB on-demand, per request unit. AWS halved on-demand throughput prices from
# 2024-11-01 ($1.25 and $0.25 per million before). aws.amazon.com/dynamodb/pricing/on-demand/
DYNAMODB_WRU_USD: Final = 0.625 / 1_000_000
DYNAMODB_RRU_USD: Final = 0.125 / 1_000_000
# S3 Standard requests: PUT, COPY, POST, LIST per 1,000; GET, SELECT and all other per
# 1,000; DELETE is free. aws.amazon.com/s3/pricing/
S3_PUT_USD: Final = 0.005 / 1_000
S3_GET_USD: Final = 0.0004 / 1_000
# API Gateway REST APIs, first 333 million requests a month. aws.amazon.com/api-gateway/pricing/
API_GATEWAY_REST_USD: Final = 3.50 / 1_000_000
# Lambda: requests, and arm64 duration (first 7.5 billion GB-s a month), which the totals
# leave out (see ASSUMPTIONS). aws.amazon.com/lambda/pricing/
LAMBDA_REQUEST_USD: Final = 0.20 / 1_000_000
LAMBDA_ARM64_GB_S_USD: Final = 0.0000133334

PRICES: Final = {
    "region": REGION,
    "checked": PRICES_CHECKED,
    "dynamodb_on_demand_per_million": {
        "write_request_units": 0.625,
        "read_request_units": 0.125,
        "since": "2024-11-01 (halved from 1.25 and 0.25)",
        "source": "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    "s3_standard_per_1000_requests": {
        "put_copy_post_list": 0.005,
        "get_and_others": 0.0004,
        "delete": 0.0,
        "source": "https://aws.amazon.com/s3/pricing/",
    },
    "api_gateway_rest_per_million": {
        "first_333_million": 3.50,
        "source": "https://aws.amazon.com/api-gateway/pricing/",
    },
    "lambda": {
        "requests_per_million": 0.20,
        "arm64_per_gb_second": LAMBDA_ARM64_GB_S_USD,
        "source": "https://aws.amazon.com/lambda/pricing/",
    },
}
ASSUMPTIONS: Final = [
    "The model is excluded: its calls are the same on both sides (see reruns).",
    "Both are hosted the same way: an approval is two API Gateway REST requests and two "
    "Lambda invocations (the turn that pauses, the resume).",
    "Lambda duration (GB-s) is excluded from the totals: it is mostly waiting on the "
    "model; at equal duration it adds the same to both (2 x seconds x GB x arm64 price).",
    "DynamoDB request units are estimated at the emulator from item sizes (moto's "
    "size rule): a write pays the larger of the item before and after, per KB, twice in "
    "a transaction (a ConditionCheck too); a read per 4 KB, half when eventually "
    "consistent; a Query for the sum of the items it returned.",
    "Storage, data transfer, TTL deletes and S3 lifecycle are left out; free tiers too.",
]
DYNAMODB_WRITES: Final = (
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
)
DYNAMODB_READS: Final = ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems")
S3_GET_CLASS: Final = ("GetObject", "HeadObject")
S3_FREE: Final = ("DeleteObject",)


def _operation(name: str) -> tuple[str, str]:
    """`dynamodb.TransactWriteItems[journal]` -> (`dynamodb`, `TransactWriteItems`)."""
    service, _, op = name.partition(".")
    return service, op.split("[")[0]


def capacity_units(traffic: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB write and read request units of one phase's traffic.

    With `capacity_units` in the traffic (the meter's per-operation units) those are
    summed. Without, they are estimated from request bytes: each write call at least
    its average request size in KB (doubled for a transaction), each read call one
    strongly consistent unit; a lower bound for updates of large items and big reads.
    """
    measured = traffic.get("capacity_units")
    if measured is not None:
        table = sum(u.get("wru", 0) for u in measured.values())
        index = sum(u.get("index_wru", 0) for u in measured.values())
        return {
            "wru": table + index,
            "table_wru": table,
            "index_wru": index,
            "rru": sum(u.get("rru", 0) for u in measured.values()),
            "method": "item sizes at the emulator, index writes included",
        }
    wru, rru = 0.0, 0.0
    for name, calls in traffic["calls"].items():
        service, op = _operation(name)
        if service != "dynamodb" or not calls:
            continue
        if op in DYNAMODB_WRITES:
            average = math.ceil(traffic["bytes_sent"].get(name, 0) / calls)
            wru += calls * write_units(average, op == "TransactWriteItems")
        elif op in DYNAMODB_READS:
            rru += calls
    return {"wru": wru, "rru": rru, "method": "request bytes (rough)"}


def s3_requests(traffic: dict[str, Any]) -> dict[str, int]:
    """S3 requests of one phase by price class; unknown operations count as PUT class."""
    classes = {"put_class": 0, "get_class": 0, "free": 0}
    for name, calls in traffic["calls"].items():
        service, op = _operation(name)
        if service != "s3":
            continue
        kind = "get_class" if op in S3_GET_CLASS else "free" if op in S3_FREE else "put_class"
        classes[kind] += calls
    return classes


def phase_cost(traffic: dict[str, Any]) -> dict[str, Any]:
    """Units and US dollars of one phase's DynamoDB and S3 requests."""
    units, s3 = capacity_units(traffic), s3_requests(traffic)
    dynamodb = units["wru"] * DYNAMODB_WRU_USD + units["rru"] * DYNAMODB_RRU_USD
    storage = s3["put_class"] * S3_PUT_USD + s3["get_class"] * S3_GET_USD
    return {
        "capacity_units": units,
        "s3_requests": s3,
        "usd": {"dynamodb": dynamodb, "s3": storage},
    }


def approval_cost(
    pause: dict[str, Any], resume: dict[str, Any], api_requests: int = 2, invocations: int = 2
) -> dict[str, Any]:
    """The AWS cost of one approval cycle: both phases, the API and Lambda requests.

    Args:
        pause: The traffic of the turn that paused (a `Traffic.take()`).
        resume: The traffic of the resume that finished it.
        api_requests: API Gateway requests per approval.
        invocations: Lambda invocations per approval.
    """
    phases = {"pause": phase_cost(pause), "resume": phase_cost(resume)}
    usd = {
        "dynamodb": sum(p["usd"]["dynamodb"] for p in phases.values()),
        "s3": sum(p["usd"]["s3"] for p in phases.values()),
        "api_gateway": api_requests * API_GATEWAY_REST_USD,
        "lambda_requests": invocations * LAMBDA_REQUEST_USD,
    }
    total = sum(usd.values())
    return {
        **phases,
        "wru": sum(p["capacity_units"]["wru"] for p in phases.values()),
        "rru": sum(p["capacity_units"]["rru"] for p in phases.values()),
        "usd": {k: round(v, 10) for k, v in usd.items()},
        "usd_per_approval": round(total, 10),
        "usd_per_million_approvals": round(total * 1_000_000, 2),
    }
