"""The expiry finder on fakes: one message per overdue request, only chat ids, and a
stop before its deadline that leaves the rest for the next run."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from interlock import errors
from interlock.adapters.schema import SWEEP_SHARDS
from interlock.fanout import (
    FINDER_MARGIN_MS,
    SEND_BATCH,
    SettleMessage,
    find_overdue,
)
from interlock.timing import CLOCK_SKEW_MS

NOW_MS = 1_800_000_000_000


class FakeIndex:
    """The expiry index: `per_shard` overdue chats in every shard; the lease index:
    `stranded` chats whose claim's lease ran out (by when) in the first shard."""

    def __init__(self, per_shard: int, stranded: dict[str, int] | None = None) -> None:
        self.shards = {
            f"OPEN#{s}": [f"chat-{s}-{n}" for n in range(per_shard)] for s in range(SWEEP_SHARDS)
        }
        self.stranded = stranded or {}
        self.queries: list[str] = []
        self.lapsed_before: list[int] = []

    def overdue(self, shard: str, now_ms: int, limit: int) -> list[str]:
        self.queries.append(shard)
        return self.shards[shard][:limit]

    def lapsed(self, shard: str, before_ms: int, limit: int) -> list[str]:
        self.lapsed_before.append(before_ms)
        if shard != "OPEN#0":
            return []
        return [chat for chat, until in self.stranded.items() if until <= before_ms][:limit]


class FakeQueue:
    def __init__(self, waiting: int = 0) -> None:
        self.batches: list[list[str]] = []
        self._waiting = waiting

    def send(self, messages: Sequence[SettleMessage]) -> None:
        assert 0 < len(messages) <= SEND_BATCH
        self.batches.append([m.body() for m in messages])

    def waiting(self) -> int:
        return self._waiting


class FakeContext:
    """A Lambda context whose remaining time drops by `step_ms` at every look."""

    def __init__(self, remaining_ms: int, step_ms: int = 0) -> None:
        self.remaining_ms = remaining_ms
        self.step_ms = step_ms
        self.looks = 0

    def get_remaining_time_in_millis(self) -> int:
        self.looks += 1
        left = self.remaining_ms
        self.remaining_ms -= self.step_ms
        return left


def _sent(queue: FakeQueue) -> list[str]:
    return [json.loads(body)["chat_id"] for batch in queue.batches for body in batch]


def test_every_overdue_request_is_sent_once_in_batches_of_ten() -> None:
    index, queue = FakeIndex(per_shard=12), FakeQueue()

    report = find_overdue(index, queue, NOW_MS, FakeContext(60_000).get_remaining_time_in_millis)

    expected = [chat for chats in index.shards.values() for chat in chats]
    assert sorted(_sent(queue)) == sorted(expected)
    # Batches fill up across shards: one call per ten requests
    assert [len(b) for b in queue.batches] == [10] * 9 + [6]
    assert (report.found, report.enqueued, report.deferred, report.stopped) == (96, 96, 0, False)


def test_a_message_names_the_chat_and_nothing_else() -> None:
    index, queue = FakeIndex(per_shard=1), FakeQueue()
    find_overdue(index, queue, NOW_MS, lambda: 60_000)
    assert json.loads(queue.batches[0][0]) == {"chat_id": "chat-0-0"}


def test_the_finder_stops_before_its_deadline_and_leaves_the_rest() -> None:
    # Given a context with time for two looks before the margin is reached
    index, queue = FakeIndex(per_shard=25), FakeQueue()
    context = FakeContext(FINDER_MARGIN_MS + 1_500, step_ms=1_000)

    # When the finder runs
    report = find_overdue(index, queue, NOW_MS, context.get_remaining_time_in_millis)

    # Then it read one shard, sent one batch, and left the shard's rest for the next run
    assert index.queries == ["OPEN#0"]
    assert _sent(queue) == [f"chat-0-{n}" for n in range(10)]
    assert (report.found, report.enqueued, report.deferred) == (25, 10, 15)
    assert report.stopped


def test_with_no_time_left_the_finder_reads_nothing() -> None:
    index, queue = FakeIndex(per_shard=3), FakeQueue()

    report = find_overdue(index, queue, NOW_MS, lambda: FINDER_MARGIN_MS - 1)

    assert index.queries == [] and queue.batches == []
    assert report.stopped and report.found == 0


def test_a_queue_still_holding_the_last_fan_out_gets_nothing_more() -> None:
    # Consumers are behind: the oldest overdue requests are the waiting messages, and
    # sending them again each interval would only pile up copies
    index, queue = FakeIndex(per_shard=3), FakeQueue(waiting=40)

    report = find_overdue(index, queue, NOW_MS, lambda: 60_000)

    assert (report.backlog, report.found, report.enqueued) == (40, 0, 0)
    assert index.queries == [] and queue.batches == []


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        '{"chat_id": "../other"}',
        '{"chat_id": "c1", "text": "chat content has no place here"}',
        "{}",
    ],
)
def test_a_malformed_message_is_refused(body: str) -> None:
    with pytest.raises(errors.InvalidInput, match="not a settle message"):
        SettleMessage.parse(body)


def test_a_message_reads_back_as_written() -> None:
    message = SettleMessage(chat_id="c1")
    assert SettleMessage.parse(message.body()) == message


def test_a_claim_whose_worker_died_is_sent_once_its_grace_ran_out() -> None:
    # Given two stranded claims, one lapsed long ago and one just now, and one that is
    # also overdue (both indexes list it)
    stranded = {"chat-0-0": NOW_MS - 120_000, "long-gone": NOW_MS - 120_000, "just": NOW_MS - 1}
    index, queue = FakeIndex(per_shard=1, stranded=stranded), FakeQueue()

    # When the finder runs with a grace of a minute
    report = find_overdue(index, queue, NOW_MS, lambda: 60_000, grace_ms=60_000)

    # Then the long-lapsed claim is queued, each chat once, and the fresh one waits
    sent = _sent(queue)
    assert "long-gone" in sent and "just" not in sent
    assert sent.count("chat-0-0") == 1 and len(sent) == len(set(sent)) == SWEEP_SHARDS + 1
    assert report.found == len(sent)
    # (the grace, and the clock margin: a lease is over once over by every clock)
    assert set(index.lapsed_before) == {NOW_MS - 60_000 - CLOCK_SKEW_MS}
