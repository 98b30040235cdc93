"""What the model's history costs to read as a chat grows: read capacity units of the
history a turn is given, at 10 and at 1,100 saved turns, on a moto server, metered per
request (`bench.peers.metering`). Prints JSON.

    .venv/bin/python bench/history_read.py [--rows 10 1100]

The history is the newest `HISTORY_TURNS` turns, read in one query from the newest
end, so its cost depends on that window, not on the chat's length: the target is RRU
per turn given at 1,100 rows within 1.2x of the figure at 10 rows (and the same RRU per
read once a chat holds more than the window), and the turns given are the newest ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from bench.peers.metering import metered  # noqa: E402
from interlock.adapters.chats import record_item, turn_body  # noqa: E402
from interlock.adapters.factory import build_stores  # noqa: E402
from interlock.keys import turn_sk  # noqa: E402
from interlock.transcript import HISTORY_TURNS, history  # noqa: E402
from local.emulator import Emulator  # noqa: E402
from tests.conftest import fresh_storage  # noqa: E402

# A turn as long as an ordinary chat message: a few sentences.
TEXT = "Here is what I found in the reference table, with the figures you asked for. " * 4


def seed(aws: dict[str, Any], chat: str, rows: int) -> None:
    items = [
        record_item(
            chat,
            turn_sk(seq),
            turn_body(
                seq, {"role": "user" if seq % 2 else "assistant", "text": f"{TEXT}#{seq}"}, 0
            ),
            0,
            86_400,
        )
        for seq in range(1, rows + 1)
    ]
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        aws["dynamodb"].batch_write_item(RequestItems={aws["table"]: batch})


def measure(emulator: Emulator, rows: int) -> dict[str, Any]:
    aws = fresh_storage(emulator.endpoint, f"history-{rows}")
    stores = build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"])
    chat = f"chat-{rows}"
    seed(aws, chat, rows)
    emulator.traffic.take()
    given = history(stores, chat)
    taken = emulator.traffic.take()
    units = taken["capacity_units"]
    rru = sum(c.get("rru", 0.0) for c in units.values())
    newest = given[-1]["content"][-1]["text"] if given else None
    return {
        "rows": rows,
        "calls": taken.get("total_calls", taken.get("calls")),
        "rru": rru,
        "turns_given": sum(len(m["content"]) for m in given),
        "rru_per_turn_given": rru / max(1, sum(len(m["content"]) for m in given)),
        "newest_given_is_latest": newest == f"{TEXT}#{rows}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10, 100, 1100])
    args = parser.parse_args()
    emulator = Emulator().start()
    try:
        with metered(emulator):
            results = [measure(emulator, rows) for rows in args.rows]
    finally:
        emulator.stop()
    small, large = results[0], results[-1]
    print(
        json.dumps(
            {
                "history_window": HISTORY_TURNS,
                "results": results,
                "targets": {
                    "rru_per_turn_at_largest_within_1_2x_of_smallest": large["rru_per_turn_given"]
                    <= 1.2 * small["rru_per_turn_given"],
                    "the_newest_turns_are_given": all(r["newest_given_is_latest"] for r in results),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
