"""AWS calls and bytes for one pause and one resume through the store.

Runs against a moto server on 127.0.0.1 and counts every request botocore sends (by
service and operation) with an event hook, plus the request body bytes. Prints JSON.

    .venv/bin/python bench/store_cycle.py
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from interlock.harness.journal import Journal  # noqa: E402
from interlock.pause import persist_pause  # noqa: E402
from interlock.steps import recorder  # noqa: E402
from interlock.timing import SystemClock  # noqa: E402
from local.emulator import Emulator  # noqa: E402
from local.storage import local_storage  # noqa: E402

# A realistic snapshot: a short chat with one paused tool call (about what Strands
# produces for the demo agent).
SNAPSHOT = {
    "schema": 1,
    "messages": [
        {"role": "user", "content": [{"text": "Summarise the reference table at example.org"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "request_approval",
                        "input": {
                            "reason": "Download the reference table",
                            "urls": ["https://example.org/data/table.csv"],
                        },
                    }
                }
            ],
        },
    ],
    "state": {},
    "interrupt_state": {"activated": True, "interrupts": {}},
}
# One recorded step of each kind, as the demo agent produces them after an approval.
TOOL_RESULT = {
    "toolUseId": "tooluse_1",
    "status": "success",
    "content": [{"text": "Approved by the user: example.org. Run the step again now."}],
}
MODEL_RESPONSE = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "tooluse_2", "name": "fetch_url"}}}},
    {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"url": "https://example.org/'}}}},
    {"contentBlockDelta": {"delta": {"toolUse": {"input": 'data/table.csv"}'}}}},
    {"contentBlockStop": {}},
    {"messageStop": {"stopReason": "tool_use"}},
    {"metadata": {"usage": {"inputTokens": 310, "outputTokens": 24, "totalTokens": 334}}},
]
CARD = {
    "sites": ["example.org"],
    "urls": ["https://example.org/data/table.csv"],
    "packages": [],
    "reason": "Download the reference table",
}


class Meter:
    """Counts calls and request bytes per `service.Operation`."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-send", self._on_send)

    def _on_send(self, request: Any, event_name: str, **_: Any) -> None:
        _, service, operation = event_name.split(".")[:3]
        name = f"{service}.{operation}"
        self.calls[name] += 1
        self.bytes[name] += _size(request.body)

    def take(self) -> dict[str, Any]:
        result = {
            "calls": dict(sorted(self.calls.items())),
            "total_calls": sum(self.calls.values()),
            "dynamodb_round_trips": sum(
                n for k, n in self.calls.items() if k.startswith("dynamodb.")
            ),
            "writes": sum(n for k, n in self.calls.items() if _is_write(k)),
            "bytes_sent": dict(sorted(self.bytes.items())),
        }
        self.calls.clear()
        self.bytes.clear()
        return result


def _merged(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    calls = Counter(first["calls"]) + Counter(second["calls"])
    sent = Counter(first["bytes_sent"]) + Counter(second["bytes_sent"])
    return {
        "calls": dict(sorted(calls.items())),
        "total_calls": first["total_calls"] + second["total_calls"],
        "dynamodb_round_trips": first["dynamodb_round_trips"] + second["dynamodb_round_trips"],
        "writes": first["writes"] + second["writes"],
        "bytes_sent": dict(sorted(sent.items())),
    }


def _size(body: Any) -> int:
    if body is None:
        return 0
    if isinstance(body, (bytes, bytearray)):
        return len(body)
    if isinstance(body, str):
        return len(body.encode())
    return len(body.getbuffer())  # a BytesIO (S3 PutObject)


def _is_write(name: str) -> bool:
    return name.split(".")[1] in {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "PutObject",
        "TransactWriteItems",
    }


def main() -> None:
    server = Emulator().start()
    try:
        storage = local_storage(server.endpoint, "bench", "bench-data")
        stores = storage.stores
        meter = Meter()
        meter.attach(storage.dynamodb)
        meter.attach(storage.s3)
        print(json.dumps(run_cycle(stores, meter), indent=2))
    finally:
        server.stop()


def run_cycle(stores: Any, meter: Meter) -> dict[str, Any]:
    clock = SystemClock()
    opened = persist_pause(
        stores,
        chat_id="bench-chat",
        user_id="alice",
        interrupt_id="v1:tool_call:tooluse_1:x",
        kind="approval",
        card=CARD,
        snapshot=SNAPSHOT,
        turn_seq=1,
        now_ms=clock.now_ms(),
    )
    pause = meter.take()

    # The resume decision. Two contenders read the pointer before either claims; the
    # first claim wins, the second learns it lost from its own conditional write.
    loser_view = stores.requests.get("bench-chat", clock.now_ms())
    losing_read = meter.take()
    record = stores.requests.get("bench-chat", clock.now_ms())
    claim = stores.requests.claim(record, opened.secret, "worker-1", clock.now_ms())
    decision = meter.take()
    try:
        stores.requests.claim(loser_view, opened.secret, "worker-2", clock.now_ms())
        loser_error = "none: the loser won"
    except Exception as lost:  # the point is the count, not the type
        loser_error = f"{type(lost).__name__}: {lost}"
    losing = _merged(losing_read, meter.take())

    # The journal: the resumed run records each model response and tool result.
    journal = Journal((), recorder(stores, claim))
    journal.record_tool(TOOL_RESULT)
    journal.record_model(MODEL_RESPONSE)
    steps = meter.take()

    # The rest of the resume: load the snapshot, renew once, store the answer, finish.
    stores.blobs.read_snapshot(claim.stored_snapshot)
    stores.requests.renew(claim, clock.now_ms())
    answer_key = stores.blobs.put_answer("bench-chat", claim.interrupt_id, {"text": "Done."})
    stores.requests.finish(
        claim,
        answer_key=answer_key,
        decision="approved",
        final_text="Done.",
        now_ms=clock.now_ms(),
    )
    rest = meter.take()

    return {
        "pause": {**pause, "snapshot_bytes_gzip": opened.snapshot_bytes},
        "resume_decision_win": decision,
        "resume_decision_lose": {**losing, "loser_error": loser_error},
        "journal_per_step": {
            "writes": steps["writes"] / journal.recorded,
            "request_bytes": sum(steps["bytes_sent"].values()) / journal.recorded,
            "entry_bytes": journal.recorded_bytes / journal.recorded,
            "steps_recorded": journal.recorded,
        },
        "resume_after_claim": rest,
        "targets": {
            "pause_writes": 2,
            # The snapshot PUT, then the pointer.
            "pause_writes_met": pause["writes"] <= 2,
            "decision_round_trips_max": 2,
            "decision_met": decision["dynamodb_round_trips"] <= 2
            and losing["dynamodb_round_trips"] <= 2,
        },
    }


if __name__ == "__main__":
    main()
