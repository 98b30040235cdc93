"""A payments agent whose MCP tool server asks the account holder before money moves.

The bank's `transfer_funds` (`examples/mcp/server.py`) answers its first call with
questions: confirm the amount and the payee, and give a reference when none was named.
Interlock turns them into cards (one group, answered in one resume), and the answer
retries the same call exactly once, in whatever process picks it up.

Serve it with `./dev serve --agent examples.mcp:build`. With `BANK_MCP_URL` unset, the
bank is started inside the server process on a free port (its ledger in
`.interlock/bank-ledger.jsonl`); set it to use a bank served on its own
(`.venv/bin/python examples/mcp/server.py`). The scripted stand-in plays where no LLM is
reachable; set `INTERLOCK_MODEL` for a real model.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Final

from strands.tools.mcp import MCPClient

from interlock.agent import AgentInputs, AgentSpec, Block, Scenario, durable_mcp_tools

URL_VARIABLE: Final = "BANK_MCP_URL"
SYSTEM_PROMPT: Final = (
    "You move money for the account holder with the bank's tools. The bank asks the "
    "holder to confirm every transfer; report exactly what the bank said."
)
PAYEE: Final = "Ada Lovelace"
REFERENCE: Final = "INV-1"


def _transfer(results: list[str]) -> list[Block]:
    return [
        {"text": f"I will ask the bank to send 120.00 EUR to {PAYEE}."},
        {"tool": "transfer_funds", "input": {"amount": 120.0, "payee": PAYEE}},
    ]


def _transfer_with_reference(results: list[str]) -> list[Block]:
    return [
        {
            "tool": "transfer_funds",
            "input": {"amount": 80.0, "payee": PAYEE, "reference": REFERENCE},
        }
    ]


def _report(results: list[str]) -> list[Block]:
    return [{"text": "The bank says: " + " ".join(results)}]


SCENARIOS: Final = (
    Scenario("transfer", [_transfer, _report], keywords=("transfer", "pay")),
    # A reference named in the prompt: the bank asks only to confirm (one card).
    Scenario("referenced", [_transfer_with_reference, _report], keywords=("reference",)),
)
# Per process and bank: a forked worker connects anew, and so does a process whose
# bank moved (tests start one per case).
_tools: dict[tuple[int, str], list[Any]] = {}
_lock = threading.Lock()


def build(inputs: AgentInputs) -> AgentSpec:
    """The payments agent: the bank's tools, each asking through durable cards."""
    return AgentSpec(
        tools=bank_tools(),
        system_prompt=SYSTEM_PROMPT,
        model=inputs.model(scripted=SCENARIOS),
    )


def bank_tools() -> list[Any]:
    """The bank's tools over one MCP client per process, connected on first use."""
    with _lock:
        url = os.environ.get(URL_VARIABLE) or _bank_in_process()
        if (os.getpid(), url) not in _tools:
            _tools[(os.getpid(), url)] = durable_mcp_tools(MCPClient(url=url))
        return _tools[(os.getpid(), url)]


def disconnect(url: str) -> None:
    """Close this process's connection to the bank at `url` (before that bank stops)."""
    with _lock:
        tools = _tools.pop((os.getpid(), url), [])
    for client in {id(t.client): t.client for t in tools}.values():
        client.stop(None, None, None)


def _bank_in_process() -> str:
    """Serve the example bank on a free loopback port in this process; its URL."""
    from examples.mcp.server import HOST, bank

    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]
    ledger = Path(".interlock") / "bank-ledger.jsonl"
    ledger.parent.mkdir(exist_ok=True)
    server = bank(ledger, quiet=True)
    threading.Thread(
        target=lambda: server.run("streamable-http", host=HOST, port=port), daemon=True
    ).start()
    for _ in range(100):
        with socket.socket() as client:
            if client.connect_ex((HOST, port)) == 0:
                break
        time.sleep(0.05)
    url = f"http://{HOST}:{port}/mcp"
    os.environ[URL_VARIABLE] = url
    return url
