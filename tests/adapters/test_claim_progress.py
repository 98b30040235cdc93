"""What a claim records for the retry cap, on every store alike: the claims in a row that
added nothing to the journal (`stalls`) and the steps it found (`journal_seen`), written
in the claim itself and taken back by a release as `claim_count` is
(`records.claim_progress`)."""

from __future__ import annotations

from typing import Any

from interlock.adapters.factory import Stores
from interlock.outcomes import Offer
from interlock.pause import persist_pause
from interlock.records import RequestRecord, RequestState
from interlock.timing import ManualClock

CHAT = "chat-progress"
# Past a lease and any clock margin a taker keeps.
LAPSED_MS = 120_000


def _pause(stores: Stores, clock: ManualClock) -> Offer:
    return persist_pause(
        stores,
        chat_id=CHAT,
        user_id="alice",
        interrupt_id="v1:tool_call:t1:a",
        kind="approval",
        card={"sites": ["example.org"], "reason": "fetch the table"},
        turn_seq=1,
        now_ms=clock.now_ms(),
        snapshot={"messages": ["hello"]},
    )


def _steps(stores: Stores, claim: RequestRecord, *seqs: int) -> None:
    for seq in seqs:
        stores.requests.record_step(claim, seq, f'{{"step":{seq}}}', acting=False)


def _stored(stores: Stores, clock: ManualClock) -> RequestRecord:
    current = stores.requests.get(CHAT, clock.now_ms())
    assert current is not None
    return current


def _progress(record: RequestRecord) -> tuple[int, int, int]:
    return record.claim_count, record.stalls, record.journal_seen


def test_each_claim_records_its_stalls_and_the_steps_it_found(
    stores: Stores, clock: ManualClock
) -> None:
    opened = _pause(stores, clock)
    answer = ("approved", '{"v1:tool_call:t1:a":{"decision":"approve"}}')

    # A first claim counts itself, from an empty journal; its worker records two steps
    first = stores.requests.claim(opened.request, opened.secret, "w1", clock.now_ms(), answer)
    assert _progress(first) == _progress(_stored(stores, clock)) == (1, 1, 0)
    _steps(stores, first, 1, 2)

    # A takeover finds the journal grown: the count starts again, from its two steps
    clock.advance(ms=LAPSED_MS)
    second = stores.requests.claim(first, opened.secret, "w2", clock.now_ms(), answer)
    assert _progress(second) == _progress(_stored(stores, clock)) == (2, 1, 2)

    # A recovery that finds nothing new counts on
    clock.advance(ms=LAPSED_MS)
    third = stores.requests.claim_lapsed(second, "sweeper", clock.now_ms())
    assert _progress(third) == _progress(_stored(stores, clock)) == (3, 2, 2)
    _steps(stores, third, 3)

    # And one told the steps its taker counted takes them as given
    clock.advance(ms=LAPSED_MS)
    fourth = stores.requests.claim_lapsed(third, "sweeper", clock.now_ms(), journal_steps=3)
    assert _progress(fourth) == _progress(_stored(stores, clock)) == (4, 1, 3)

    # A release takes its claim back off both counts
    released = stores.requests.release(fourth, clock.now_ms(), reset=False)
    assert _progress(released) == _progress(_stored(stores, clock)) == (3, 0, 3)


def test_a_reset_takes_the_claim_back_and_forgets_the_journal(
    stores: Stores, clock: ManualClock
) -> None:
    opened = _pause(stores, clock)
    first = stores.requests.claim(opened.request, opened.secret, "w1", clock.now_ms())
    _steps(stores, first, 1)
    clock.advance(ms=LAPSED_MS)
    second = stores.requests.claim(first, opened.secret, "w2", clock.now_ms())
    assert _progress(second) == (2, 1, 1)

    reset = stores.requests.release(second, clock.now_ms(), reset=True)

    assert reset.state is RequestState.PENDING
    assert _progress(reset) == _progress(_stored(stores, clock)) == (1, 0, 0)


def test_a_first_claim_in_one_transaction_records_what_it_returns(
    stores: Stores, clock: ManualClock
) -> None:
    opened = _pause(stores, clock)
    claimed = stores.requests.claim_with(
        opened.request, opened.secret, "w1", clock.now_ms(), ("approved", "null"), lambda _: []
    )
    assert _progress(claimed) == _progress(_stored(stores, clock)) == (1, 1, 0)


def test_a_first_claim_stores_its_stalls_and_no_empty_journal_count(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    opened = _pause(stores, clock)
    stores.requests.claim(opened.request, opened.secret, "w1", clock.now_ms())
    item = aws["dynamodb"].get_item(
        TableName=aws["table"],
        Key={"pk": {"S": f"CHAT#{CHAT}"}, "sk": {"S": "REQUEST"}},
        ConsistentRead=True,
    )["Item"]
    # (a claimed item is billed by the kilobyte on every step: nothing empty on it)
    assert item["stalls"] == {"N": "1"} and "journal_seen" not in item
