"""The run and resume functions' process, started as the Web Adapter starts it:
`functions/stream/run.sh` serves the streaming app on `AWS_LWA_PORT`."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _post(port: int, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", path, body=json.dumps(body))
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_run_sh_serves_the_streaming_app_on_the_adapters_port(
    server_aws: dict[str, Any], tmp_path: Path
) -> None:
    port = _free_port()
    env = {
        **os.environ,
        # `python` is the runtime's: here, this virtualenv's
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": f"{ROOT / 'shared'}{os.pathsep}{ROOT}",
        "AWS_LWA_PORT": str(port),
        "INTERLOCK_FUNCTION": "run",
        "INTERLOCK_TABLE": server_aws["table"],
        "INTERLOCK_BUCKET": server_aws["bucket"],
        "INTERLOCK_MODEL": "scripted",
        "AWS_ENDPOINT_URL": server_aws["endpoint"],
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["sh", "functions/stream/run.sh"], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, f"it exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"not serving:\n{log.read_text()}"
            try:
                status, body = _post(port, "/runs", {"threadId": "c1"})
                break
            except OSError:
                time.sleep(0.1)
        # Serving the run function: a request without the API's context is refused
        assert (status, body["error"]["code"]) == (401, "unauthorized")
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_cold_start_runs_without_the_collector_and_freezes_what_it_built() -> None:
    # Counted by the collector's own callbacks: not one collection while it imports
    probe = (
        "import gc\n"
        "from interlock.api import serve\n"
        "runs = []\n"
        "gc.callbacks.append(lambda phase, info: runs.append(phase))\n"
        "on = gc.isenabled()\n"
        "app = serve.ready()\n"
        "print(on, runs.count('start'), gc.isenabled(), gc.get_freeze_count() > 0,"
        " len(app.routes) > 0)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "shared"), "INTERLOCK_FUNCTION": "resume"}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    # Importing the module left the collector on; `ready` ran none, and put it back
    assert done.stdout.split() == ["True", "0", "True", "True", "True"]
