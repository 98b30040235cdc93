"""One half of a paused turn, run as its own interpreter by the end-to-end tests.

    half.py pause  --name A ...   run the turn until it pauses; write offer.json
    half.py resume --name B ...   answer offer.json (every interrupt of it), then again

`--agent package.module:factory` (with `--path` to find it) runs a user's agent
through the public surface instead of the demo analyst; `--payloads` maps an
interrupt's name to the payload that answers it (`*` for any other).

Each process holds nothing but the store: a fresh interpreter, fresh clients and a new
Runtime. What the tests need to see is written to the work dir as JSON, plus
`fetch.log` (one line per call of the fetch transport) and `<name>.hung` when the
process was told to stop dead at a point of no return (`--hang outbox|fetch|claimed`,
or one of an MCP retry's: `mcp-reserved`, `mcp-unrecorded`, `mcp-recorded`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

# pytest's pythonpath does not reach a child interpreter: put the layer and the repo
# root on the path ourselves, relative to this file.
ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

import boto3  # noqa: E402

from examples.analyst.script import DEMO_SCENARIOS  # noqa: E402
from interlock.adapters.factory import Stores, build_stores  # noqa: E402
from interlock.agent import load_factory  # noqa: E402
from interlock.answers import Reply  # noqa: E402
from interlock.config import InterlockConfig  # noqa: E402
from interlock.deps import default_agent  # noqa: E402
from interlock.harness.model import ScriptedModel  # noqa: E402
from interlock.outcomes import TurnResult  # noqa: E402
from interlock.resume import resume_replies  # noqa: E402
from interlock.timing import StorePolicy  # noqa: E402
from interlock.turns import Caller, Runtime, TurnLimits, run_turn  # noqa: E402

REGION = "us-east-1"
USER = Caller("alice", frozenset({"reporter"}))
TABLE_CSV = "a,b\n1,2"
OFFER = "offer.json"
FETCH_LOG = "fetch.log"
APPROVE = {"decision": "approve"}
MCP_HANGS = ("mcp-reserved", "mcp-unrecorded", "mcp-recorded")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    work = Path(args.work)
    _fake_aws(args.endpoint)
    models: list[ScriptedModel] = []
    user = Caller(USER.user_id, frozenset(args.roles.split(","))) if args.roles else USER
    if args.path:
        sys.path.insert(0, args.path)
    rt = Runtime(
        _stores(args, work),
        lambda: _remember(models, ScriptedModel(DEMO_SCENARIOS)),
        fetch=Transport(work, args.name, hang=args.hang == "fetch"),
        limits=TurnLimits(heartbeat_s=args.heartbeat_s),
        worker_id=args.name,
        # A user's agent plays its own script: the deployment is in scripted mode.
        agent=load_factory(args.agent) if args.agent else default_agent(),
        config=InterlockConfig(model="scripted") if args.agent else InterlockConfig(),
    )
    if args.role == "pause":
        _write(work / OFFER, _pause(rt, user, args.chat, args.prompt, models))
    else:
        offer = json.loads((work / OFFER).read_text())
        payloads = json.loads(args.payloads)
        cancel = frozenset(args.cancel.split(",")) if args.cancel else frozenset()
        summary = _resume(rt, user, args.chat, offer, payloads, models, cancel)
        _write(work / f"{args.name}.json", summary)
    return 0


def _pause(
    rt: Runtime, user: Caller, chat: str, prompt: str, models: list[ScriptedModel]
) -> dict[str, Any]:
    result = run_turn(rt, user, chat, prompt)
    assert result.offer is not None, f"the turn did not pause: {result}"
    request = result.offer.request
    return {
        "outcome": result.outcome,
        "interrupt_id": request.interrupt_id,
        "asked": {a.interrupt_id: a.card["interrupt_name"] for a in request.asked},
        "secret": result.offer.secret,
        "model_calls": sum(m.calls for m in models),
    }


def _resume(
    rt: Runtime,
    user: Caller,
    chat: str,
    offer: dict[str, Any],
    payloads: dict[str, Any],
    models: list[ScriptedModel],
    cancel: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    replies = [
        Reply(interrupt_id, "cancelled")
        if name in cancel or "*" in cancel
        else Reply(interrupt_id, "resolved", payloads.get(name, payloads["*"]))
        for interrupt_id, name in offer["asked"].items()
    ]

    def answer() -> TurnResult:
        return resume_replies(rt, user, chat, secret=offer["secret"], replies=replies)

    first = answer()
    model_calls, built = sum(m.calls for m in models), len(models)
    again = answer()
    return {
        "first": _summary(first),
        "again": _summary(again),
        "model_calls": model_calls,
        "models_built_by_replay": len(models) - built,
    }


class Transport:
    """The fetch transport: logs each call; with `hang`, stops dead after logging."""

    def __init__(self, work: Path, name: str, *, hang: bool) -> None:
        self._work = work
        self._name = name
        self._hang = hang

    def __call__(self, url: str) -> str:
        with (self._work / FETCH_LOG).open("a") as log:
            log.write(f"{self._name} {url}\n")
        if self._hang:
            hang(self._work, self._name)
        return TABLE_CSV


class HangAfterWrite:
    """An outbox that writes for real, then stops dead: a crash after the side effect."""

    def __init__(self, inner: Any, work: Path, name: str) -> None:
        self._inner = inner
        self._work = work
        self._name = name

    def put_once(self, key: str, payload: dict[str, Any], now_ms: int, fence: Any = None) -> bool:
        self._inner.put_once(key, payload, now_ms, fence=fence)
        hang(self._work, self._name)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._inner.get(key)  # type: ignore[no-any-return]


class HangAroundMcpRetry:
    """An outbox that stops dead at one point of an MCP retry (`harness/mcp.py`):
    `mcp-reserved` once the retry's reservation landed (nothing sent yet),
    `mcp-unrecorded` once the server's reply arrived, before it is recorded, and
    `mcp-recorded` once it is recorded, before the journal records the result."""

    def __init__(self, inner: Any, work: Path, name: str, when: str) -> None:
        self._inner = inner
        self._work = work
        self._name = name
        self._when = when

    def put_once(self, key: str, payload: dict[str, Any], now_ms: int, fence: Any = None) -> bool:
        reply = key.startswith("mcp/") and key.endswith("/reply")
        if reply and self._when == "mcp-unrecorded":
            hang(self._work, self._name)
        written: bool = self._inner.put_once(key, payload, now_ms, fence=fence)
        reservation = key.startswith("mcp/") and not reply
        if (reservation and self._when == "mcp-reserved") or (
            reply and self._when == "mcp-recorded"
        ):
            hang(self._work, self._name)
        return written

    def get(self, key: str) -> dict[str, Any] | None:
        return self._inner.get(key)  # type: ignore[no-any-return]


class HangAfterClaim:
    """A request store that claims for real, then stops dead: a crash right after the
    claim recorded the answer, before anything was acted on."""

    def __init__(self, inner: Any, work: Path, name: str) -> None:
        self._inner = inner
        self._work = work
        self._name = name

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        self._inner.claim(*args, **kwargs)
        hang(self._work, self._name)

    def claim_with(self, *args: Any, **kwargs: Any) -> Any:
        self._inner.claim_with(*args, **kwargs)
        hang(self._work, self._name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def hang(work: Path, name: str) -> NoReturn:
    """Tell the test we are at the point of no return, then wait to be killed."""
    (work / f"{name}.hung").touch()
    while True:
        time.sleep(1)


def _stores(args: argparse.Namespace, work: Path) -> Stores:
    session = boto3.session.Session(region_name=REGION)
    dynamodb, s3 = (session.client(n, endpoint_url=args.endpoint) for n in ("dynamodb", "s3"))
    stores = build_stores(
        dynamodb, s3, args.table, args.bucket, StorePolicy(lease_ms=args.lease_ms)
    )
    if args.hang == "outbox":
        return dataclasses.replace(stores, outbox=HangAfterWrite(stores.outbox, work, args.name))
    if args.hang in MCP_HANGS:
        outbox = HangAroundMcpRetry(stores.outbox, work, args.name, args.hang)
        return dataclasses.replace(stores, outbox=outbox)
    if args.hang == "claimed":
        requests = HangAfterClaim(stores.requests, work, args.name)
        return dataclasses.replace(stores, requests=requests)
    return stores


def _fake_aws(endpoint: str) -> None:
    # Never reach a real account, whatever the parent's environment holds.
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_SESSION_TOKEN="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_ENDPOINT_URL=endpoint,
    )
    os.environ.pop("AWS_PROFILE", None)


def _remember(models: list[ScriptedModel], model: ScriptedModel) -> ScriptedModel:
    models.append(model)
    return model


def _summary(result: TurnResult) -> dict[str, Any]:
    return {
        "outcome": result.outcome,
        "text": result.text,
        "decision": result.decision,
        "answered_at": result.answered_at,
    }


def _write(path: Path, body: dict[str, Any]) -> None:
    # Written whole, then renamed: a reader never sees half a file.
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(body))
    partial.replace(path)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=("pause", "resume"))
    parser.add_argument("--name", required=True, help="worker id and result file name")
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--work", required=True, help="directory shared with the test")
    parser.add_argument("--chat", required=True)
    parser.add_argument("--prompt", default="")
    parser.add_argument("--lease-ms", type=int, default=StorePolicy().lease_ms)
    parser.add_argument("--heartbeat-s", type=float, default=TurnLimits().heartbeat_s)
    parser.add_argument("--hang", choices=("outbox", "fetch", "claimed", *MCP_HANGS))
    parser.add_argument("--agent", help="a user's agent factory, package.module:factory")
    parser.add_argument("--path", help="a directory to import the agent from")
    parser.add_argument("--payloads", default=json.dumps({"*": APPROVE}))
    parser.add_argument("--roles", help="the caller's roles, comma-separated")
    parser.add_argument("--cancel", help="interrupt names to cancel, comma-separated (* for all)")
    return parser


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
