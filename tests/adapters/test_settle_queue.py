"""The settle queue's SQS adapter, in-process and over HTTP against the moto server."""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest

from interlock import errors
from interlock.adapters.queue import MAX_RECEIVES, SqsSettleQueue, create_settle_queues
from interlock.fanout import SettleMessage
from tests.conftest import REGION


@pytest.fixture
def sqs(aws: dict[str, Any]) -> Any:
    return boto3.session.Session(region_name=REGION).client("sqs", endpoint_url=aws.get("endpoint"))


@pytest.fixture
def queues(sqs: Any) -> tuple[str, str]:
    return create_settle_queues(sqs, f"settle-{uuid.uuid4().hex[:12]}", visibility_timeout_s=30)


def test_a_batch_arrives_as_one_message_per_request(sqs: Any, queues: tuple[str, str]) -> None:
    url, _ = queues
    queue = SqsSettleQueue(sqs, url)

    queue.send([SettleMessage(chat_id=f"c{n}") for n in range(10)])

    assert queue.waiting() == 10
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(json.loads(m["Body"])["chat_id"] for m in received) == sorted(
        f"c{n}" for n in range(10)
    )
    assert queue.waiting() == 0, "taken messages no longer wait"


def test_more_than_ten_is_refused_before_any_call(sqs: Any, queues: tuple[str, str]) -> None:
    queue = SqsSettleQueue(sqs, queues[0])
    with pytest.raises(ValueError, match="1 to 10"):
        queue.send([SettleMessage(chat_id=f"c{n}") for n in range(11)])
    assert queue.waiting() == 0


def test_a_failed_call_is_a_store_error(sqs: Any, queues: tuple[str, str]) -> None:
    gone = SqsSettleQueue(sqs, queues[0] + "-missing")
    with pytest.raises(errors.StoreError, match="enqueue overdue requests"):
        gone.send([SettleMessage(chat_id="c1")])
    with pytest.raises(errors.StoreError, match="depth"):
        gone.waiting()


def test_the_queue_redrives_to_its_dead_letters(sqs: Any, queues: tuple[str, str]) -> None:
    url, dead = queues
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    assert json.loads(attributes["RedrivePolicy"]) == {
        "deadLetterTargetArn": dead_arn,
        "maxReceiveCount": MAX_RECEIVES,
    }
    assert attributes["VisibilityTimeout"] == "30"
