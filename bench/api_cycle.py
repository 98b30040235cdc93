"""One pause and one resume through the local server, counted; cold-start costs.

- AWS calls by operation and request bytes for `POST /runs` (a turn that pauses) and
  `POST /resume` (an approval that finishes it), counted at the moto server.
- Handler import time of each Lambda module: median over fresh interpreters, and
  whether the module pulled in strands (the requests function must not).
- The `interlock` layer's unzipped size, bundled exactly as `cdk synth` bundles it
  (pip installs manylinux wheels for the Lambda runtime; needs the package index).

Prints JSON.

    .venv/bin/python bench/api_cycle.py [--no-layer] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from local import devtokens  # noqa: E402
from local.emulator import Emulator  # noqa: E402

LAYER_BUDGET_MB = 100
IMPORT_PROBE = """
import importlib.util, json, sys, time
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
elapsed = time.perf_counter() - start
print(json.dumps({"ms": elapsed * 1000, "strands": "strands" in sys.modules}))
"""


def cycle(emulator: Emulator) -> dict[str, Any]:
    """Serve the handlers locally and measure one pause and one resume.

    Local mode configures the handlers through the environment; it is restored after,
    so a caller's own AWS settings survive.
    """
    saved = dict(os.environ)
    try:
        return _cycle(emulator)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _cycle(emulator: Emulator) -> dict[str, Any]:
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log in the figures
    from local.server import LocalApi, configure, create_storage_if_missing

    configure(emulator.endpoint, "bench", "bench-data")
    create_storage_if_missing("bench", "bench-data")
    key = secrets.token_bytes(32)
    server = make_server("127.0.0.1", 0, LocalApi(key), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.port}"
    token = devtokens.issue(key, "alice", ["reporter"])
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
        events = _post(
            url,
            "/resume",
            token,
            {
                "threadId": "bench",
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
            },
        )
        resume = emulator.traffic.take()
        finished = events[-1]
    finally:
        server.shutdown()
    return {
        "pause": {**pause, "bytes_written": _written(pause)},
        "resume": {**resume, "bytes_written": _written(resume), "journal": _journal(resume)},
        "resume_outcome": finished.get("result", {}).get("outcome"),
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
    """What recording the resumed run's steps cost: one write per step."""
    name = "dynamodb.UpdateItem[journal]"
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
        handler = ROOT / "functions" / name / "handler.py"
        samples = [
            json.loads(
                subprocess.run(
                    [sys.executable, "-c", IMPORT_PROBE, str(handler)],
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


def layer_size() -> dict[str, Any]:
    """Bundle the layer as the CDK asset does and measure it unzipped."""
    from infra.layer import PipLocalBundling

    with tempfile.TemporaryDirectory() as out:
        bundler = PipLocalBundling(ROOT / "requirements.txt", ROOT / "shared" / "interlock")
        bundler.try_bundle(out, None)  # type: ignore[arg-type]
        size = sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
    return {
        "unzipped_mb": round(size / 1_000_000, 1),
        "budget_mb": LAYER_BUDGET_MB,
        "within_budget": size / 1_000_000 < LAYER_BUDGET_MB,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-layer", action="store_true", help="skip bundling the layer")
    args = parser.parse_args()
    emulator = Emulator().start()
    try:
        figures: dict[str, Any] = {"cycle": cycle(emulator)}
    finally:
        emulator.stop()
    figures["handler_import"] = import_times(args.runs)
    if not args.no_layer:
        figures["layer"] = layer_size()
    figures["targets"] = {
        "requests_does_not_import_strands": not figures["handler_import"]["requests"][
            "imports_strands"
        ],
        "layer_under_100_mb": figures.get("layer", {}).get("within_budget"),
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
