"""A long resumed run through the API: 20 steps, five of them 30 KB tool results, killed
with SIGKILL in the middle and taken over by a fresh server that repeats nothing.

The agent is written by the test as a module of its own (a team's agent, through the
public surface). Its scripted model and its tool log each call that completed to a file,
so what survives a SIGKILL is counted outside the process. The servers are
`local.server` processes on one moto server; the second knows nothing but the store.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from interlock import keys
from interlock.adapters import packing
from interlock.adapters.dynamo import from_item
from interlock.timing import CLOCK_SKEW_MS
from tests.e2e.support import TIMEOUT_S, wait_for

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
MODULE = "parts_agent"
STEPS = 20
BIG = (2, 6, 10, 14, 18)  # the steps whose tool returns 30 KB
KILLED_IN = 11  # the model call that never completes: step 10's result is recorded
AGENT_SOURCE = textwrap.dedent(
    f'''
    """Builds 20 parts once a person says yes; five parts return a 30 KB build log."""

    import os
    import time
    from pathlib import Path

    from strands import ToolContext, tool

    from interlock.agent import AgentInputs, AgentSpec, Scenario

    LOG = Path(os.environ["PARTS_LOG"])
    BIG = {BIG!r}


    def _note(line):
        with (LOG / "calls.log").open("a") as out:
            out.write(line + "\\n")


    @tool(context=True)
    def start_build(tool_context: ToolContext) -> str:
        """Start the build of all parts, once a person agrees."""
        answer = tool_context.interrupt("go-ahead", reason={{"message": "Build all parts?"}})
        return f"The person answered {{answer}}."


    @tool
    def build_part(n: int) -> str:
        """Build part n; returns its build log."""
        _note(f"tool {{n}}")
        if n in BIG:
            # 30 KB that does not compress away: each line differs
            return "\\n".join(f"part {{n}} line {{i:05d}} ok" for i in range(1400))[:30_000]
        return f"part {{n}} built"


    def _step(k):
        def step(results):
            if (LOG / f"hang-at-{{k}}").exists():
                (LOG / "hung").write_text(str(k))
                time.sleep(3600)
            _note(f"model {{k}}")
            if k == 0:
                return [{{"tool": "start_build", "input": {{}}}}]
            if k <= {STEPS}:
                return [{{"text": f"Part {{k}}."}}, {{"tool": "build_part", "input": {{"n": k}}}}]
            return [{{"text": "All {STEPS} parts built."}}]

        return step


    SCRIPT = [Scenario("parts", [_step(k) for k in range({STEPS} + 2)], keywords=("parts",))]


    def build(inputs: AgentInputs) -> AgentSpec:
        return AgentSpec(
            tools=[start_build, build_part],
            system_prompt="You build parts.",
            model=inputs.model(scripted=SCRIPT),
        )
    '''
)


class Server:
    """One `local.server` process on the shared moto server."""

    def __init__(self, aws: dict[str, Any], work: Path, name: str, key: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLOCK_"))}
        env.update(
            PYTHONPATH=os.pathsep.join([str(work), str(ROOT)]),
            PARTS_LOG=str(work),
            INTERLOCK_MODEL="scripted",
            INTERLOCK_LEASE_MS="3000",
            # 22 model calls in the resumed invocation: over the default cap of 12, which
            # counts replayed calls too (a takeover stops where the first worker would)
            INTERLOCK_MAX_MODEL_CALLS="30",
            INTERLOCK_DEV_KEY=key,
        )
        argv = [sys.executable, "-m", "local.server", "--port", "0", "--sweep-every", "0"]
        argv += ["--aws-endpoint", aws["endpoint"], "--table", aws["table"]]
        argv += ["--bucket", aws["bucket"], "--agent", f"{MODULE}:build"]
        argv += ["--state", str(work / f"state-{name}")]
        self.log = work / f"{name}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        self.url, self.token = self._ready()

    def _ready(self) -> tuple[str, str]:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            ready = re.search(r"^READY (\S+)$", text, re.M)
            token = re.search(r"export TOKEN=(\S+)", text)
            if ready and token:
                return ready.group(1), token.group(1)
            assert self.process.poll() is None, f"the server exited:\n{text}"
            time.sleep(0.05)
        raise AssertionError(f"not ready:\n{self.log.read_text()}")

    def post(self, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            text = response.read().decode()
        return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def _resume_body(interrupt: dict[str, Any]) -> dict[str, Any]:
    return {
        "threadId": "parts",
        "runId": "r2",
        "messages": [],
        "resume": [
            {
                "interruptId": interrupt["id"],
                "status": "resolved",
                "payload": {"answer": "yes"},
                "metadata": {"secret": interrupt["metadata"]["secret"]},
            }
        ],
    }


def _calls(work: Path) -> Counter[str]:
    return Counter((work / "calls.log").read_text().split("\n")[:-1])


def _step_items(aws: dict[str, Any]) -> list[dict[str, Any]]:
    rows = aws["dynamodb"].query(
        TableName=aws["table"],
        KeyConditionExpression="pk = :pk AND begins_with(sk, :s)",
        ExpressionAttributeValues={":pk": {"S": keys.chat_pk("parts")}, ":s": {"S": "STEP#"}},
    )
    return list(rows["Items"])


def _entry(item: dict[str, Any]) -> str:
    """A step item's entry as the journal wrote it (stored compressed when that is smaller)."""
    return packing.text(from_item(item)["entry"])


def test_a_long_run_killed_at_step_ten_is_taken_over_repeating_no_model_call_or_tool(
    server_aws: dict[str, Any], tmp_path: Path
) -> None:
    (tmp_path / f"{MODULE}.py").write_text(AGENT_SOURCE)
    key = secrets.token_hex(32)
    first = Server(server_aws, tmp_path, "A", key)
    second: Server | None = None
    try:
        # Given a run paused on its question, answered, and killed after step 10
        paused = first.post(
            "/runs",
            {
                "threadId": "parts",
                "runId": "r1",
                "messages": [{"id": "m1", "role": "user", "content": "build the parts"}],
            },
        )
        interrupt = paused[-1]["outcome"]["interrupts"][0]
        (tmp_path / f"hang-at-{KILLED_IN}").touch()
        answering = threading.Thread(target=_answer_into_the_void, args=(first, interrupt))
        answering.start()
        wait_for(lambda: (tmp_path / "hung").exists(), "the run to reach step 11")
        first.kill()
        answering.join(timeout=10)
        (tmp_path / f"hang-at-{KILLED_IN}").unlink()
        before = _calls(tmp_path)
        assert before == Counter(
            [f"model {k}" for k in range(KILLED_IN)] + [f"tool {n}" for n in range(1, 11)]
        ), "every step up to 10 ran once, and nothing after it"

        # When a fresh server takes the same answer once the dead claim's lease lapsed
        second = Server(server_aws, tmp_path, "B", key)
        time.sleep(3.5 + CLOCK_SKEW_MS / 1000)  # the lease, and the margin a taker waits
        done = second.post("/resume", _resume_body(interrupt))
        again = second.post("/resume", {**_resume_body(interrupt), "runId": "r3"})
    finally:
        first.stop()
        if second is not None:
            second.stop()

    # Then it completed, and every model call and tool body ran exactly once in all
    finished = done[-1]
    assert finished["type"] == "RUN_FINISHED", done[-3:]
    assert finished["result"]["outcome"] == "completed"
    text = "".join(e["delta"] for e in done if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "All 20 parts built." in text
    calls = _calls(tmp_path)
    assert calls == Counter(
        [f"model {k}" for k in range(STEPS + 2)] + [f"tool {n}" for n in range(1, STEPS + 1)]
    )
    # Each step is an item of its own (the question tool's result, the 20 responses that
    # called a part's tool and the 20 results; the last response, the answer, is stored
    # by the finish), so the 150 KB of results never met a journal cap; each big result
    # is an S3 object its item points at (read back whole by the takeover), the rest inline
    steps = _step_items(server_aws)
    assert len(steps) == 2 * STEPS + 1
    entries = [json.loads(_entry(item)) for item in steps]
    pointers = [e for e in entries if e.get("k") == "object"]
    assert len(pointers) == len(BIG)
    assert all(len(next(iter(item["entry"].values()))) < 4096 for item in steps)
    listed = server_aws["s3"].list_objects_v2(Bucket=server_aws["bucket"], Prefix="steps/")
    objects = {o["Key"]: o["Size"] for o in listed["Contents"]}
    assert {p["key"] for p in pointers} <= set(objects)
    # And answering again replays the same end
    assert again[-1]["type"] == "RUN_FINISHED"
    assert again[-1]["result"]["outcome"] == "replayed"


def _answer_into_the_void(server: Server, interrupt: dict[str, Any]) -> None:
    """Answer on a server that dies mid-run: the connection breaks, which is the point."""
    with contextlib.suppress(urllib.error.URLError, http.client.HTTPException, OSError):
        server.post("/resume", _resume_body(interrupt))
