"""Event numbers from the chat's counter follow commit order: a reader paging `after=N`
while four writers add events to one chat sees every event exactly once.

Each writer is its own process (`event_writer.py`) over HTTP against the moto server,
writing the way one of Interlock's writers does: a lone audit event (a tap, the
sweeper), an event riding in the transaction of the change it describes (a resume's
finish; every other change is to the chat's meta item, which then carries the counter
in the same entry), two events in one transaction (a cancel).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from interlock import keys
from interlock.adapters.dynamo import from_item, to_item
from interlock.adapters.factory import Stores
from tests.forks import fork_server

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("alone", "with_a_change", "two_at_once", "sweeper")
EACH = 250
RUNS = 5
PAGE = 25


def _where(aws: dict[str, Any]) -> list[str]:
    return [aws["endpoint"], aws["table"], aws["bucket"]]


@pytest.mark.parametrize("run", range(RUNS))
def test_a_pager_sees_every_event_once_while_four_writers_write(
    server_stores: Stores, server_aws: dict[str, Any], run: int
) -> None:
    # The emulator takes out moto's per-call whole-table costs (`local.moto_at_scale`),
    # which would set the pace, not the code
    _race(server_stores, server_aws, f"numbers-{run}")


def _race(server_stores: Stores, aws: dict[str, Any], chat: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}

    # Given four writer processes on one chat, all at once
    writers = [
        fork_server().spawn(
            [sys.executable, "-m", "tests.race.event_writer", *_where(aws), chat, kind, str(EACH)],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
        )
        for kind in KINDS
    ]

    # When a reader pages after the last number it saw, until the writers are done
    seen: list[int] = []
    cursor = 0
    while True:
        finished = all(w.poll() is not None for w in writers)
        page = server_stores.chats.events(chat, after=cursor, limit=PAGE)
        seen += [event.seq for event in page]
        cursor = seen[-1] if seen else cursor
        if finished and not page:
            break
        if len(page) < PAGE:
            time.sleep(0.05)  # caught up: look again shortly, as a polling client does

    # Then it saw every stored event exactly once, in order, and the numbers are dense
    for writer in writers:
        assert writer.wait(timeout=60) == 0, writer.stderr.read() if writer.stderr else ""
    stored = [e.seq for e in server_stores.chats.events(chat, limit=len(KINDS) * EACH + 10)]
    assert len(stored) == len(KINDS) * EACH
    missed = set(stored) - set(seen)
    duplicated = len(seen) - len(set(seen))
    assert (len(missed), duplicated) == (0, 0)
    assert seen == sorted(seen) == stored
    assert stored == list(range(stored[0], stored[0] + len(stored))), "no gaps"
    # and every change to the chat's meta item that carried the counter landed once
    meta = aws["dynamodb"].get_item(
        TableName=aws["table"],
        Key=to_item({"pk": keys.chat_pk(chat), "sk": keys.META_SK}),
        ConsistentRead=True,
    )["Item"]
    assert from_item(meta)["changes"] == EACH // 2
    assert from_item(meta)["last_event"] == stored[-1]
