"""Long runs through the local API: what a resumed run's steps and a chat's earlier turns
cost, as they grow. Prints JSON.

The agent is `bench/long_agent.py` (a user's agent with a scripted stand-in model): a
person says yes, then the model takes N steps, each calling a tool. Every figure is
counted at the emulator (`bench.peers.metering`): calls, and DynamoDB request units from
item sizes, index writes included.

- `steps`: one approval whose resumed run takes 1, 2, 5, 19 or 20 steps, every tool
  result 30 KB (the heaviest case for a journal). The marginal WRU of step n is
  W(n) - W(n-1); the target is the marginal at 20 within 1.2x of the marginal at 2.
- `earlier_turns`: the same approval (5 small steps) after 1, 10 or 50 earlier turns.
- `realistic`: 10 earlier turns, then 20 steps of which five return 30 KB; its cost per
  approval (`bench.peers.cost`) with and without Lambda compute, beside the peer's on the
  same content (`bench/peers/langgraph_long.py`: measured when the peer's requirements
  are installed, else its recorded figures).
- `history`: the read that hands the model its window (`bench/history_read.py`).
- `targets`: each with its figure, met or not.

    .venv/bin/python bench/long_run.py
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from bench import history_read  # noqa: E402
from bench.long_agent import ALL_BIG, REALISTIC, prompt  # noqa: E402
from bench.peers import langgraph_long  # noqa: E402
from bench.peers.cost import LAMBDA_ARM64_GB_S_USD, approval_cost  # noqa: E402
from bench.peers.langgraph_cycle import peer  # noqa: E402
from bench.peers.metering import metered  # noqa: E402
from local import devtokens  # noqa: E402
from local.emulator import Emulator  # noqa: E402

AGENT: Final = "bench.long_agent:build"
MARGINAL_TARGET: Final = 1.2
HISTORY_TARGET: Final = 1.2
DEMO_COST_TARGET: Final = 1.0
REALISTIC_COST_TARGET: Final = 0.4
# Lambda compute, stated: the run and resume functions' memory (infra.functions.SIZING),
# arm64, and a model that takes this long per call (the functions wait on it).
FUNCTION_GB: Final = 1.0
MODEL_WAIT_S: Final = 1.5
HANDLER_S: Final = 0.3  # per invocation, besides the model: imports are warm


def main() -> None:
    emulator = Emulator().start()
    try:
        print(json.dumps(measure(emulator), indent=2))
    finally:
        emulator.stop()


def measure(emulator: Emulator) -> dict[str, Any]:
    """Every curve and target, on one emulator."""
    saved = dict(os.environ)
    # The peer meters its own run: before ours, not inside our meter.
    long_peer, long_source = langgraph_long.peer(emulator)
    try:
        with metered(emulator):
            return _measure(emulator, long_peer, long_source)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _measure(emulator: Emulator, long_peer: dict[str, Any], long_source: str) -> dict[str, Any]:
    demo_peer, peer_source = peer(None)
    demo_cost = _demo_cost(emulator, demo_peer)  # first: the demo agent, its own settings
    server, token = serve(emulator)
    url = f"http://127.0.0.1:{server.port}"
    try:
        steps = {
            n: approval(emulator, url, token, f"steps-{n}", 0, n, big) for n, big in ALL_BIG.items()
        }
        earlier = {t: approval(emulator, url, token, f"turns-{t}", t, 5) for t in (1, 10, 50)}
        realistic = approval(emulator, url, token, "realistic", 10, 20, REALISTIC)
    finally:
        server.shutdown()
    history = [history_read.measure(emulator, rows) for rows in (10, 1100)]
    marginal = {n: wru(steps[n]) - wru(steps[n - 1]) for n in (2, 20)}
    realistic_cost = compared(realistic, long_peer, model_calls=2 + 20)
    history_per_turn = [h["rru_per_turn_given"] for h in history]
    return {
        "steps": {n: _summary(steps[n]) for n in steps},
        "marginal_wru_per_step": marginal,
        "earlier_turns": {t: _summary(earlier[t]) for t in earlier},
        "realistic": {**_summary(realistic), "peer": _summary(long_peer), "cost": realistic_cost},
        "demo": demo_cost,
        "history": history,
        "compute_assumptions": {
            "memory_gb": FUNCTION_GB,
            "architecture": "arm64",
            "model_wait_s_per_call": MODEL_WAIT_S,
            "handler_s_per_invocation": HANDLER_S,
            "price_per_gb_s": LAMBDA_ARM64_GB_S_USD,
        },
        "peer_source": {"demo": peer_source, "realistic": long_source},
        "targets": {
            "marginal_wru_ratio_20_to_2": round(marginal[20] / marginal[2], 3),
            "marginal_met": marginal[20] <= MARGINAL_TARGET * marginal[2],
            "history_rru_ratio_1100_to_10": round(history_per_turn[-1] / history_per_turn[0], 3),
            "history_met": history_per_turn[-1] <= HISTORY_TARGET * history_per_turn[0],
            "history_latest_turns": all(h["newest_given_is_latest"] for h in history),
            "demo_cost_ratio_to_peer": demo_cost["ratio_to_peer"],
            "demo_cost_met": demo_cost["ratio_to_peer"] <= DEMO_COST_TARGET,
            "realistic_cost_ratio_to_peer": realistic_cost["ratio_to_peer"],
            "realistic_cost_met": realistic_cost["ratio_to_peer"] <= REALISTIC_COST_TARGET,
        },
    }


def serve(emulator: Emulator) -> tuple[Any, str]:
    """The local API serving the long-run agent on a fresh table; the server and a token.
    Sets local mode's environment: callers restore it (`measure` does)."""
    from werkzeug.serving import make_server

    from local.server import LocalApi, configure, create_storage_if_missing

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    table = f"long-{secrets.token_hex(4)}"
    # 22 model calls in one resumed invocation: over the default cap of 12.
    os.environ.update(INTERLOCK_MAX_MODEL_CALLS="30")
    configure(emulator.endpoint, table, f"{table}-data", AGENT)
    create_storage_if_missing(table, f"{table}-data")
    key = secrets.token_bytes(32)
    server = make_server("127.0.0.1", 0, LocalApi(key), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, devtokens.issue(key, "alice", ["reporter"])


def approval(
    emulator: Emulator,
    url: str,
    token: str,
    chat: str,
    earlier: int,
    steps: int,
    big: tuple[int, ...] = (),
) -> dict[str, Any]:
    """`earlier` chat turns, then one pause and its resume that takes `steps` steps (those
    in `big` returning 30 KB): the traffic of each phase, request units included."""
    for turn in range(earlier):
        _post(url, token, _run_body(chat, f"e{turn}", "How are the figures?"))
    emulator.traffic.take()
    events = _post(url, token, _run_body(chat, "p", prompt(steps, big)))
    pause = emulator.traffic.take()
    interrupt = events[-1]["outcome"]["interrupts"][0]
    events = _post(url, token, _resume_body(chat, interrupt))
    resume = emulator.traffic.take()
    outcome = events[-1].get("result", {}).get("outcome")
    assert outcome == "completed", events[-3:]
    return {"pause": pause, "resume": resume}


def _run_body(chat: str, run: str, text: str) -> dict[str, Any]:
    message = {"id": f"{chat}-{run}", "role": "user", "content": text}
    return {"threadId": chat, "runId": run, "messages": [message]}


def _resume_body(chat: str, interrupt: dict[str, Any]) -> dict[str, Any]:
    return {
        "threadId": chat,
        "runId": "answer",
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


def _post(url: str, token: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    path = "/resume" if "resume" in body else "/runs"
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        text = response.read().decode()
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def _units(traffic: dict[str, Any], kind: str) -> float:
    return sum(u.get(kind, 0) for u in traffic.get("capacity_units", {}).values())


def wru(case: dict[str, Any]) -> float:
    """The WRUs of one approval, index writes included."""
    return sum(_units(case[p], "wru") + _units(case[p], "index_wru") for p in ("pause", "resume"))


def _summary(case: dict[str, Any]) -> dict[str, Any]:
    return {
        phase: {
            "calls": case[phase]["total_calls"],
            "wru": _units(case[phase], "wru") + _units(case[phase], "index_wru"),
            "index_wru": _units(case[phase], "index_wru"),
            "rru": _units(case[phase], "rru"),
        }
        for phase in ("pause", "resume")
    }


def _cost(case: dict[str, Any], model_calls: int) -> dict[str, Any]:
    """Storage and request cost per approval, and the all-in figure with compute."""
    priced = approval_cost(case["pause"], case["resume"])
    compute_s = model_calls * MODEL_WAIT_S + 2 * HANDLER_S
    compute = compute_s * FUNCTION_GB * LAMBDA_ARM64_GB_S_USD
    return {
        "usd_per_million_approvals": priced["usd_per_million_approvals"],
        "usd": priced["usd"],
        "compute_usd_per_million": round(compute * 1_000_000, 2),
        "all_in_usd_per_million": round(priced["usd_per_million_approvals"] + compute * 1e6, 2),
    }


def _demo_cost(emulator: Emulator, peer_figures: dict[str, Any]) -> dict[str, Any]:
    """The demo approval on both sides (four model calls each), priced the same way."""
    from bench.api_cycle import cycle

    return compared(cycle(emulator), peer_figures, model_calls=4)


def compared(ours: dict[str, Any], theirs: dict[str, Any], model_calls: int) -> dict[str, Any]:
    """Both sides of one case priced the same way (each makes `model_calls`), and the
    ratios of storage and request cost and of the all-in figure."""
    mine, peer_cost = _cost(ours, model_calls), _cost(theirs, model_calls)
    return {
        "interlock": mine,
        "peer": peer_cost,
        "ratio_to_peer": round(
            mine["usd_per_million_approvals"] / peer_cost["usd_per_million_approvals"], 3
        ),
        "all_in_ratio_to_peer": round(
            mine["all_in_usd_per_million"] / peer_cost["all_in_usd_per_million"], 3
        ),
    }


if __name__ == "__main__":
    main()
