"""The crash demo (docs/local.md), for real: ask, kill the server, start it, answer: once.

The server runs on its embedded emulator, keeping its state and signing key in a
directory of the test's own (`--state`). It is killed with SIGKILL while the card is
open; a new server process on the same directory takes the answer from the one-line
shell command, and the paused run finishes.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.http_client import Client

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60


class Served:
    """One `local.server` process on a state directory."""

    def __init__(self, state: Path, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLOCK_"))}
        env.update(INTERLOCK_MODEL="scripted", INTERLOCK_FETCH="demo")
        argv = [sys.executable, "-m", "local.server", "--port", "0", "--state", str(state)]
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        self.url, self.token = self._ready()

    def _ready(self) -> tuple[str, str]:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            ready = re.search(r"^READY (\S+)$", text, re.M)
            token = re.search(r"export TOKEN=(\S+)", text)
            if ready and token:
                return ready.group(1), token.group(1)
            assert self.process.poll() is None, f"the server exited:\n{text}"
            time.sleep(0.05)
        raise AssertionError(f"not ready:\n{self.log.read_text()}")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"


def answer_from_the_shell(url: str, token: str, chat: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "local.answer", chat, "approve", "--url", url, "--token", token],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_card_survives_the_server_being_killed_and_is_answered_once(
    state: Path, tmp_path: Path
) -> None:
    # Given a server that paused a turn on a card
    first = Served(state, tmp_path / "first.log")
    try:
        client = Client(first.url, first.token)
        paused = client.run("demo", "Please download the reference table")
        assert paused.interrupt is not None
    finally:
        # When the server is killed while the card is open
        first.kill()

    # And a new server process starts on the same state
    second = Served(state, tmp_path / "second.log")
    try:
        assert "Restored" in second.log.read_text()
        # Then the printed token still works, and the one-line command answers the card
        answered = answer_from_the_shell(second.url, first.token, "demo")
        assert answered.returncode == 0, answered.stderr
        assert "The reference table begins" in answered.stdout
        client = Client(second.url, first.token)
        view = client.get("/chats/demo/request")
        assert (view["state"], view["decision"]) == ("done", "approved")
        # And answering again finds nothing left to answer: the run finished once
        again = answer_from_the_shell(second.url, first.token, "demo")
        assert again.returncode == 1 and "request is done" in again.stderr
        turns = client.get("/chats/demo/turns")["turns"]
        assert [t["role"] for t in turns] == ["user", "assistant"]
    finally:
        second.stop()
