"""A small bank's MCP server whose `transfer_funds` needs a person.

It follows the MCP revision of 2026-07-28: the first `tools/call` answers
`input_required` with its questions (confirm the amount and the payee; a reference when
none was given) and an opaque `requestState`, and the client retries the same call with
the answers and that state. The server keeps nothing between the two rounds: what it
must remember travels in the state, which `MCPServer` seals (AES-GCM, bound to the tool
and its arguments, ten minutes) with the key it is given.

Every call is appended to a ledger (JSON lines), so a test or a person can count what
the server was asked, and every transfer it made::

    .venv/bin/python examples/mcp/server.py --port 8765 --ledger bank-ledger.jsonl

With `--stdio` it serves one client on its standard input and output instead, as an
MCP client starts a local server.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any, Final

from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
)

HOST: Final = "127.0.0.1"
# The sealing key: fixed by the caller so a restarted server still accepts the state it
# issued before (an ephemeral key would refuse it, as a real deployment's rotation does).
KEY_VARIABLE: Final = "BANK_STATE_KEY"
DEMO_KEY: Final = "interlock-example-bank-state-key-0001"
NOTHING_MOVED: Final = "No money moved."
DECLINED: Final = "The transfer was declined and no money moved."
_lock = threading.Lock()


def bank(ledger: Path, key: str = DEMO_KEY, *, quiet: bool = False) -> MCPServer:
    """The server, writing every call it serves to `ledger`; `quiet` keeps its request
    log out of a process it shares (MCPServer sets up the process's logging)."""
    server = MCPServer(
        "bank",
        request_state_security=RequestStateSecurity(keys=[key]),
        log_level="WARNING" if quiet else "INFO",
    )

    def record(entry: dict[str, Any]) -> None:
        with _lock, ledger.open("a") as out:
            out.write(json.dumps(entry, sort_keys=True) + "\n")

    @server.tool()
    async def transfer_funds(
        amount: float, payee: str, ctx: Context, reference: str = ""
    ) -> str | InputRequiredResult:
        """Send money to a payee. The account holder confirms every transfer.

        Args:
            amount: How much to send, in euros.
            payee: Who receives it.
            reference: The payment reference; the holder is asked when it is missing.
        """
        answers = ctx.input_responses
        # The client's key for this round (Interlock sends one; see the README): kept in
        # the ledger so a call can be told from a repeat of it.
        key = (ctx.request_context.meta or {}).get("interlock/idempotency-key")
        if answers is None:
            state = {"amount": amount, "payee": payee, "id": uuid.uuid4().hex}
            record(
                {"round": 1, "key": key, "state_id": state["id"], "amount": amount, "payee": payee}
            )
            return _questions(state, reference)
        opened = json.loads(ctx.request_state or "{}")
        replies = {k: v for k, v in answers.items() if isinstance(v, ElicitResult)}
        record(
            {
                "round": 2,
                "key": key,
                "state_id": opened.get("id"),
                "answers": {k: v.model_dump(mode="json") for k, v in replies.items()},
            }
        )
        refused = _not_confirmed(replies.get("confirm"))
        if refused is not None:
            return refused
        given = replies.get("reference")
        if not reference:
            if given is None or given.action != "accept":
                return f"No transfer made: no reference was given. {NOTHING_MOVED}"
            reference = str(_field(given, "reference"))
        record({"key": key, "transfer": {"amount": amount, "payee": payee, "reference": reference}})
        return f"Sent {amount:.2f} EUR to {payee} (reference {reference})."

    return server


def _questions(state: dict[str, Any], reference: str) -> InputRequiredResult:
    amount, payee = state["amount"], state["payee"]
    asks: dict[str, InputRequest] = {
        "confirm": _form(
            f"Send {amount:.2f} EUR to {payee}?",
            {"ok": {"type": "boolean", "title": f"Yes, send {amount:.2f} EUR to {payee}"}},
            ["ok"],
        )
    }
    if not reference:
        asks["reference"] = _form(
            "Which payment reference should the transfer carry?",
            {"reference": {"type": "string", "title": "Reference", "maxLength": 35}},
            ["reference"],
        )
    # What the retry must know travels in the state; the server seals it.
    return InputRequiredResult(input_requests=asks, request_state=json.dumps(state))


def _not_confirmed(confirm: ElicitResult | None) -> str | None:
    """Why no money moves, in the words the tool returns; None when the holder confirmed.

    Only an `accept` whose `ok` is exactly true confirms: a decline is reported as a
    decline, and an accept whose box was left unticked says no, so it is never told as
    the holder having accepted.
    """
    if confirm is None:
        return f"No transfer made: the confirmation was not answered. {NOTHING_MOVED}"
    if confirm.action == "decline":
        return f"No transfer made: the account holder chose decline. {DECLINED}"
    if confirm.action == "cancel":
        return (
            "No transfer made: the account holder dismissed the question without choosing "
            f"(cancel). {NOTHING_MOVED}"
        )
    if _field(confirm, "ok") is not True:
        return f"No transfer made: the account holder did not confirm it. {DECLINED}"
    return None


def _field(reply: ElicitResult, name: str) -> Any:
    content = reply.content
    return content.get(name) if isinstance(content, dict) else None


def _form(message: str, properties: dict[str, Any], required: list[str]) -> ElicitRequest:
    schema = {"type": "object", "properties": properties, "required": required}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--ledger", type=Path, default=Path("bank-ledger.jsonl"))
    parser.add_argument("--stdio", action="store_true", help="serve on stdin/stdout instead")
    args = parser.parse_args()
    key = os.environ.get(KEY_VARIABLE, DEMO_KEY)
    if args.stdio:
        bank(args.ledger, key, quiet=True).run("stdio")
    else:
        bank(args.ledger, key).run("streamable-http", host=HOST, port=args.port)


if __name__ == "__main__":
    main()
