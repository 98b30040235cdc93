"""The settle consumer's step (`interlock.settling`): each record of an SQS batch settles
one overdue request with the sweep's own claim rules, so a duplicate is a skip and a bad
record fails alone."""

from __future__ import annotations

import json
from typing import Any

from interlock.adapters.factory import Stores
from interlock.fanout import SettleMessage
from interlock.records import RequestState
from interlock.settling import settle_batch
from interlock.sweeper import DEADLINE_MARGIN_MS, SweepReport, settle_message
from interlock.timing import CLOCK_SKEW_MS, ManualClock
from interlock.turns import Caller, Runtime, run_turn
from local.sqs_poller import PollerContext


def _overdue(rt: Runtime, caller: Caller, clock: ManualClock, *chats: str) -> None:
    for chat in chats:
        assert run_turn(rt, caller, chat, "download the table").outcome == "interrupted"
    clock.advance(seconds=rt.stores.policy.request_ttl_s + 1, ms=CLOCK_SKEW_MS)


def _event(*bodies: str) -> dict[str, Any]:
    """An SQS event as Lambda hands it over: one record per body."""
    return {
        "Records": [
            {
                "messageId": f"m{n}",
                "receiptHandle": f"r{n}",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:settle",
                "awsRegion": "us-east-1",
            }
            for n, body in enumerate(bodies)
        ]
    }


def _body(chat: str) -> str:
    return SettleMessage(chat_id=chat).body()


def test_a_duplicate_message_for_a_settled_request_is_a_harmless_skip(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock, models: Any
) -> None:
    # Given an overdue request the consumer settled from its message
    _overdue(runtime, alice, clock, "c1")
    first = SweepReport()
    assert settle_message(runtime, _body("c1"), first) == "timed_out"
    settled = stores.requests.get("c1", clock.now_ms())
    events, turns, calls = stores.chats.events("c1"), stores.chats.turns("c1"), models.calls

    # When the same message is delivered again (the finder found it twice, or SQS
    # delivered it twice)
    again = SweepReport()
    outcome = settle_message(runtime, _body("c1"), again)

    # Then it is skipped: nothing is claimed, run, written or told again
    assert outcome == "skipped" and (again.found, again.skipped, again.chats) == (1, 1, [])
    assert stores.requests.get("c1", clock.now_ms()) == settled
    assert settled is not None and (settled.state, settled.claim_count) == (RequestState.DONE, 1)
    assert stores.chats.events("c1") == events and stores.chats.turns("c1") == turns
    assert models.calls == calls


def test_one_batch_settles_each_request_once_even_when_named_twice(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    _overdue(runtime, alice, clock, "c1", "c2")

    response, report = settle_batch(
        runtime, _event(_body("c1"), _body("c2"), _body("c1")), PollerContext()
    )

    assert response == {"batchItemFailures": []}
    assert (report.found, report.timed_out, report.skipped) == (3, 2, 1)
    for chat in ("c1", "c2"):
        types = [e.type for e in stores.chats.events(chat)]
        assert types.count("timed_out") == 1 and types.count("turn_completed") == 1


def test_a_record_that_cannot_be_settled_fails_alone(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    # Given two overdue requests, one whose stored state nobody knows, and a malformed body
    _overdue(runtime, alice, clock, "c-fine", "c-corrupt")
    aws["dynamodb"].update_item(
        TableName=aws["table"],
        Key={"pk": {"S": "CHAT#c-corrupt"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET #state = :bogus",
        ExpressionAttributeNames={"#state": "state"},
        ExpressionAttributeValues={":bogus": {"S": "bogus"}},
    )

    # When one batch carries all three
    response, report = settle_batch(
        runtime,
        _event(_body("c-corrupt"), json.dumps({"chat": "x"}), _body("c-fine")),
        PollerContext(),
    )

    # Then only the two bad records are reported, for SQS to deliver again
    assert response == {"batchItemFailures": [{"itemIdentifier": "m0"}, {"itemIdentifier": "m1"}]}
    assert report.timed_out == 1
    fine = stores.requests.get("c-fine", clock.now_ms())
    assert fine is not None and fine.state is RequestState.DONE


def test_records_reached_too_close_to_the_deadline_are_left_for_the_finder(
    runtime: Runtime, alice: Caller, stores: Stores, clock: ManualClock
) -> None:
    # Given an invocation with less time left than settling one request may take
    _overdue(runtime, alice, clock, "c1")

    response, report = settle_batch(
        runtime, _event(_body("c1")), PollerContext(remaining_ms=DEADLINE_MARGIN_MS - 1)
    )

    # Then the record is acknowledged unsettled: the request is still overdue, unclaimed,
    # and in the index, where the next finder run finds it again
    assert response == {"batchItemFailures": []} and report.deferred == 1
    request = stores.requests.get("c1", clock.now_ms())
    assert request is not None and request.claim_count == 0
    assert stores.requests.overdue(_shard("c1"), clock.now_ms(), 10) == ["c1"]


def _shard(chat: str) -> str:
    from interlock import keys
    from interlock.adapters.schema import SWEEP_SHARDS

    return keys.sweep_shard(chat, SWEEP_SHARDS)
