"""An MCP server's question, asked durably: paused in one process, answered in another,
retried once, and never twice after a crash at any point of the retry.

The bank (`examples/mcp/server.py`) runs as its own process on 127.0.0.1 and writes
every call it serves to a ledger, so what the server saw is counted outside Interlock's
processes. Its first `transfer_funds` round asks two questions (confirm, reference);
the retry carries the answers and the sealed `requestState` of that first round.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interlock.adapters.factory import Stores
from interlock.elicitation import interrupt_name
from interlock.records import RequestState
from local.emulator import Emulator
from tests.conftest import fresh_storage
from tests.e2e.http_client import LocalServer, local_server
from tests.e2e.support import TIMEOUT_S, pointer, wait_for
from tests.e2e.test_processes import CRASH_LEASE, Lab, wait_for_lapse
from tests.e2e.test_stock_client import DRIVERS, StockClient
from tests.forks import Forked, fork_server

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
AGENT = ("--agent", "examples.mcp:build")
PAYLOADS = {
    interrupt_name(1, "confirm"): {"ok": True},
    interrupt_name(1, "reference"): {"reference": "INV-7"},
    "*": {},
}
SENT = "Sent 120.00 EUR to Ada Lovelace (reference INV-7)."
NOT_TWICE = "It is not sent twice"


@dataclass
class Bank:
    url: str
    ledger: Path

    def lines(self) -> list[dict[str, Any]]:
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    def rounds(self, n: int) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line.get("round") == n]

    def transfers(self) -> list[dict[str, Any]]:
        return [line["transfer"] for line in self.lines() if "transfer" in line]


def serve_bank(
    ledger: Path, log: Path, port: int = 0, key: str | None = None
) -> tuple[Forked, str]:
    """The example bank as its own process (on a free port unless given, sealing with
    `key` if given); the process and its URL."""
    if not port:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    env = {**os.environ, **({"BANK_STATE_KEY": key} if key else {})}
    # By its path, as a bank runs on its own: it needs only the `mcp` package.
    argv = [sys.executable, str(ROOT / "examples" / "mcp" / "server.py"), "--port", str(port)]
    with log.open("wb") as out:
        child = fork_server().spawn(
            [*argv, "--ledger", str(ledger)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def listening() -> bool:
        with socket.socket() as client:
            return client.connect_ex(("127.0.0.1", port)) == 0

    wait_for(lambda: listening() or child.poll() is not None, "the bank to listen")
    assert child.poll() is None, log.read_text()
    return child, f"http://127.0.0.1:{port}/mcp"


@contextmanager
def running_bank(work: Path) -> Iterator[Bank]:
    """The example bank serving from `work` (its ledger and log there) while the block
    runs; killed after."""
    child, url = serve_bank(work / "ledger.jsonl", work / "bank.log")
    try:
        yield Bank(url, work / "ledger.jsonl")
    finally:
        child.kill()
        child.wait(timeout=TIMEOUT_S)


@pytest.fixture
def bank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bank]:
    with running_bank(tmp_path) as running:
        monkeypatch.setenv("BANK_MCP_URL", running.url)  # the workers' agent connects here
        yield running


@pytest.fixture
def lab(server_aws: dict[str, Any], tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(server_aws, tmp_path, chat="mcp-chat")
    try:
        yield lab
    finally:
        lab.kill_all()


def test_the_servers_two_questions_pause_the_run_as_one_group_of_cards(
    lab: Lab, bank: Bank, server_stores: Stores
) -> None:
    # When process A runs the turn until the bank asks, and exits
    lab.run("pause", "A", "--prompt", "please transfer the money", *AGENT)

    # Then the run paused on one card per question, each with the bank's own schema
    request = pointer(server_stores, lab.chat)
    cards = {a.card["input_key"]: a.card for a in request.asked}
    assert set(cards) == {"confirm", "reference"}
    confirm = cards["confirm"]
    assert (confirm["source"], confirm["tool"], confirm["reason"]) == (
        "mcp",
        "transfer_funds",
        "Send 120.00 EUR to Ada Lovelace?",
    )
    assert confirm["schema"]["properties"]["ok"]["type"] == "boolean"
    assert confirm["summary"] == {"amount": 120.0, "payee": "Ada Lovelace"}
    assert cards["reference"]["schema"]["properties"]["reference"]["maxLength"] == 35
    # And the server was called once, and asked; nothing moved
    assert (len(bank.rounds(1)), bank.rounds(2), bank.transfers()) == (1, [], [])


def test_a_fresh_process_answers_and_the_server_sees_one_retry_with_the_original_state(
    lab: Lab, bank: Bank, server_stores: Stores
) -> None:
    # Given A paused on the bank's questions and exited
    lab.run("pause", "A", "--prompt", "please transfer the money", *AGENT)

    # When a fresh B answers both, then answers again
    b = lab.resume("B", *AGENT, "--payloads", json.dumps(PAYLOADS))

    # Then the transfer was made once, by one retry carrying the first round's state
    first, again = b["first"], b["again"]
    assert first["outcome"] == "completed" and SENT in first["text"], first
    assert (again["outcome"], again["text"]) == ("replayed", first["text"])
    (asked,), (retried,) = bank.rounds(1), bank.rounds(2)
    assert retried["state_id"] == asked["state_id"]
    assert retried["answers"]["confirm"]["action"] == "accept"
    assert retried["answers"]["reference"]["content"] == {"reference": "INV-7"}
    assert bank.transfers() == [{"amount": 120.0, "payee": "Ada Lovelace", "reference": "INV-7"}]
    assert pointer(server_stores, lab.chat).state is RequestState.DONE


def test_a_cancelled_card_reaches_the_server_as_a_decline_and_nothing_moves(
    lab: Lab, bank: Bank
) -> None:
    lab.run("pause", "A", "--prompt", "please transfer the money", *AGENT)
    offer = json.loads((lab.work / "offer.json").read_text())

    b = lab.resume("B", *AGENT, "--payloads", json.dumps(PAYLOADS), "--cancel", "*")

    assert "No transfer made: the account holder chose decline." in b["first"]["text"]
    (retried,) = bank.rounds(2)
    assert {k: v["action"] for k, v in retried["answers"].items()} == {
        "confirm": "decline",
        "reference": "decline",
    }
    assert bank.transfers() == [] and len(offer["asked"]) == 2


@dataclass(frozen=True)
class Window:
    """Where the first resuming worker dies, and what its successor and the bank show."""

    hang: str
    says: str
    retries: int


WINDOWS = [
    # After the claim, before the retry is reserved: the successor sends the one retry.
    Window("claimed", SENT, 1),
    # Reserved, nothing sent yet: the successor cannot know that, so it does not send.
    Window("mcp-reserved", NOT_TWICE, 0),
    # The bank acted and replied; the reply died with the worker: not sent again.
    Window("mcp-unrecorded", NOT_TWICE, 1),
    # The reply was recorded, the journal not yet: the successor uses the recorded reply.
    Window("mcp-recorded", SENT, 1),
]


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: w.hang)
def test_a_worker_killed_in_the_retry_is_taken_over_without_a_second_retry(
    lab: Lab, bank: Bank, server_stores: Stores, window: Window
) -> None:
    # Given A paused, and B claimed the answer and stopped dead at this point of the retry
    lab.run("pause", "A", "--prompt", "please transfer the money", *AGENT, *CRASH_LEASE)
    given = ("--payloads", json.dumps(PAYLOADS))
    b = lab.start("resume", "B", *AGENT, *given, "--hang", window.hang, *CRASH_LEASE)
    lab.wait_until_hung(b, "B")

    # When B is killed, its lease lapses, and a fresh C answers the same way
    b.kill()
    b.wait(timeout=TIMEOUT_S)
    wait_for_lapse(server_stores, lab.chat)
    c = lab.resume("C", *AGENT, *given, *CRASH_LEASE)

    # Then C finished on a second claim, saying what really happened at the bank
    first, again = c["first"], c["again"]
    assert first["outcome"] == "completed" and window.says in first["text"], first
    assert (again["outcome"], again["text"]) == ("replayed", first["text"])
    request = pointer(server_stores, lab.chat)
    assert (request.state, request.claim_count) == (RequestState.DONE, 2)
    # And the bank was asked once, and retried at most once: never twice
    assert len(bank.rounds(1)) == 1
    assert len(bank.rounds(2)) == window.retries
    assert len(bank.transfers()) == window.retries


@pytest.fixture(scope="module")
def served_bank(
    emulator: Emulator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalServer, Bank]]:
    """The local API serving the payments agent, over a bank of its own."""
    work = tmp_path_factory.mktemp("mcp-served")
    child, url = serve_bank(work / "ledger.jsonl", work / "bank.log")
    aws = fresh_storage(emulator.endpoint, "interlock-mcp")
    env = {"INTERLOCK_AGENT": "examples.mcp:build", "BANK_MCP_URL": url}
    try:
        with local_server(aws, work / "server.log", env) as running:
            yield running, Bank(url, work / "ledger.jsonl")
    finally:
        child.kill()
        child.wait(timeout=TIMEOUT_S)


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_an_unmodified_ag_ui_client_answers_the_banks_questions_from_their_schemas(
    served_bank: tuple[LocalServer, Bank], driver: str
) -> None:
    server, bank = served_bank
    client = StockClient(server, f"payer-{driver}", driver=driver)
    reference = f"R-{driver}"
    try:
        # The run pauses: the client holds two interrupts, each with the bank's schema
        paused = client.send("run please transfer the money")
        assert paused["error"] is None, paused
        assert len(paused["pending"]) == 2
        answers = {
            card["id"]: {"ok": True}
            if "ok" in card["schema"]["properties"]
            else {"reference": reference}
            for card in paused["pending"]
        }

        # Answered from what each schema asks, in one resume
        done = client.send("answer " + json.dumps(answers))
    finally:
        client.close()

    assert done["error"] is None and done["runError"] is None and done["pending"] == [], done
    assert f"Sent 120.00 EUR to Ada Lovelace (reference {reference})." in (done["lastText"] or "")
    # One retry for this client's transfer, with its first round's state
    retried = [
        r
        for r in bank.rounds(2)
        if r["answers"]["reference"]["content"] == {"reference": reference}
    ]
    states = {r["state_id"] for r in bank.rounds(1)}
    assert len(retried) == 1 and retried[0]["state_id"] in states


@pytest.mark.parametrize("same_key", [True, False], ids=["same-key", "new-key"])
def test_a_bank_restarted_while_the_person_thinks_takes_the_answer_only_with_its_key(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_key: bool
) -> None:
    # Given the bank asked, the run paused, and the bank then restarted on the same port
    ledger = tmp_path / "ledger.jsonl"
    first, url = serve_bank(ledger, tmp_path / "bank-1.log", key="1" * 64)
    monkeypatch.setenv("BANK_MCP_URL", url)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    try:
        lab.run("pause", "A", "--prompt", "please transfer the money", *AGENT)
    finally:
        first.kill()
        first.wait(timeout=TIMEOUT_S)
    key = "1" * 64 if same_key else "2" * 64
    again, _ = serve_bank(ledger, tmp_path / "bank-2.log", port=port, key=key)
    try:
        # When a fresh B answers
        b = lab.resume("B", *AGENT, "--payloads", json.dumps(PAYLOADS))
    finally:
        again.kill()
        again.wait(timeout=TIMEOUT_S)

    bank = Bank(url, ledger)
    text = b["first"]["text"]
    if same_key:
        # Then the state sealed before the restart still opens: one retry, money sent
        assert SENT in text and len(bank.rounds(2)) == 1 and len(bank.transfers()) == 1
    else:
        # Then the bank refuses the state before its tool runs, and the person is told
        # nothing was done; the retry is not made again
        assert "no longer accepts this answer" in text and "Nothing was done" in text, text
        assert (bank.rounds(2), bank.transfers()) == ([], [])
    assert b["again"]["outcome"] == "replayed"


def test_over_stdio_the_same_tools_pause_and_retry_once(
    server_stores: Stores, tmp_path: Path
) -> None:
    """The transport is the client's: a bank started by the client on stdio behaves
    exactly as one over streamable HTTP."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client
    from strands.tools.mcp import MCPClient

    from examples.mcp import SCENARIOS
    from interlock.agent import AgentInputs, AgentSpec, durable_mcp_tools
    from interlock.answers import Reply
    from interlock.config import InterlockConfig
    from interlock.harness.model import ScriptedModel
    from interlock.resume import resume_replies
    from interlock.turns import Caller, Runtime, run_turn

    ledger = tmp_path / "ledger.jsonl"
    server = StdioServerParameters(
        command=sys.executable,
        args=[str(ROOT / "examples" / "mcp" / "server.py"), "--stdio", "--ledger", str(ledger)],
    )
    client = MCPClient(lambda: stdio_client(server))
    try:
        tools = durable_mcp_tools(client)

        def build(inputs: AgentInputs) -> AgentSpec:
            return AgentSpec(tools=tools, model=ScriptedModel(SCENARIOS))

        rt = Runtime(
            server_stores,
            lambda: pytest.fail("the agent plays its own script"),
            agent=build,
            config=InterlockConfig(model="scripted"),
        )
        holder = Caller("stdio-holder")
        paused = run_turn(rt, holder, "stdio-chat", "please transfer the money")
        assert paused.offer is not None
        answers = {"confirm": {"ok": True}, "reference": {"reference": "INV-7"}}
        replies = [
            Reply(a.interrupt_id, "resolved", answers[a.card["input_key"]])
            for a in paused.offer.request.asked
        ]
        done = resume_replies(rt, holder, "stdio-chat", secret=paused.offer.secret, replies=replies)
    finally:
        client.stop(None, None, None)

    assert SENT in done.text
    bank = Bank("stdio", ledger)
    (asked,), (retried,) = bank.rounds(1), bank.rounds(2)
    assert retried["state_id"] == asked["state_id"] and len(bank.transfers()) == 1
