"""LangGraph + langgraph-checkpoint-aws's DynamoDBSaver against Interlock, on one bench.

The peer (`bench/peers/langgraph_agent.py`) plays Interlock's demo download approval on
the same moto server (`local.emulator.Emulator`): a user asks to download a table, the
download is refused, the agent asks for approval and pauses (`interrupt()`), the saver
persists the paused graph; a `Command(resume=...)` approves, the agent downloads and
answers. Interlock's figures come from `bench/api_cycle.py`'s `cycle` and from
`bench/peers/interlock_race.py`. Printed as JSON, side by side:

- AWS calls, request bytes (sent, and sent by write operations) and DynamoDB capacity
  units per pause and per resume, counted at the moto server;
- model calls and tool bodies entered per phase, and what a resume runs again;
- two resumes of one pause racing (two threads, the same approval): downloads
  performed, and what each racer heard;
- the AWS cost of one approval cycle, excluding the model (`bench/peers/cost.py`).

The peer needs optional requirements (not in requirements-dev.txt):

    .venv/bin/pip install -r requirements-peers.txt
    .venv/bin/python bench/peers/langgraph_cycle.py [--record]

`--record` writes the peer's figures to `bench/peers/langgraph.json`, which
`recorded()` returns where langgraph is not installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from bench.api_cycle import WRITES, cycle  # noqa: E402
from bench.peers import interlock_race  # noqa: E402
from bench.peers.cost import ASSUMPTIONS, PRICES, approval_cost  # noqa: E402
from bench.peers.effects import Downloads  # noqa: E402
from bench.peers.metering import metered  # noqa: E402
from local.emulator import Emulator  # noqa: E402

RECORD = Path(__file__).with_name("langgraph.json")
PROMPT = interlock_race.PROMPT
PACKAGES = ("langgraph", "langgraph-checkpoint-aws", "langchain-core")


def available() -> bool:
    """Whether the optional peer requirements are installed."""
    return all(importlib.util.find_spec(m) for m in ("langgraph", "langgraph_checkpoint_aws"))


def recorded() -> dict[str, Any]:
    """The peer's last recorded figures (`--record`), for machines without langgraph."""
    figures: dict[str, Any] = json.loads(RECORD.read_text())
    return figures


def peer(emulator: Emulator | None = None) -> tuple[dict[str, Any], str]:
    """The peer's figures and where they come from: measured now when langgraph is
    installed and an emulator is given, else the recorded ones."""
    if emulator is not None and available():
        return measure(emulator), "measured"
    figures = recorded()
    return figures, f"recorded {figures['recorded']['on']}"


def measure(emulator: Emulator) -> dict[str, Any]:
    """One pause and one resume of the peer, then a race: calls, bytes, units, reruns."""
    from langchain_core.messages import HumanMessage
    from langgraph.types import Command

    from bench.peers import langgraph_agent as agent
    from interlock.harness.transport import demo_fetch

    new_saver = _storage(emulator)
    pausing, resuming = agent.Tally(Downloads(demo_fetch)), agent.Tally(Downloads(demo_fetch))
    # One process pauses and another resumes, as two Lambda invocations would; each
    # builds its saver first (the saver sets the bucket's lifecycle once per process).
    first = agent.build_graph(pausing, new_saver())
    second = agent.build_graph(resuming, new_saver())
    config = {"configurable": {"thread_id": "bench"}}
    with metered(emulator):
        emulator.traffic.take()
        paused = first.invoke({"messages": [HumanMessage(PROMPT)]}, config)
        pause = emulator.traffic.take()
        done = second.invoke(Command(resume={"decision": "approve"}), config)
        resume = emulator.traffic.take()
    return {
        "pause": {**pause, "bytes_written": written(pause)},
        "resume": {**resume, "bytes_written": written(resume)},
        "paused_on": [i.value["reason"] for i in paused.get("__interrupt__", [])],
        "answer": str(done["messages"][-1].content)[:80],
        "reruns": _reruns(pausing, resuming),
        "race": race(emulator),
    }


def race(emulator: Emulator) -> dict[str, Any]:
    """Two processes resume one paused thread with the same approval at the same moment."""
    from langchain_core.messages import HumanMessage
    from langgraph.types import Command

    from bench.peers import langgraph_agent as agent
    from interlock.harness.transport import demo_fetch

    downloads = Downloads(demo_fetch, racers=2)
    new_saver = _storage(emulator)
    config = {"configurable": {"thread_id": "race"}}
    setup = agent.build_graph(agent.Tally(downloads), new_saver())
    setup.invoke({"messages": [HumanMessage(PROMPT)]}, config)
    graphs = [agent.build_graph(agent.Tally(downloads), new_saver()) for _ in range(2)]
    start, outcomes = threading.Barrier(2), []

    def resume(graph: Any) -> None:
        start.wait()
        try:
            done = graph.invoke(Command(resume={"decision": "approve"}), config)
            outcomes.append("completed" if not done.get("__interrupt__") else "paused")
        except Exception as exc:  # what the racer heard, whatever it was
            outcomes.append(type(exc).__name__)
        downloads.answered()

    threads = [threading.Thread(target=resume, args=(g,)) for g in graphs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    final = setup.get_state(config).values["messages"]
    return {
        "resumes": 2,
        "downloads": downloads.count,
        "outcomes": sorted(outcomes),
        "answers_in_latest_checkpoint": sum(
            1 for m in final if m.type == "ai" and not m.tool_calls
        ),
    }


def _storage(emulator: Emulator) -> Callable[[], Any]:
    """A new table and bucket on the emulator (moto's state lasts the process, so each
    measurement has its own); then one saver per process that uses them."""
    from bench.peers import langgraph_agent as agent

    table = f"peer-{uuid.uuid4().hex[:12]}"
    agent.create_storage(emulator.endpoint, table, f"{table}-data")
    return lambda: agent.saver(emulator.endpoint, table, f"{table}-data")


def _reruns(pausing: Any, resuming: Any) -> dict[str, Any]:
    """Model calls and tool bodies per phase; what the resume entered again."""
    return {
        "pause": pausing.entered(),
        "resume": resuming.entered(),
        "rerun_on_resume": resuming.again(pausing),
    }


def written(traffic: dict[str, Any]) -> int:
    """Request bytes of write operations, as `bench/api_cycle.py` counts them."""
    ops = traffic["bytes_sent"].items()
    return sum(n for op, n in ops if op.split("[")[0].endswith(WRITES))


def interlock(emulator: Emulator) -> dict[str, Any]:
    """Interlock's figures on the same emulator: the API cycle, metered, and its race."""
    with metered(emulator):
        figures = cycle(emulator)
    raced = interlock_race.race(emulator)
    return {
        "pause": figures["pause"],
        "resume": figures["resume"],
        "resume_outcome": figures["resume_outcome"],
        "reruns": raced["reruns"],
        "race": raced["race"],
    }


def compare(interlock_figures: dict[str, Any], peer_figures: dict[str, Any]) -> dict[str, Any]:
    """Side by side: totals per phase, the bytes ratio and the cost of an approval."""
    sides = {"interlock": interlock_figures, "langgraph_dynamodb": peer_figures}
    costs = {name: approval_cost(f["pause"], f["resume"]) for name, f in sides.items()}
    table = {
        name: {
            phase: {
                "calls": f[phase]["total_calls"],
                "bytes_sent": sum(f[phase]["bytes_sent"].values()),
                "bytes_written": f[phase]["bytes_written"],
                "wru": costs[name][phase]["capacity_units"]["wru"],
                "rru": costs[name][phase]["capacity_units"]["rru"],
            }
            for phase in ("pause", "resume")
        }
        | {
            "downloads_when_two_resumes_race": f["race"]["downloads"],
            "usd_per_approval": costs[name]["usd_per_approval"],
            "usd_per_million_approvals": costs[name]["usd_per_million_approvals"],
        }
        for name, f in sides.items()
    }
    sent = {n: sum(t[p]["bytes_sent"] for p in ("pause", "resume")) for n, t in table.items()}
    return {
        "summary": table,
        "bytes_sent_ratio_interlock_to_peer": round(
            sent["interlock"] / sent["langgraph_dynamodb"], 2
        ),
        "cost": costs,
        "prices": PRICES,
        "assumptions": ASSUMPTIONS,
    }


def record(figures: dict[str, Any], path: Path) -> None:
    """Write a peer's measured `figures` to `path`, stamped with the day and the peer's
    package versions, for machines without them (`--record`)."""
    from datetime import date
    from importlib.metadata import version

    versions = {name: version(name) for name in PACKAGES}
    figures["recorded"] = {"on": date.today().isoformat(), "versions": versions}
    path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help=f"write {RECORD.name}")
    args = parser.parse_args()
    emulator = Emulator().start()
    try:
        mine = interlock(emulator)
        theirs, source = peer(emulator)
    finally:
        emulator.stop()
    if args.record and source == "measured":
        record(theirs, RECORD)
    print(
        json.dumps(
            {"peer_source": source, "interlock": mine, "langgraph_dynamodb": theirs}
            | compare(mine, theirs),
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
