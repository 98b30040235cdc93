"""Every shell command README.md and the pages of docs/ give, checked against what they
say it does.

The commands are read from the pages themselves: each line of their bash blocks, and
inline code that starts the way a command does (`python` and `pip` included). Each one
is either run here as a reader runs it (on a port and a state directory of the test's
own), or named in `ELSEWHERE` with the test that covers it and why it is not run here
(it deploys to AWS, or it is this very run). A command a page gains with neither fails
the test, so the docs cannot drift from what works.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# Every page a reader is sent to: the README, the upgrade notes and docs/.
PAGES = [
    p for p in (README, ROOT / "UPGRADING.md", *sorted((ROOT / "docs").glob("*.md"))) if p.exists()
]
LOCAL = "http://127.0.0.1:8765"
STARTS_A_COMMAND = re.compile(
    r"^(\./dev|\.venv/bin/python|python3? |pip |npx |curl |export "
    r"|[A-Z_]+=\S* ?(\./dev|\.venv|python))"
)

YOUR_AGENT = "tests/e2e/test_your_agent.py runs it as docs/your-agent.md gives it"
# Commands not run here: the test that covers each instead, and why.
ELSEWHERE = {
    "./dev test": "this run is it",
    "./dev test <paths or options>": "this run is it, with arguments",
    "./dev lint": ".ci/run runs it before the tests",
    "./dev lock": "tests/infra/test_lock.py checks the lock it writes",
    "./dev smoke": "needs an AWS account; tests/unit/test_smoke.py runs its plan and teardown",
    "./dev smoke --plan": "tests/unit/test_smoke.py runs it and checks every step it prints",
    "npx cdk bootstrap": "needs an AWS account; tests/infra synthesizes the same app",
    "npx cdk deploy --all": "needs an AWS account; tests/infra synthesizes the same app",
    "npx cdk deploy --all -c interlock:channels=slack,telegram": (
        "needs an AWS account; tests/infra/test_channels_stack.py synthesizes it"
    ),
    "npx cdk deploy --all -c interlock:agent=examples.doorstep:build": (
        "needs an AWS account; tests/infra/test_deploy_settings.py synthesizes an agent's app"
    ),
    "INTERLOCK_MODEL=bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0 ./dev serve "
    "--agent my_agent:build": (
        "needs the reader's agent and Bedrock; tests/e2e/test_own_agent.py serves an agent "
        "of one's own, tests/agent/test_snapshot_and_model.py builds the Bedrock model"
    ),
    "INTERLOCK_MODEL='openai:http://127.0.0.1:11434/v1#llama3.1' ./dev serve "
    "--agent my_agent:build": (
        "needs the reader's agent and endpoint; tests/e2e/test_openai_path.py serves the "
        "demo through the same provider against local.openai_compat"
    ),
    "INTERLOCK_MODEL=scripted:2000/60 ./dev serve": (
        "tests/e2e/test_streaming.py and tests/browser/test_streaming_page.py serve a paced "
        "scripted model"
    ),
    "./dev serve --agent examples.doorstep:build --roles dispatcher": (
        "tests/e2e/test_doorstep_drill.py drives the Doorstep agent"
    ),
    "./dev serve --agent examples.mcp:build": (
        "tests/e2e/test_mcp_input.py serves the payments agent through local.server, what "
        "./dev serve runs, over a bank of its own"
    ),
    ".venv/bin/python examples/mcp/server.py --port 8766 --ledger bank-ledger.jsonl": (
        "tests/e2e/test_mcp_input.py starts the bank the same way, on a free port"
    ),
    "BANK_MCP_URL=http://127.0.0.1:8766/mcp ./dev serve --agent examples.mcp:build": (
        "tests/e2e/test_mcp_input.py points the served agent at its bank the same way"
    ),
    ".venv/bin/python bench/store_cycle.py": "tests/bench/test_bench_store_cycle.py",
    ".venv/bin/python bench/resume_vs_rerun.py": "tests/bench/test_bench_resume_vs_rerun.py",
    ".venv/bin/python bench/api_cycle.py": "tests/bench/test_bench_api_cycle.py",
    ".venv/bin/python bench/long_run.py": "tests/bench/test_bench_long_run.py",
    ".venv/bin/python bench/history_read.py": "tests/bench/test_bench_history_read.py",
    ".venv/bin/python bench/cold_start.py --layer": "tests/bench/test_bench_cold_start.py",
    ".venv/bin/python bench/sweeper.py": "tests/bench/test_bench_sweeper.py",
    ".venv/bin/python bench/killed_run.py": "tests/bench/test_bench_killed_run.py",
    ".venv/bin/python bench/soak.py": "a soak of minutes: run by hand; its figures go in notes",
    ".venv/bin/python bench/peers/langgraph_cycle.py": "tests/bench/test_bench_peer_cost.py",
    "pip wheel .": "tests/infra/test_package.py builds the wheel from this checkout",
    "npx cdk deploy InterlockStorage -c interlock:upgradeStep=1": (
        "needs an AWS account; tests/infra/test_upgrade.py synthesizes this step's storage "
        "stack and compares it with the previous release's"
    ),
    "npx cdk deploy InterlockStorage": (
        "needs an AWS account; tests/infra/test_upgrade.py compares the storage stack with "
        "the first step's"
    ),
    # docs/your-agent.md (and README's "Your own agent"): the page's test runs each one.
    "INTERLOCK_AGENT=my_agent:build INTERLOCK_MODEL=tools ./dev serve": YOUR_AGENT,
    """curl -sN -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8765/runs -d '{"threadId":"""
    """"mine","runId":"r1","messages":[{"id":"m1","role":"user","content":"call refund_order """
    """order_id=A-1"}]}'""": YOUR_AGENT,
    ".venv/bin/python -m local.answer mine approve": YOUR_AGENT,
    ".venv/bin/python -m local.bedrock --scenarios my_agent:SCRIPT": YOUR_AGENT,
    "INTERLOCK_BEDROCK_URL=http://127.0.0.1:8766 INTERLOCK_MODEL=bedrock:anthropic.local-v1 "
    "INTERLOCK_AGENT=my_agent:build ./dev serve": YOUR_AGENT,
    ".venv/bin/python -m local.openai_compat --scenarios my_agent:SCRIPT": YOUR_AGENT,
    "INTERLOCK_MODEL='openai:http://127.0.0.1:8767/v1#local-model' "
    "INTERLOCK_AGENT=my_agent:build ./dev serve": YOUR_AGENT,
    "INTERLOCK_AGENT=my_agent:build "
    "INTERLOCK_MODEL=bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0 ./dev serve": (
        "needs Bedrock; tests/e2e/test_your_agent.py serves the same agent through the local "
        "Bedrock Runtime, tests/e2e/test_model_unreachable.py one that cannot be reached"
    ),
    ".venv/bin/python -m local.bedrock": (
        "tests/e2e/test_your_agent.py starts it from the checkout's root, as written"
    ),
    ".venv/bin/python -m local.openai_compat": (
        "tests/e2e/test_your_agent.py starts it from the checkout's root, as written"
    ),
    "python -m infra.regions": (
        "tests/infra/test_regions.py compares what it prints with docs/regions.md"
    ),
    "pip install 'interlock[cdk] @ file:///…/interlock-0.1.0-py3-none-any.whl'": (
        "tests/infra/test_package.py installs the wheel it built into a fresh virtualenv "
        "and synthesizes team-app/ with it"
    ),
    "aws secretsmanager put-secret-value --secret-id <SlackSecretName> --secret-string "
    '\'{"botToken": "xoxb-…", "signingSecret": "…"}\'': (
        "needs a deployed stack; tests/channels/conftest.py stores a secret of the same "
        "shape that the channels read"
    ),
    "aws secretsmanager put-secret-value --secret-id <TelegramSecretName> --secret-string "
    '\'{"botToken": "…", "webhookSecret": "…"}\'': (
        "needs a deployed stack; tests/channels/conftest.py stores a secret of the same "
        "shape that the channels read"
    ),
    'curl "https://api.telegram.org/bot<token>/setWebhook" -d '
    "url=<ApiUrl>/channels/telegram/webhook -d secret_token=<webhook secret>": (
        "needs Telegram; tests/channels/test_channels.py posts the webhook with the secret "
        "token header Telegram sends once it is set"
    ),
    'curl -X PUT -H "Authorization: Bearer $ADMIN_TOKEN" <ApiUrl>/admin/links/slack/U0123ABCD '
    """-d '{"userId": "<cognito sub>", "roles": ["reporter"]}'""": (
        "needs a deployed stack; tests/channels/test_route_access.py puts account links "
        "through the same route"
    ),
}


def readme_commands() -> list[str]:
    """The pages' commands: bash block lines (continuations joined, comments dropped)
    and inline code that starts like a command."""
    text = "\n".join(page.read_text() for page in PAGES)
    found: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command:
                found.append(command)
    for inline in re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S)):
        if STARTS_A_COMMAND.match(inline):
            found.append(inline.strip())
    return list(dict.fromkeys(found))


# The commands the flows below run, as the README spells them.
SERVE = "./dev serve"
SETUP = "./dev setup"
EXPORT = "export TOKEN=..."
ANSWER = ".venv/bin/python -m local.answer demo approve"
OPENAPI = "PYTHONPATH=shared .venv/bin/python -m interlock.api.openapi > docs/openapi.json"


def _run_curl(command: str) -> str:
    return next(c for c in readme_commands() if c.startswith("curl") and command in c)


def test_every_command_is_run_here_or_covered_elsewhere_with_a_reason() -> None:
    ran = {SERVE, SETUP, EXPORT, ANSWER, OPENAPI, _run_curl("/runs"), _run_curl("/resume")}
    unaccounted = [c for c in readme_commands() if c not in ran and c not in ELSEWHERE]
    assert unaccounted == [], "commands in the docs that nothing runs or covers"
    for reason in ELSEWHERE.values():
        for path in re.findall(r"tests/[\w/]+\.py", reason):
            assert (ROOT / path).exists(), f"{path} is named but does not exist"
    stale = [c for c in ELSEWHERE if c not in readme_commands()]
    assert stale == [], "commands listed here that no page gives any more"


class Served:
    """`./dev serve` as the README gives it, on a port and state of the test's own."""

    def __init__(self, state: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLOCK_"))}
        argv = [*shlex.split(SERVE), "--port", "0", "--state", str(state), "--sweep-every", "0"]
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.url, self.token, self.printed = "", "", []
        lines: queue.Queue[str] = queue.Queue()
        # A thread reads its output (a pipe read line by line would hide buffered lines
        # from select): the URL and the token, then whatever else it says.
        threading.Thread(target=self._read, args=(lines,), daemon=True).start()
        while not (self.url and self.token):
            try:
                line = lines.get(timeout=120)
            except queue.Empty:
                raise AssertionError(f"./dev serve printed no token: {self.printed}") from None
            self.printed.append(line)
            if found := re.search(r"on (http://127\.0\.0\.1:\d+)", line):
                self.url = found[1]
            if found := re.search(r"export TOKEN=(\S+)", line):
                self.token = found[1]

    def _read(self, lines: queue.Queue[str]) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            lines.put(line)

    def shell(self, command: str) -> subprocess.CompletedProcess[str]:
        """Run a README command against this server, with `$TOKEN` as it printed it."""
        env = {**os.environ, "TOKEN": self.token}
        return subprocess.run(
            ["bash", "-c", command.replace(LOCAL, self.url)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path / "state")
    yield server
    server.stop()


def _events(output: str) -> list[dict[str, object]]:
    return [json.loads(line[6:]) for line in output.splitlines() if line.startswith("data: ")]


def test_serve_then_the_two_curls_pause_and_finish_the_demo_turn(served: Served) -> None:
    # `./dev serve` printed where it serves and a token (`export TOKEN=...`)
    assert served.url and served.token

    # The first curl: "The stream ends with RUN_FINISHED whose outcome is an interrupt"
    paused = served.shell(_run_curl("/runs"))
    assert paused.returncode == 0, paused.stderr
    last = _events(paused.stdout)[-1]
    assert last["type"] == "RUN_FINISHED"
    outcome = last["outcome"]
    assert isinstance(outcome, dict) and outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    for field in ("id", "responseSchema"):
        assert field in interrupt, field
    assert {"card", "secret", "expiresAt"} <= set(interrupt["metadata"])

    # The second, with its id and secret filled in: the run finishes
    resume = _run_curl("/resume")
    resume = resume.replace("<id>", interrupt["id"]).replace(
        "<secret>", interrupt["metadata"]["secret"]
    )
    done = served.shell(resume)
    assert done.returncode == 0, done.stderr
    finished = _events(done.stdout)[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"] == {"type": "success"}
    assert finished["result"]["decision"] == "approved"

    # "Answering again replays the stored answer; it never runs the turn twice": the
    # stored messages in one snapshot, the answer under the id it first streamed under
    again = _events(served.shell(resume).stdout)
    assert [e["type"] for e in again] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert again[-1]["result"]["outcome"] == "replayed"
    streamed: dict[str, str] = {}
    for e in _events(done.stdout):
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            streamed[e["messageId"]] = streamed.get(e["messageId"], "") + e["delta"]
    final_id = list(streamed)[-1]
    (final,) = [m for m in again[1]["messages"] if m["id"] == final_id]
    assert final["content"] == streamed[final_id]


def test_the_one_line_answer_reads_the_open_request_and_answers_it(served: Served) -> None:
    paused = served.shell(_run_curl("/runs"))
    assert _events(paused.stdout)[-1]["outcome"]["type"] == "interrupt"  # type: ignore[index]

    # "in one line: .venv/bin/python -m local.answer demo approve"
    answered = served.shell(f"{ANSWER} --url {served.url}")

    assert answered.returncode == 0, answered.stderr
    assert "id,name,value" in answered.stdout  # the table the approved download fetched
    # And once answered there is nothing left: one line that says so, no traceback
    again = served.shell(f"{ANSWER} --url {served.url}")
    assert again.returncode == 1
    assert again.stderr.strip() == "nothing to answer: the request is done"
    # And a refusal is one line that says why, not the server's JSON
    refused = served.shell(f"{ANSWER} --url {served.url} --token not-a-token")
    assert refused.returncode == 1
    assert re.fullmatch(r"refused \(401 \w+\): .+", refused.stderr.strip()), refused.stderr


def test_setup_and_the_openapi_command_do_what_the_readme_says(tmp_path: Path) -> None:
    # `./dev setup` installs what is missing; on a set-up checkout it changes nothing
    setup = subprocess.run(shlex.split(SETUP), cwd=ROOT, capture_output=True, text=True)
    assert setup.returncode == 0, setup.stderr
    # The OpenAPI command writes the document that is committed (a test keeps it current)
    written = tmp_path / "openapi.json"
    command = OPENAPI.replace("docs/openapi.json", str(written))
    made = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    assert json.loads(written.read_text()) == json.loads((ROOT / "docs/openapi.json").read_text())
