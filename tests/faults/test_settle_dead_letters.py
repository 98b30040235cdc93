"""A settle message that always fails ends in the dead-letter queue; its batch-mates are
settled.

For real, on the moto server: the finder fans overdue requests out on an SQS queue with
the deployed redrive policy, and the settle function's handler consumes it through
`LambdaSqsPoller`, which does what Lambda's poller does (receive a batch, invoke, delete
what did not fail, let the failures come back after the visibility timeout). moto
counts the receives and moves the poison message to the dead-letter queue after the
last one.
"""

from __future__ import annotations

import importlib.util
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import boto3
import pytest

from examples.analyst.script import DEMO_SCENARIOS
from interlock.adapters.factory import build_stores
from interlock.adapters.queue import (
    BATCH_SIZE,
    MAX_RECEIVES,
    SqsSettleQueue,
    create_settle_queues,
)
from interlock.fanout import find_overdue
from interlock.harness.model import ScriptedModel
from interlock.ports import Stores
from interlock.records import RequestState
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, TurnLimits, run_turn
from local.emulator import Emulator
from local.sqs_poller import LambdaSqsPoller
from tests.conftest import REGION

pytestmark = pytest.mark.server

HANDLER = Path(__file__).resolve().parents[2] / "functions" / "settle" / "handler.py"
# Short, so the poison message comes back quickly; the deployed queue hides it 30 min.
VISIBILITY_S = 3
FINE = [f"fine-{n}" for n in range(4)]
POISON = "poison"


@pytest.fixture
def settle_handler(
    monkeypatch: pytest.MonkeyPatch, server_aws: dict[str, Any], emulator: Emulator
) -> Iterator[Any]:
    """The settle function's handler module, wired to the server's table and bucket as
    the deployed function is wired by its environment."""
    from interlock.api import wiring

    for name, value in {
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "INTERLOCK_TABLE": server_aws["table"],
        "INTERLOCK_BUCKET": server_aws["bucket"],
        "INTERLOCK_MODEL": "scripted",
        "INTERLOCK_FETCH": "demo",
        "POWERTOOLS_SERVICE_NAME": "interlock",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    caches = (wiring.config, wiring.stores, wiring.runtime, wiring.notifier)
    for cached in caches:
        cached.cache_clear()
    spec = importlib.util.spec_from_file_location(f"settle_handler_{uuid.uuid4().hex}", HANDLER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    # Later tests must not find this test's table behind the cached wiring
    for cached in caches:
        cached.cache_clear()


def _overdue_requests(stores: Stores) -> None:
    """Unanswered approvals whose expiry has passed by the wall clock, one of them with a
    stored state nobody knows (reading it raises, every time)."""
    ttl_s = stores.policy.request_ttl_s
    clock = ManualClock(int(time.time() * 1000) - (ttl_s + 60) * 1000)
    rt = Runtime(
        stores,
        lambda: ScriptedModel(DEMO_SCENARIOS),
        clock=clock,
        limits=TurnLimits(heartbeat_s=60, max_concurrent=16),
        worker_id="pauser",
    )
    for chat in [*FINE, POISON]:
        paused = run_turn(rt, Caller("alice"), chat, "download the table")
        assert paused.outcome == "interrupted"


def test_a_poison_message_ends_in_the_dead_letters_and_its_batch_mates_are_settled(
    server_aws: dict[str, Any], emulator: Emulator, settle_handler: Any
) -> None:
    # Given overdue requests on the server, one of which cannot be read
    stores = build_stores(
        server_aws["dynamodb"], server_aws["s3"], server_aws["table"], server_aws["bucket"]
    )
    _overdue_requests(stores)
    server_aws["dynamodb"].update_item(
        TableName=server_aws["table"],
        Key={"pk": {"S": f"CHAT#{POISON}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET #state = :bogus",
        ExpressionAttributeNames={"#state": "state"},
        ExpressionAttributeValues={":bogus": {"S": "bogus"}},
    )
    sqs = boto3.session.Session(region_name=REGION).client("sqs", endpoint_url=emulator.endpoint)
    url, dead = create_settle_queues(sqs, f"settle-{uuid.uuid4().hex[:12]}", VISIBILITY_S)

    # When the finder fans them out, and the settle handler consumes the queue as Lambda's
    # poller would until nothing has come back for longer than the visibility timeout
    found = find_overdue(
        stores.requests, SqsSettleQueue(sqs, url), int(time.time() * 1000), lambda: 60_000
    )
    assert found.enqueued == len(FINE) + 1
    batches: list[list[str]] = []

    def handler(event: dict[str, Any], context: Any) -> Mapping[str, Any]:
        batches.append([json.loads(r["body"])["chat_id"] for r in event["Records"]])
        response: Mapping[str, Any] = settle_handler.lambda_handler(event, context)
        return response

    poller = LambdaSqsPoller(sqs, url, handler, batch_size=BATCH_SIZE)
    poller.drain(idle_s=3 * VISIBILITY_S, timeout_s=120)

    # Then the poison message shared its first batch, failed on each of its receives and
    # sits in the dead-letter queue, alone
    assert POISON in batches[0] and len(batches[0]) > 1
    assert [b for b in batches if POISON in b] == [batches[0], [POISON], [POISON]]
    assert poller.counts.failed == MAX_RECEIVES and poller.counts.errors == []
    dead_letters = sqs.receive_message(QueueUrl=dead, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"]) for m in dead_letters] == [{"chat_id": POISON}]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"

    # And every batch-mate was settled, once
    now_ms = int(time.time() * 1000)
    for chat in FINE:
        request = stores.requests.get(chat, now_ms)
        assert request is not None
        assert (request.state, request.decision, request.claim_count) == (
            RequestState.DONE,
            "timed_out",
            1,
        )
        types = [e.type for e in stores.chats.events(chat)]
        assert types.count("timed_out") == 1 and types.count("turn_completed") == 1
