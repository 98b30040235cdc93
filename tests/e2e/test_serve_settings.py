"""`./dev serve`'s settings, as a newcomer gets them wrong: every malformed value is one
line naming its variable (no traceback, nothing started); a misspelt variable is a
one-line warning naming the closest known one; and a second server on the same state
is refused in one line, naming the first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60


def serve(
    state: Path, env: dict[str, str], *args: str, timeout: int = 120
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLOCK_"))}
    return subprocess.run(
        [sys.executable, "-m", "local.server", "--port", "0", "--state", str(state), *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {"INTERLOCK_FETCH": "dmeo"},
            "INTERLOCK_FETCH must be one of ['http', 'demo'], not 'dmeo'",
        ),
        ({"INTERLOCK_REQUEST_TTL_S": "1 day"}, "(from INTERLOCK_REQUEST_TTL_S='1 day')"),
        ({"INTERLOCK_LEASE_MS": "10"}, "(from INTERLOCK_LEASE_MS='10')"),
        ({"INTERLOCK_SAMPLE_RATE": "half"}, "(from INTERLOCK_SAMPLE_RATE='half')"),
        ({"INTERLOCK_HEARTBEAT_S": "0"}, "INTERLOCK_HEARTBEAT_S must be above 0"),
        (
            {"INTERLOCK_BEDROCK_URL": "127.0.0.1:8766"},
            "INTERLOCK_BEDROCK_URL must be an http(s) URL",
        ),
        ({"INTERLOCK_FUNCTION": "both"}, "INTERLOCK_FUNCTION must be one of"),
        ({"INTERLOCK_DEV_KEY": "not-hex"}, "INTERLOCK_DEV_KEY must be a key in hex"),
        (
            {"INTERLOCK_AGENT_CONFIG_FILE": "/no/such/agent.json"},
            "/no/such/agent.json cannot be read",
        ),
        ({"INTERLOCK_AGENT": "my_agent:build"}, "no module 'my_agent' for the agent"),
    ],
)
def test_a_malformed_value_is_one_line_naming_its_variable(
    env: dict[str, str], says: str, tmp_path: Path
) -> None:
    done = serve(tmp_path / "state", env)

    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interlock: "), done.stderr
    assert says in lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_misspelt_variable_is_a_one_line_warning(tmp_path: Path) -> None:
    # Misspelt, the setting would be left at its default without a word
    done = serve(tmp_path / "state", {"INTERLOCK_FECTH": "demo"}, "--agent", "nope.module:build")

    warning, problem = done.stderr.strip().splitlines()
    assert warning == (
        "interlock: warning: INTERLOCK_FECTH is not a setting Interlock reads; "
        "did you mean INTERLOCK_FETCH?"
    )
    assert problem.startswith("interlock: no module 'nope.module'")


def test_a_second_server_on_the_same_state_is_refused_in_one_line(tmp_path: Path) -> None:
    state, log = tmp_path / "state", tmp_path / "first.log"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLOCK_"))}
    argv = [sys.executable, "-m", "local.server", "--port", "0", "--state", str(state)]
    with log.open("wb") as out:
        first = subprocess.Popen(
            [*argv, "--sweep-every", "0"], cwd=ROOT, env=clean, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not re.search(r"^READY ", log.read_text(), re.M):
            assert first.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)

        second = serve(state, {})
    finally:
        first.terminate()
        first.wait(timeout=30)

    assert second.returncode != 0
    assert second.stderr.strip() == (
        f"interlock: another server (pid {first.pid}) is serving from {state}: stop it, or "
        "give this one a state directory of its own (--state)"
    )
