"""The history a model is given: the newest turns, read from the newest end, at a cost
that depends on the window, not on how long the chat is."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.adapters.chats import record_item, turn_body
from interlock.adapters.factory import Stores
from interlock.keys import turn_sk
from interlock.transcript import HISTORY_TURNS, history

ROWS = 1_100


def saved(aws: dict[str, Any], chat: str, count: int) -> None:
    """`count` alternating user and assistant turns, as `tests.turns.append_turn` stores them."""
    rows = [
        record_item(
            chat,
            turn_sk(seq),
            turn_body(seq, {"role": "user" if seq % 2 else "assistant", "text": f"turn {seq}"}, 0),
            0,
            86_400,
        )
        for seq in range(1, count + 1)
    ]
    for start in range(0, len(rows), 25):
        batch = [{"PutRequest": {"Item": item}} for item in rows[start : start + 25]]
        aws["dynamodb"].batch_write_item(RequestItems={aws["table"]: batch})


@pytest.mark.parametrize("count", [10, ROWS])
def test_the_model_is_given_the_newest_turns(
    aws: dict[str, Any], stores: Stores, count: int
) -> None:
    saved(aws, "long", count)
    latest = stores.chats.latest_turns("long", HISTORY_TURNS)
    window = min(count, HISTORY_TURNS)
    assert [t["seq"] for t in latest] == list(range(count - window + 1, count + 1))

    given = history(stores, "long")
    texts = [part["text"] for message in given for part in message["content"]]
    assert texts[-1] == f"turn {count}"  # the newest turn, not the 1,000th
    assert given[0]["role"] == "user"
    assert len(texts) <= HISTORY_TURNS
