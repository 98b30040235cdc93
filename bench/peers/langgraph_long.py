"""The peer on the realistic long run: `bench/long_agent.py`'s agent as a LangGraph user
would write it, checkpointed by `DynamoDBSaver` as `langgraph_agent.saver` configures it.

The same content as `bench/long_run.py`'s `realistic` case: ten earlier chat turns on the
thread, then a prompt whose first tool (`start_build`) pauses for a person with
`interrupt()`; a second process answers it with `Command(resume=...)`, and the model
takes 20 steps, each calling `build_part`, five of which return the same 30 KB build log
Interlock's tool returns. The model is the scripted stand-in playing the very script
Interlock's side plays (`bench.long_agent.SCRIPT`), chosen by the same keyword rule.

    PYTHONPATH=<peer requirements> .venv/bin/python bench/peers/langgraph_long.py [--record]

Without the optional requirements, `peer()` returns the figures last recorded in
`langgraph_long.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from bench.long_agent import REALISTIC  # noqa: E402
from bench.peers.langgraph_cycle import available, record, written  # noqa: E402
from bench.peers.metering import metered  # noqa: E402
from local.emulator import Emulator  # noqa: E402

RECORD = Path(__file__).with_name("langgraph_long.json")
EARLIER_PROMPT = "How are the figures?"  # what `bench/long_run.py` sends before the pause


def recorded() -> dict[str, Any]:
    """The peer's last recorded figures on the realistic case (`--record`)."""
    figures: dict[str, Any] = json.loads(RECORD.read_text())
    return figures


def peer(emulator: Emulator | None = None) -> tuple[dict[str, Any], str]:
    """The realistic case's peer figures and their source: measured now when langgraph is
    installed and an emulator is given, else the recorded ones. Call it outside any
    `metered` block: it meters on its own."""
    if emulator is not None and available():
        return measure(emulator), "measured"
    figures = recorded()
    return figures, f"recorded {figures['recorded']['on']}"


def measure(
    emulator: Emulator, earlier: int = 10, steps: int = 20, big: Sequence[int] = REALISTIC
) -> dict[str, Any]:
    """`earlier` chat turns, then one pause and a resume of `steps` steps (those in `big`
    returning 30 KB): the traffic of the pause and of the resume, units included."""
    from langchain_core.messages import HumanMessage
    from langgraph.types import Command

    from bench.long_agent import prompt
    from bench.peers import langgraph_agent as agent

    table = f"peer-long-{uuid.uuid4().hex[:12]}"
    agent.create_storage(emulator.endpoint, table, f"{table}-data")
    # Three processes' worth of objects: the earlier turns', the pause's, the resume's.
    # The long run downloads nothing: its tools build parts.
    history, pausing, resuming = (agent.Tally(_no_download) for _ in range(3))
    chatting, first, second = (
        agent.build_long_graph(tally, agent.saver(emulator.endpoint, table, f"{table}-data"))
        for tally in (history, pausing, resuming)
    )
    config = {"configurable": {"thread_id": "realistic"}}
    with metered(emulator):
        for _ in range(earlier):
            chatting.invoke({"messages": [HumanMessage(EARLIER_PROMPT)]}, config)
        emulator.traffic.take()
        paused = first.invoke({"messages": [HumanMessage(prompt(steps, tuple(big)))]}, config)
        pause = emulator.traffic.take()
        done = second.invoke(Command(resume="yes"), config)
        resume = emulator.traffic.take()
    assert paused.get("__interrupt__"), "the peer did not pause"
    answer = str(done["messages"][-1].content)
    assert answer == f"All {steps} parts built.", answer
    return {
        "case": {"earlier_turns": earlier, "steps": steps, "big": list(big)},
        "pause": {**pause, "bytes_written": written(pause)},
        "resume": {**resume, "bytes_written": written(resume)},
        "answer": answer,
        "reruns": {
            "pause": pausing.entered(),
            "resume": resuming.entered(),
            "rerun_on_resume": resuming.again(pausing),
        },
    }


def _no_download(url: str) -> str:
    raise AssertionError(f"the long run downloads nothing, not {url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help=f"write {RECORD.name}")
    args = parser.parse_args()
    emulator = Emulator().start()
    try:
        figures, source = peer(emulator)
    finally:
        emulator.stop()
    if args.record and source == "measured":
        record(figures, RECORD)
    print(json.dumps({"peer_source": source, **figures}, indent=2))


if __name__ == "__main__":
    main()
