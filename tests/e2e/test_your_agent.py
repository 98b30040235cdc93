"""docs/your-agent.md, followed as a newcomer follows it: their own my_agent.py (the
page's, in a directory of their own), served with the page's command and no model, the
page's message, the card approved through the API, and their own tool's result; then
the same agent through the two local model endpoints, playing the page's script.

The commands are read from the page itself and run as a reader runs them, on a port and
a state directory of the test's own: `./dev serve` from the reader's directory, by its
path; the rest from the checkout's root.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_readme_commands import LOCAL, _events

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "your-agent.md"
READY_TIMEOUT_S = 120
# What the page says the tool's approved call answers.
RESULT = "Refunded 10.00 on order A-1."


def page() -> str:
    return PAGE.read_text()


def python_block(first_line: str) -> str:
    """The page's Python block that opens with `first_line`."""
    found = re.search(rf"```python\n{re.escape(first_line)}\n(.*?)```", page(), re.S)
    assert found is not None, f"the page has a block opening with {first_line!r}"
    return found.group(1)


def commands() -> list[str]:
    """The page's shell commands, continuations joined and comments dropped."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", page(), re.S):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            if command := re.sub(r"\s+#.*$", "", line).strip():
                found.append(command)
    return found


def command(starting: str) -> str:
    (found,) = [c for c in commands() if c.startswith(starting)]
    return found


def clean_env(**extra: str) -> dict[str, str]:
    """The reader's environment: nothing of the test run's AWS or Interlock settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLOCK_"))}
    env.pop("PYTHONPATH", None)
    return {**env, **extra}


class Started:
    """A command of the page, started in the background; reads what it prints."""

    def __init__(self, shell: str, cwd: Path, env: dict[str, str]) -> None:
        # One simple command: bash runs it in its own place, so stopping it stops it.
        self.process = subprocess.Popen(
            ["bash", "-c", shell],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.printed: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            self.lines.put(line)

    def wait_for(self, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.process.poll() is None, f"it exited: {self.printed}"
                continue
            self.printed.append(line)
            if found := re.search(pattern, line):
                return found
        raise AssertionError(f"never printed {pattern!r}: {self.printed}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


class Served(Started):
    """The page's `./dev serve` command, run from the reader's own directory by the
    script's path, on a port and a state directory of the test's own."""

    def __init__(self, serve: str, reader: Path, env: dict[str, str]) -> None:
        assert "./dev serve" in serve
        shell = serve.replace("./dev serve", f"{ROOT / 'dev'} serve", 1)
        shell += f" --port 0 --state {reader / 'state'} --sweep-every 0"
        super().__init__(shell, reader, env)
        self.url = self.wait_for(r"on (http://127\.0\.0\.1:\d+)").group(1)
        self.token = self.wait_for(r"export TOKEN=(\S+)").group(1)

    def shell(self, line: str) -> subprocess.CompletedProcess[str]:
        """A command of the page from the checkout's root, with `$TOKEN` as printed."""
        return subprocess.run(
            ["bash", "-c", line.replace(LOCAL, self.url)],
            cwd=ROOT,
            env={**os.environ, "TOKEN": self.token},
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture
def reader(tmp_path: Path) -> Path:
    """The newcomer's own directory, holding the page's my_agent.py."""
    where = tmp_path / "my-project"
    where.mkdir()
    (where / "my_agent.py").write_text(python_block("# my_agent.py"))
    return where


@pytest.fixture
def served(reader: Path) -> Iterator[Served]:
    server = Served(
        command("INTERLOCK_AGENT=my_agent:build INTERLOCK_MODEL=tools"), reader, clean_env()
    )
    yield server
    server.stop()


def ask(server: Served) -> None:
    """The page's message: the stream ends on the confirm card of the reader's tool."""
    asked = server.shell(next(c for c in commands() if c.startswith("curl")))
    assert asked.returncode == 0, asked.stderr
    last = _events(asked.stdout)[-1]
    assert last["type"] == "RUN_FINISHED", asked.stdout[-2000:]
    outcome = last["outcome"]
    assert isinstance(outcome, dict) and outcome["type"] == "interrupt", last
    (interrupt,) = outcome["interrupts"]
    card = interrupt["metadata"]["card"]
    assert (card["type"], card["tool"]) == ("confirm", "refund_order"), card


def approve(server: Served) -> str:
    """The page's approval, through the API; what the agent said at the end."""
    answer = command(".venv/bin/python -m local.answer")
    answered = server.shell(f"{answer} --url {server.url}")
    assert answered.returncode == 0, answered.stderr
    # The answer tool prints the streamed text a piece a line
    return "".join(answered.stdout.splitlines())


def ask_and_approve(server: Served) -> str:
    ask(server)
    return approve(server)


def test_the_readmes_first_steps_are_this_pages() -> None:
    # README's "Your own agent" is this page's first two steps, word for word, so the
    # test below follows it as much as the page
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Your own agent") :].split("\n## ", 1)[0]
    module = re.search(r"```python\n# my_agent\.py\n(.*?)```", section, re.S)
    assert module is not None and module.group(1) == python_block("# my_agent.py")
    assert command("INTERLOCK_AGENT=my_agent:build INTERLOCK_MODEL=tools") in section
    assert "call refund_order order_id=A-1" in section


def test_a_newcomers_own_tool_is_asked_about_and_answered_with_no_model(
    served: Served, reader: Path
) -> None:
    ask(served)
    # "Kill the server while the card is open and start it again: the card is still
    # there": the same command, on the state the killed one kept (and held)
    served.process.send_signal(signal.SIGKILL)
    served.process.wait(timeout=30)
    again = Served(
        command("INTERLOCK_AGENT=my_agent:build INTERLOCK_MODEL=tools"), reader, clean_env()
    )
    try:
        # What the page says the stand-in answers with, and what it does
        said = approve(again)

        assert f"refund_order returned: {RESULT}" in page()
        assert f"refund_order returned: {RESULT}" in said, said
        # "Answering again finds nothing left to answer"
        twice = again.shell(f"{command('.venv/bin/python -m local.answer')} --url {again.url}")
        assert twice.returncode == 1
        assert twice.stderr.strip() == "nothing to answer: the request is done"
    finally:
        again.stop()


def test_a_message_naming_no_tool_is_answered_with_the_tools_it_has(served: Served) -> None:
    body = {
        "threadId": "hello",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "What can you do?"}],
    }
    curl = f"curl -sN -H \"Authorization: Bearer $TOKEN\" {LOCAL}/runs -d '{json.dumps(body)}'"
    events = _events(served.shell(curl).stdout)
    text = "".join(str(e.get("delta", "")) for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "refund_order (Refund a customer's order)" in text, text
    assert events[-1]["outcome"] == {"type": "success"}


ENDPOINTS = [
    (".venv/bin/python -m local.bedrock", "INTERLOCK_BEDROCK_URL="),
    (".venv/bin/python -m local.openai_compat", "INTERLOCK_MODEL='openai:"),
]


@pytest.mark.parametrize(("endpoint", "serve"), ENDPOINTS)
@pytest.mark.parametrize("tools", [False, True], ids=["script", "tools"])
def test_the_agent_plays_through_each_local_model_endpoint(
    endpoint: str, serve: str, tools: bool, reader: Path
) -> None:
    # Given the page's script added to my_agent.py, and the endpoint started as the
    # page says, from the checkout's root, with the reader's directory on PYTHONPATH
    # (or with `--tools` instead of the script: the tools stand-in, on the wire)
    with (reader / "my_agent.py").open("a") as module:
        module.write("\n\n" + python_block("# add to my_agent.py"))
    started = command(endpoint)
    assert "--tools" in page() and "--scenarios my_agent:SCRIPT" in started
    if tools:
        started = started.replace("--scenarios my_agent:SCRIPT", "--tools")
    model = Started(f"{started} --port 0", ROOT, clean_env(PYTHONPATH=str(reader)))
    try:
        url = model.wait_for(r"^READY (http://127\.0\.0\.1:\d+)").group(1)
        port = url.rsplit(":", 1)[1]
        # When the server is pointed at it, as the page says (on the port it took)
        pointed = re.sub(r"127\.0\.0\.1:876\d", f"127.0.0.1:{port}", command(serve))
        server = Served(pointed, reader, clean_env())
        try:
            said = ask_and_approve(server)
        finally:
            server.stop()
    finally:
        model.stop()

    # Then it played on the wire: the card, then the script's report of the result, or
    # the stand-in's quote of it
    expected = f"refund_order returned: {RESULT}" if tools else f"Done: {RESULT}"
    assert expected in page()
    assert expected in said, said


@pytest.mark.parametrize("endpoint", [endpoint for endpoint, _ in ENDPOINTS])
def test_scenarios_that_load_nothing_are_one_line(endpoint: str, reader: Path) -> None:
    for name, says in [
        ("my_agent", "scenarios are named 'package.module:NAME'"),
        ("no_such_module:SCRIPT", "no module 'no_such_module'"),
        ("my_agent:NOTHING", "module 'my_agent' has no 'NOTHING'"),
        ("my_agent:build", "'my_agent:build' is not a list of interlock.agent.Scenario"),
    ]:
        done = subprocess.run(
            ["bash", "-c", f"{endpoint} --port 0 --scenarios {name}"],
            cwd=ROOT,
            env=clean_env(PYTHONPATH=str(reader)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2
        (line,) = done.stderr.strip().splitlines()
        assert says in line and "Traceback" not in done.stderr
