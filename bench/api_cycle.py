"""One pause and one resume through the local server, counted; cold-start costs.

- AWS calls by operation and request bytes for `POST /runs` (a turn that pauses) and
  `POST /resume` (an approval that finishes it), counted at the moto server.
- Streaming: a turn of a deliberately slow scripted model (2.5 s of silence before each
  answer, 50 ms between words) read as it streams: time to the first event and to the
  last, text deltas, heartbeats, and the longest silence on the wire.
- Handler import time of each function: median over fresh interpreters, and whether it
  pulled in strands (the requests function must not). For run and resume that is the
  streaming app and its ASGI server, as the Web Adapter starts them.
- Cold start (`bench/cold_start.py`): each handler's import next to `import strands`
  and `import boto3`; with `--layer`, the layer as shipped.
- The peer (`bench/peers/`): LangGraph with `langgraph-checkpoint-aws` on the same
  emulator, measured when installed, else its recorded figures.
- `targets`: calls per cycle (at most 12), request bytes against the peer's (at most
  half), the import ratios, the streaming target; each with its figure.

Prints JSON.

    .venv/bin/python bench/api_cycle.py [--layer] [--runs 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import secrets
import statistics
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from interlock.api.routes import STREAMED  # noqa: E402
from local import devtokens  # noqa: E402
from local.emulator import Emulator  # noqa: E402

# One pause plus one resume, through the API.
CYCLE_CALLS_TARGET = 12
PHASES = ("pause", "resume")
IMPORT_PROBE = """
import importlib.util, json, os, sys, time
start = time.perf_counter()
if sys.argv[1].endswith(".py"):
    spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
else:  # the streaming functions: uvicorn and the app, as run.sh starts them
    os.environ["INTERLOCK_FUNCTION"] = sys.argv[1]
    from interlock.api import serve
    serve.ready()  # the app, and what its first request imports
elapsed = time.perf_counter() - start
print(json.dumps({"ms": elapsed * 1000, "strands": "strands" in sys.modules}))
"""
# A turn that answers in one slow model call: a silence, then text a word at a time.
SLOW_MODEL = "scripted:2500/50"
SLOW_HEARTBEAT_S = "0.5"
FIRST_EVENT_TARGET_MS = 300
SLOW_TURN_MIN_MS = 3000


def cycle(emulator: Emulator) -> dict[str, Any]:
    """Serve the handlers locally and measure one pause and one resume."""
    return _restoring_environment(_cycle, emulator)


def _restoring_environment(measure: Any, emulator: Emulator) -> dict[str, Any]:
    """Local mode configures the handlers through the environment; it is restored
    after, so a caller's own AWS settings survive."""
    saved = dict(os.environ)
    try:
        result: dict[str, Any] = measure(emulator)
        return result
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _serve(emulator: Emulator, table: str) -> tuple[Any, str]:
    """The local API over the emulator on a free port; the server and alice's token."""
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log in the figures
    from local.server import LocalApi, configure, create_storage_if_missing

    configure(emulator.endpoint, table, f"{table}-data")
    create_storage_if_missing(table, f"{table}-data")
    key = secrets.token_bytes(32)
    server = make_server("127.0.0.1", 0, LocalApi(key), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, devtokens.issue(key, "alice", ["reporter"])


def _cycle(emulator: Emulator) -> dict[str, Any]:
    server, token = _serve(emulator, "bench")
    url = f"http://127.0.0.1:{server.port}"
    try:
        emulator.traffic.take()
        events = _post(
            url,
            "/runs",
            token,
            {
                "threadId": "bench",
                "runId": "r1",
                "messages": [{"id": "m1", "role": "user", "content": "Download the table"}],
            },
        )
        pause = emulator.traffic.take()
        interrupt = events[-1]["outcome"]["interrupts"][0]
        events = _post(url, "/resume", token, approval("bench", interrupt))
        resume = emulator.traffic.take()
        finished = events[-1]
    finally:
        server.shutdown()
    return {
        "pause": {**pause, "bytes_written": _written(pause)},
        "resume": {**resume, "bytes_written": _written(resume), "journal": _journal(resume)},
        "resume_outcome": finished.get("result", {}).get("outcome"),
    }


def approval(thread: str, interrupt: dict[str, Any]) -> dict[str, Any]:
    """The AG-UI resume body that approves `interrupt` (as the run streamed it)."""
    return {
        "threadId": thread,
        "runId": "r2",
        "messages": [],
        "resume": [
            {
                "interruptId": interrupt["id"],
                "status": "resolved",
                "payload": {"decision": "approve"},
                "metadata": {"secret": interrupt["metadata"]["secret"]},
            }
        ],
    }


WRITES = (
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "PutObject",
    "TransactWriteItems",
)


def _written(traffic: dict[str, Any]) -> int:
    return sum(n for op, n in traffic["bytes_sent"].items() if op.split("[")[0].endswith(WRITES))


def _journal(traffic: dict[str, Any]) -> dict[str, Any]:
    """What recording the resumed run's steps cost: one write (a fenced transaction)
    per step."""
    name = "dynamodb.TransactWriteItems[journal]"
    steps = traffic["calls"].get(name, 0)
    sent = traffic["bytes_sent"].get(name, 0)
    return {"steps": steps, "writes": steps, "bytes": sent, "bytes_per_step": sent // max(steps, 1)}


def _post(url: str, path: str, token: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read().decode()
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def streaming(emulator: Emulator) -> dict[str, Any]:
    """One slow turn read as it streams, through the local server."""
    return _restoring_environment(_streaming, emulator)


def _streaming(emulator: Emulator) -> dict[str, Any]:
    import http.client
    import time

    os.environ.update(INTERLOCK_MODEL=SLOW_MODEL, INTERLOCK_HEARTBEAT_S=SLOW_HEARTBEAT_S)
    server, token = _serve(emulator, "bench-stream")
    # Built at start, as the local server and the deployed app (its lifespan) build it.
    from interlock.api import wiring

    wiring.runtime()
    body = {
        "threadId": "bench-stream",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "hello"}],
    }
    arrivals: list[tuple[float, bytes]] = []
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        start = time.perf_counter()
        connection.request(
            "POST",
            "/runs",
            body=json.dumps(body),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        while chunk := response.read1(65536):
            arrivals.append((time.perf_counter() - start, chunk))
        connection.close()
    finally:
        server.shutdown()
    frames = [
        (at, frame) for at, chunk in arrivals for frame in chunk.split(b"\n\n") if frame.strip()
    ]
    events = [(at, json.loads(f[5:])["type"]) for at, f in frames if f.startswith(b"data:")]
    times = [at for at, _ in arrivals]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    first_ms, last_ms = events[0][0] * 1000, events[-1][0] * 1000
    return {
        "model": SLOW_MODEL,
        "heartbeat_s": float(SLOW_HEARTBEAT_S),
        "first_event": events[0][1],
        "first_event_ms": round(first_ms, 1),
        "first_text_ms": round(
            next(at for at, t in events if t == "TEXT_MESSAGE_CONTENT") * 1000, 1
        ),
        "last_event_ms": round(last_ms, 1),
        "events": len(events),
        "text_deltas": sum(1 for _, t in events if t == "TEXT_MESSAGE_CONTENT"),
        "heartbeats": sum(1 for _, f in frames if f.startswith(b":")),
        "reads": len(arrivals),
        "longest_silence_ms": round(max(gaps, default=0) * 1000, 1),
        "first_event_under_300_ms": first_ms < FIRST_EVENT_TARGET_MS,
        "turn_over_3_s": last_ms > SLOW_TURN_MIN_MS,
    }


def import_times(runs: int) -> dict[str, Any]:
    """Median import time of each handler module in fresh interpreters."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "shared"),
        "POWERTOOLS_SERVICE_NAME": "x",
        "POWERTOOLS_METRICS_NAMESPACE": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    figures = {}
    for name in ("run", "resume", "requests"):
        target = name if name in STREAMED else str(ROOT / "functions" / name / "handler.py")
        samples = [
            json.loads(
                subprocess.run(
                    [sys.executable, "-c", IMPORT_PROBE, target],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                    timeout=120,
                ).stdout
            )
            for _ in range(runs)
        ]
        figures[name] = {
            "median_ms": round(statistics.median(s["ms"] for s in samples), 1),
            "imports_strands": any(s["strands"] for s in samples),
        }
    return figures


def targets(figures: dict[str, Any], peer: dict[str, Any], cold: dict[str, Any]) -> dict[str, Any]:
    """Every target of the cycle, with the figure it is judged on."""
    cycle_figures = figures["cycle"]
    calls = sum(cycle_figures[phase]["total_calls"] for phase in ("pause", "resume"))
    ours = _sent(cycle_figures)
    theirs = _sent(peer)
    return {
        "cycle_calls": calls,
        "cycle_calls_at_most_12": calls <= CYCLE_CALLS_TARGET,
        "bytes_sent": ours,
        "peer_bytes_sent": theirs,
        "bytes_ratio_to_peer": round(ours / theirs, 2),
        "bytes_at_most_half_of_peer": ours <= theirs / 2,
        "import_ratios": cold["ratios"],
        **cold["targets"],
        "requests_does_not_import_strands": not figures["handler_import"]["requests"][
            "imports_strands"
        ],
        "first_event_under_300_ms_of_a_turn_over_3_s": figures["streaming"][
            "first_event_under_300_ms"
        ]
        and figures["streaming"]["turn_over_3_s"],
    }


def _sent(cycle_figures: dict[str, Any]) -> int:
    return sum(sum(cycle_figures[p]["bytes_sent"].values()) for p in ("pause", "resume"))


def main() -> None:
    from bench import cold_start
    from bench.peers.langgraph_cycle import peer

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--layer", action="store_true", help="also bundle the layer (bench/cold_start.py)"
    )
    args = parser.parse_args()
    emulator = Emulator().start()
    try:
        figures: dict[str, Any] = {"cycle": cycle(emulator), "streaming": streaming(emulator)}
        # The peer on the same emulator when its requirements are installed, else the
        # figures it last recorded (bench/peers/README.md).
        peer_figures, source = peer(emulator)
    finally:
        emulator.stop()
    figures["peer"] = {
        "source": source,
        **{p: {k: peer_figures[p][k] for k in ("total_calls", "bytes_sent")} for p in PHASES},
    }
    figures["handler_import"] = import_times(args.runs)
    cold = cold_start.measure(args.runs)
    figures["cold_start"] = cold
    if args.layer:
        figures["layer"] = cold_start.layer()
    figures["targets"] = targets(figures, peer_figures, cold)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
