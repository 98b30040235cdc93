"""One running turn per chat, decided by one conditional write: concurrent turns in one
chat, or two users racing for a new chat, give one turn that runs and clear refusals
for the rest, before any of their tools or model calls ran."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from interlock import errors
from interlock.api.errors import STATUS
from interlock.ports import Stores
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, TurnLimits, run_turn
from tests.agent.support import Models, scenario

pytestmark = pytest.mark.server


def _race(count: int, attempt: Any) -> list[Any]:
    """Run `attempt(n)` in `count` threads released at the same moment."""
    barrier = threading.Barrier(count)

    def run(n: int) -> Any:
        barrier.wait(timeout=30)
        try:
            return attempt(n)
        except errors.InterlockError as refused:
            return refused

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def _holding(others_done: threading.Event) -> Models:
    """A model whose one step waits until every other contender has been answered, so
    the admitted turn is still running while they try (no one comes in after it)."""

    def step(results: list[str]) -> list[dict[str, Any]]:
        others_done.wait(timeout=30)
        return [{"text": "Hello!"}]

    return Models([scenario(step, name="hold")])


def _runtime(stores: Stores, clock: ManualClock, models: Models) -> Runtime:
    # Slots enough for everyone: this test is about the chat, not the per-user cap.
    return Runtime(stores, models, clock=clock, limits=TurnLimits(max_concurrent=64))


def test_32_concurrent_turns_in_one_chat_run_once(
    server_stores: Stores, clock: ManualClock
) -> None:
    # Given one user sending the same prompt 32 times at once to a new chat
    refused: list[int] = []
    others_done = threading.Event()
    models = _holding(others_done)
    rt = _runtime(server_stores, clock, models)
    alice = Caller("alice")

    def attempt(n: int) -> Any:
        try:
            return run_turn(rt, alice, "busy-chat", "hello")
        except errors.InterlockError:
            refused.append(n)
            if len(refused) == 31:
                others_done.set()
            raise

    # When all 32 turns start together
    results = _race(32, attempt)

    # Then exactly one ran; every other was refused with 409 before it ran anything
    outcomes = Counter(
        r.outcome if not isinstance(r, errors.InterlockError) else r.code for r in results
    )
    assert outcomes["completed"] == 1, outcomes
    refusals = [r for r in results if isinstance(r, errors.InterlockError)]
    assert len(refusals) == 31
    assert {STATUS[r.code] for r in refusals} == {409}
    assert models.calls == 1  # the hello scenario makes one model call, once
    turns = server_stores.chats.turns("busy-chat")
    assert [(t["seq"], t["role"]) for t in turns] == [(1, "user"), (2, "assistant")]
    meta = server_stores.chats.meta("busy-chat")
    assert (meta.owner, meta.last_turn, meta.run_token) == ("alice", 2, None)


def test_two_users_racing_for_a_new_chat_one_owns_it(
    server_stores: Stores, clock: ManualClock
) -> None:
    # Given two users starting a turn in the same new chat at the same moment
    others_done = threading.Event()
    models = _holding(others_done)
    rt = _runtime(server_stores, clock, models)
    users = [Caller("alice"), Caller("bob")]

    def attempt(n: int) -> Any:
        try:
            return run_turn(rt, users[n], "contested", f"hello from {users[n].user_id}")
        except errors.InterlockError:
            others_done.set()
            raise

    # When both run, and then the loser tries again once the winner's turn has ended
    first = _race(2, attempt)
    winner = next(n for n, r in enumerate(first) if not isinstance(r, errors.InterlockError))
    loser = 1 - winner
    assert isinstance(first[loser], (errors.TurnRunning, errors.Forbidden))
    with pytest.raises(errors.Forbidden):
        run_turn(rt, users[loser], "contested", "my turn now")

    # Then the chat is the winner's alone: its owner, its transcript, one model call
    meta = server_stores.chats.meta("contested")
    assert meta.owner == users[winner].user_id
    texts = [t["text"] for t in server_stores.chats.turns("contested") if t["role"] == "user"]
    assert texts == [f"hello from {users[winner].user_id}"]
    assert models.calls == 1
