"""Many workers answer one card at the same moment: the turn runs, and sends, once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from interlock import errors
from interlock.adapters.factory import Stores
from interlock.outcomes import TurnResult
from interlock.records import RequestState
from interlock.turns import TurnLimits, run_turn
from tests.e2e.support import (
    ALICE,
    REPORT_AT_GATE,
    TIMEOUT_S,
    answer,
    assert_outbox_records,
    pointer,
    runtime,
)

pytestmark = pytest.mark.server

# resume_turn reserves a concurrency slot before it claims, so with the default four
# slots most contenders would be refused for slots and never reach the claim. Enough
# slots for all of them makes every one race for the claim itself.
RACERS = 16
RACE_LIMITS = TurnLimits(max_concurrent=32)


def all_at_once(count: int, attempt: Callable[[int], Any]) -> list[Any]:
    """Run `attempt(n)` in `count` threads released together; errors are results."""
    barrier = threading.Barrier(count)

    def run(n: int) -> Any:
        barrier.wait(timeout=TIMEOUT_S)
        try:
            return attempt(n)
        except errors.InterlockError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(run, n) for n in range(count)]
        return [future.result(timeout=TIMEOUT_S) for future in futures]


def test_concurrent_answers_to_one_card_run_the_side_effect_once(
    server_stores: Stores, server_aws: dict[str, Any]
) -> None:
    # Given a turn paused before send_report
    chat = "race-chat"
    paused = run_turn(runtime(server_stores, "pauser"), ALICE, chat, REPORT_AT_GATE.prompt)
    assert paused.offer is not None
    interrupt_id, secret = paused.offer.request.interrupt_id, paused.offer.secret

    # When 16 workers, each with its own Runtime, approve it at the same moment
    outcomes = all_at_once(
        RACERS,
        lambda n: answer(runtime(server_stores, f"w{n}", RACE_LIMITS), chat, interrupt_id, secret),
    )

    # Then exactly one ran the turn and sent the report; every other replayed it or was
    # told "in progress"
    completed = [o for o in outcomes if isinstance(o, TurnResult) and o.outcome == "completed"]
    others = [o for o in outcomes if not any(o is c for c in completed)]
    assert len(completed) == 1, outcomes
    request = pointer(server_stores, chat)
    assert (request.state, request.claim_count) == (RequestState.DONE, 1)
    assert_outbox_records(server_stores, server_aws, chat, REPORT_AT_GATE)
    assert all(_replayed_or_in_progress(o) for o in others), others


def _replayed_or_in_progress(outcome: Any) -> bool:
    if isinstance(outcome, TurnResult):
        return outcome.outcome == "replayed"
    return isinstance(outcome, errors.ResumeInProgress)
