"""Interrupt-and-resume versus ending the turn and re-running it, on three agents.

The reference scenario does real work before it needs a person: it fetches an approved
source, then a second source is refused, so it asks for approval; after the answer it
fetches the second source and writes its answer. The Doorstep example (a user's agent,
built through the public surface) gets a heat warning, pages the captain from inside a
tool and asks to send a volunteer (a sign-off intervention), two cards in one pause.
The MCP example (`examples.mcp`) asks a bank's MCP server to transfer money; the
server answers the first call with two questions (confirm it, give a reference), and
the answers retry that call. Both strategies run the same real Strands agent with the
same scripted model (the stand-in for an LLM) against a moto server (and, for MCP, the
example bank on 127.0.0.1, stopped at the end), and the figures count model calls,
tokens, tool executions, outbox records and, from the bank's ledger, the calls its
server served and the transfers it made: how much of the work before the pause each
strategy pays for twice. Prints JSON.

    .venv/bin/python bench/resume_vs_rerun.py
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from strands.types.content import Messages  # noqa: E402
from strands.types.streaming import StreamEvent  # noqa: E402
from strands.types.tools import ToolSpec  # noqa: E402

from examples.doorstep.script import SCRIPT as DOORSTEP_SCRIPT  # noqa: E402
from examples.mcp import SCENARIOS  # noqa: E402
from interlock.agent import load_factory  # noqa: E402
from interlock.answers import Reply  # noqa: E402
from interlock.harness.model import Block, Scenario, ScriptedModel  # noqa: E402
from interlock.harness.tools import ASKING_TOOLS  # noqa: E402
from interlock.manage import cancel_request  # noqa: E402
from interlock.outcomes import Offer, TurnResult  # noqa: E402
from interlock.ports import Stores  # noqa: E402
from interlock.records import Subject  # noqa: E402
from interlock.resume import resume_replies, resume_turn  # noqa: E402
from interlock.timing import CLOCK_SKEW_MS, SystemClock  # noqa: E402
from interlock.turns import Caller, Runtime, TurnLimits, run_turn  # noqa: E402
from local.emulator import Emulator  # noqa: E402
from local.storage import local_storage  # noqa: E402

KNOWN = "https://docs.example.org/method.txt"
NEEDED = "https://data.example.org/reference/table.csv"
PROMPT = "Compare our method with the reference table."


def _said(results: list[str], words: str) -> bool:
    return any(words in text for text in results)


def _read_method(results: list[str]) -> list[Block]:
    return [
        {"text": "First I read our method notes."},
        {"tool": "fetch_url", "input": {"url": KNOWN}},
    ]


def _read_table(results: list[str]) -> list[Block]:
    return [{"text": "Now the reference table."}, {"tool": "fetch_url", "input": {"url": NEEDED}}]


def _ask_if_blocked(results: list[str]) -> list[Block]:
    if _said(results, "not approved"):
        return [
            {
                "tool": "request_approval",
                "input": {"reason": "The comparison needs the reference table.", "urls": [NEEDED]},
            }
        ]
    return _answer(results)


def _retry_or_give_up(results: list[str]) -> list[Block]:
    if _said(results, "Approved by the user"):
        return [{"tool": "fetch_url", "input": {"url": NEEDED}}]
    return [{"text": "I need access to data.example.org to finish; please approve it."}]


def _answer(results: list[str]) -> list[Block]:
    return [{"text": "The method matches the reference table on every column."}]


REFERENCE = Scenario(
    "reference", [_read_method, _read_table, _ask_if_blocked, _retry_or_give_up, _answer]
)


class Models:
    """Builds each run's scripted model; while `dying`, one whose process dies as it is
    asked for its answer (`_DiesAtAnswer`)."""

    def __init__(self, scenarios: Sequence[Scenario] = (REFERENCE,)) -> None:
        self.scenarios = scenarios
        self.built: list[ScriptedModel] = []
        self.dying = False

    def __call__(self) -> ScriptedModel:
        model = (_DiesAtAnswer if self.dying else ScriptedModel)(self.scenarios)
        self.built.append(model)
        return model


def _figures(results: list[TurnResult], models: Models) -> dict[str, Any]:
    """Totals, and how much of it repeats steps already played in an earlier run."""
    seen: set[tuple[str, int]] = set()
    repeated_calls = repeated_tools = 0
    for model in models.built:
        run_steps = set(model.played)
        repeated_calls += sum(1 for step in model.played if step in seen)
        executed = [c for r in results for c in r.tool_calls if c["id"] in model.tool_steps]
        repeated_tools += sum(
            1 for call in executed if model.tool_steps[call["id"]] in seen and not _cancelled(call)
        )
        seen |= run_steps
    return {
        "model_calls": sum(r.usage.model_calls for r in results),
        "input_tokens": sum(r.usage.input_tokens for r in results),
        "output_tokens": sum(r.usage.output_tokens for r in results),
        "tool_executions": sum(r.usage.tool_executions for r in results),
        "repeated_model_calls": repeated_calls,
        "repeated_tool_executions": repeated_tools,
        "runs": [r.outcome for r in results],
    }


def _answers_recomputed(result: TurnResult) -> int:
    """Calls of Interlock's asking tools that answered the resumed card: not journaled,
    a taker re-runs their answer branch (see `Journal`)."""
    return sum(1 for c in result.tool_calls if c.get("resumed") and c["name"] in ASKING_TOOLS)


def _cancelled(call: dict[str, Any]) -> bool:
    # A paused call has no result yet: its body has not run either.
    return call["result"] is None or call["result"].startswith("Not run:")


def interrupt_and_resume(stores: Stores) -> dict[str, Any]:
    models = Models()
    rt = Runtime(stores, models, fetch=_transport, limits=TurnLimits(heartbeat_s=60))
    alice = Caller("alice")
    stores.approvals.grant(
        "c-resume", "alice", [Subject("site", "docs.example.org")], "seed", _now()
    )
    paused = run_turn(rt, alice, "c-resume", PROMPT)
    assert paused.offer is not None
    done = resume_turn(
        rt,
        alice,
        "c-resume",
        interrupt_id=paused.offer.request.interrupt_id,
        secret=paused.offer.secret,
        status="resolved",
        payload={"decision": "approve"},
    )
    return {**_figures([paused, done], models), "answer": done.text}


class Crash(BaseException):
    """The worker's process dies here (not an error it could handle)."""


class _DiesAtAnswer(ScriptedModel):
    """The model of a worker that dies as it asks for the run's answer (the scenario's
    last step): every step before it is recorded, and nothing of the end is. It is the
    last place a death costs nothing: the answer is stored by the finish itself, so a
    death once it has come costs that one model call (`Journal`)."""

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[StreamEvent]:
        scenario, step = self.step_for(messages)
        if step == len(scenario.steps) - 1:
            raise Crash()
        async for event in super().stream(messages, tool_specs, system_prompt, **kwargs):
            yield event


class _Later:
    """A clock past the crashed worker's lease (by every clock): the next worker comes
    along later."""

    def __init__(self, offset_ms: int) -> None:
        self._offset_ms = offset_ms

    def now_ms(self) -> int:
        return _now() + self._offset_ms


def takeover_after_crash(stores: Stores) -> dict[str, Any]:
    """Worker 1 resumes and dies as it asks for the answer, every step before recorded;
    worker 2 takes the request over and finishes it from the journal."""
    models = Models()
    fetched: Counter[str] = Counter()

    def transport(url: str) -> str:
        fetched[url] += 1
        return _transport(url)

    limits = TurnLimits(heartbeat_s=60)
    rt = Runtime(stores, models, fetch=transport, limits=limits, worker_id="w1")
    alice = Caller("carol")
    stores.approvals.grant(
        "c-takeover", "carol", [Subject("site", "docs.example.org")], "seed", _now()
    )
    paused = run_turn(rt, alice, "c-takeover", PROMPT)
    assert paused.offer is not None
    answer = {
        "interrupt_id": paused.offer.request.interrupt_id,
        "secret": paused.offer.secret,
        "status": "resolved",
        "payload": {"decision": "approve"},
    }
    models.dying = True
    try:
        resume_turn(rt, alice, "c-takeover", **answer)
        raise AssertionError("worker 1 was meant to die")
    except Crash:
        models.dying = False
    crashed = stores.requests.get("c-takeover", _now())
    assert crashed is not None
    journal = stores.requests.steps(crashed)
    later = _Later(stores.policy.lease_ms + CLOCK_SKEW_MS + 1)
    done = resume_turn(
        dataclasses.replace(rt, clock=later, worker_id="w2"), alice, "c-takeover", **answer
    )
    figures = _figures([paused, done], models)
    return {
        **figures,
        # Counted at the models and the transport: worker 1 died before reporting usage.
        "model_calls": sum(m.calls for m in models.built),
        "input_tokens": sum(m.usage["inputTokens"] for m in models.built),
        "output_tokens": sum(m.usage["outputTokens"] for m in models.built),
        "fetches": dict(fetched),
        # Worker 1 ran the whole continuation: any tool body worker 2 ran is a repeat,
        # but the approval's answer, which each taker computes from the recorded answer.
        "repeated_tool_executions": done.usage.tool_executions
        - _answers_recomputed(done)
        + sum(n - 1 for n in fetched.values()),
        "journal_entries_at_crash": len(journal),
        "journal_bytes_at_crash": sum(len(e.encode()) for e in journal),
        "answer": done.text,
    }


def end_turn_and_rerun(stores: Stores) -> dict[str, Any]:
    models = Models()
    rt = Runtime(stores, models, fetch=_transport, limits=TurnLimits(heartbeat_s=60))
    # The turn cannot pause: the approval tool answers at once, and the turn ends asking.
    unattended = Caller("bob", can_ask_a_human=False)
    stores.approvals.grant("c-rerun", "bob", [Subject("site", "docs.example.org")], "seed", _now())
    first = run_turn(rt, unattended, "c-rerun", PROMPT)
    # The person approves out of band; the same question runs again from the start.
    stores.approvals.grant("c-rerun", "bob", [Subject("site", "data.example.org")], "card", _now())
    second = run_turn(rt, unattended, "c-rerun", PROMPT)
    return {**_figures([first, second], models), "answer": second.text}


def _now() -> int:
    return SystemClock().now_ms()


def _transport(url: str) -> str:
    return f"contents of {url}"


def main() -> None:
    server = Emulator().start()
    try:
        storage = local_storage(server.endpoint, "bench", "bench-data")
        figures = {**compare(storage.stores), "doorstep": compare_doorstep(storage.stores)}
        mcp = compare_mcp(storage.stores)
        figures["mcp"] = mcp
        figures["targets"]["resume_repeats_zero_mcp_calls"] = (
            mcp["interrupt_and_resume"]["mcp_calls"]["repeated"] == 0
        )
        print(json.dumps(figures, indent=2))
    finally:
        server.stop()


# -- Doorstep ------------------------------------------------------------------------

DISPATCHER = Caller("dina", frozenset({"dispatcher"}))
HEAT = "heat warning for the block"
CAPTAIN = {
    "captain-escalation": {"follow_up": "send a volunteer"},
    "doorstep:captain-sign-off": {"decision": "approve"},
}


def _doorstep(stores: Stores, models: Models, **changes: Any) -> Runtime:
    return Runtime(
        stores,
        models,
        limits=TurnLimits(heartbeat_s=60),
        agent=load_factory("examples.doorstep:build"),
        **changes,
    )


def _answer_all(rt: Runtime, chat: str, offer: Offer) -> TurnResult:
    replies = [
        Reply(a.interrupt_id, "resolved", CAPTAIN[a.card["interrupt_name"]])
        for a in offer.request.asked
    ]
    return resume_replies(rt, DISPATCHER, chat, secret=offer.secret, replies=replies)


def _outbox(stores: Stores, chat: str, results: list[TurnResult]) -> dict[str, int]:
    """Volunteer tasks and case records in the outbox under this chat's calls."""
    ids = {c["id"] for r in results for c in r.tool_calls}
    tasks = sum(1 for i in ids if (stores.outbox.get(f"{chat}#{i}") or {}).get("to"))
    cases = sum(1 for i in ids if stores.outbox.get(f"{chat}#{i}#case"))
    return {"volunteer_tasks": tasks, "case_records": cases}


def doorstep_resume(stores: Stores) -> dict[str, Any]:
    models = Models(DOORSTEP_SCRIPT)
    rt = _doorstep(stores, models)
    paused = run_turn(rt, DISPATCHER, "d-resume", HEAT)
    assert paused.offer is not None and len(paused.offer.request.asked) == 2
    done = _answer_all(rt, "d-resume", paused.offer)
    return {
        **_figures([paused, done], models),
        **_outbox(stores, "d-resume", [paused, done]),
        "cards_in_the_pause": len(paused.offer.request.asked),
        "answer": done.text,
    }


def doorstep_takeover(stores: Stores) -> dict[str, Any]:
    """The worker that got the captain's answers sends the task and dies as it asks for
    the answer; its successor finishes from the journal."""
    models = Models(DOORSTEP_SCRIPT)
    rt = _doorstep(stores, models, worker_id="w1")
    paused = run_turn(rt, DISPATCHER, "d-takeover", HEAT)
    assert paused.offer is not None
    models.dying = True
    try:
        _answer_all(rt, "d-takeover", paused.offer)
        raise AssertionError("worker 1 was meant to die")
    except Crash:
        models.dying = False
    later = _Later(stores.policy.lease_ms + CLOCK_SKEW_MS + 1)
    successor = dataclasses.replace(rt, clock=later, worker_id="w2")
    done = _answer_all(successor, "d-takeover", paused.offer)
    return {
        **_figures([paused, done], models),
        **_outbox(stores, "d-takeover", [paused, done]),
        "model_calls": sum(m.calls for m in models.built),
        "repeated_tool_executions": done.usage.tool_executions,
        "answer": done.text,
    }


def doorstep_rerun(stores: Stores) -> dict[str, Any]:
    """Without a durable pause the turn ends when it needs the captain; once they have
    answered, the same warning runs again from the start (and pauses again, as a run
    that cannot keep its place must)."""
    models = Models(DOORSTEP_SCRIPT)
    rt = _doorstep(stores, models)
    first = run_turn(rt, DISPATCHER, "d-rerun", HEAT)
    cancel_request(stores, DISPATCHER, "d-rerun", _now())
    second = run_turn(rt, DISPATCHER, "d-rerun", HEAT)
    assert second.offer is not None
    done = _answer_all(rt, "d-rerun", second.offer)
    return {
        **_figures([first, second, done], models),
        **_outbox(stores, "d-rerun", [first, second, done]),
        "answer": done.text,
    }


def compare_doorstep(stores: Stores) -> dict[str, Any]:
    resumed = doorstep_resume(stores)
    takeover = doorstep_takeover(stores)
    rerun = doorstep_rerun(stores)
    return {
        "scenario": "heat warning: page the captain (in the tool) and sign off a volunteer "
        "(intervention), two cards in one pause",
        "interrupt_and_resume": resumed,
        "takeover_after_crash": takeover,
        "end_turn_and_rerun": rerun,
    }


# -- MCP -----------------------------------------------------------------------------

HOLDER = Caller("hana")
TRANSFER = "please transfer the money"
# The account holder's answers, by the bank's input request (the card's `input_key`).
BANK_ANSWERS = {"confirm": {"ok": True}, "reference": {"reference": "INV-7"}}


@contextmanager
def _serving_bank(ledger: Path) -> Iterator[str]:
    """The example bank on a free port of 127.0.0.1, writing every call to `ledger`, and
    the example agent connected to it; yields its URL. On exit the agent's connection
    and the server are stopped (the server's own `run` offers no way to stop it)."""
    import uvicorn

    from examples.mcp import URL_VARIABLE
    from examples.mcp.server import HOST, bank

    # Building an `MCPServer` configures the root logger (INFO, to stderr) when nothing
    # has yet: the bench's output is its JSON, so the process's logging stays as it was.
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    app = bank(ledger).streamable_http_app(host=HOST)
    root.setLevel(level)
    root.handlers[:] = handlers
    server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, name="bench-bank", daemon=True)
    thread.start()
    previous = os.environ.get(URL_VARIABLE)
    url = ""
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the bank did not start")
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]  # port 0: the kernel chose
        url = f"http://{HOST}:{port}/mcp"
        # The example connects once per process and bank: this bank's new port gets a
        # connection of its own at the first build.
        os.environ[URL_VARIABLE] = url
        yield url
    finally:
        if url:
            _disconnect_example(url)
        if previous is None:
            os.environ.pop(URL_VARIABLE, None)
        else:
            os.environ[URL_VARIABLE] = previous
        server.should_exit = True
        thread.join(timeout=10)


def _disconnect_example(url: str) -> None:
    """Close the example agent's connection to the bank at `url` in this process (the
    example keeps it for the process's life, and the bank is about to stop)."""
    import examples.mcp as example

    example.disconnect(url)


def _ledger(path: Path) -> list[dict[str, Any]]:
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines()]


def _mcp_calls(lines: list[dict[str, Any]]) -> dict[str, int]:
    """What the bank served, from its ledger lines: first calls, retries, transfers, and
    how many calls asked again a round of a transfer the bank had already answered (one
    resume makes one call of each round)."""
    first = [line for line in lines if line.get("round") == 1]
    retries = [line for line in lines if line.get("round") == 2]
    # A retry names its first call only by the state it carries back.
    asked = {line["state_id"]: (line["amount"], line["payee"]) for line in first}
    rounds = [(1, asked[line["state_id"]]) for line in first]
    rounds += [(2, asked.get(line["state_id"])) for line in retries]
    return {
        "first_calls": len(first),
        "retries": len(retries),
        "transfers": sum(1 for line in lines if "transfer" in line),
        "repeated": len(rounds) - len(set(rounds)),
    }


def _mcp_runtime(stores: Stores, models: Models) -> Runtime:
    return Runtime(
        stores,
        models,
        limits=TurnLimits(heartbeat_s=60),
        agent=load_factory("examples.mcp:build"),
    )


def _answer_bank(rt: Runtime, chat: str, offer: Offer) -> TurnResult:
    replies = [
        Reply(a.interrupt_id, "resolved", BANK_ANSWERS[a.card["input_key"]])
        for a in offer.request.asked
    ]
    return resume_replies(rt, HOLDER, chat, secret=offer.secret, replies=replies)


def mcp_resume(stores: Stores, ledger: Path) -> dict[str, Any]:
    """The bank asks, the run pauses; the answers retry the one call."""
    models = Models(SCENARIOS)
    rt = _mcp_runtime(stores, models)
    before = len(_ledger(ledger))
    paused = run_turn(rt, HOLDER, "m-resume", TRANSFER)
    assert paused.offer is not None and len(paused.offer.request.asked) == 2
    done = _answer_bank(rt, "m-resume", paused.offer)
    return {
        **_figures([paused, done], models),
        "mcp_calls": _mcp_calls(_ledger(ledger)[before:]),
        "cards_in_the_pause": len(paused.offer.request.asked),
        "answer": done.text,
    }


def mcp_rerun(stores: Stores, ledger: Path) -> dict[str, Any]:
    """Without a durable pause the turn ends when the bank asks; once the holder has
    answered, the transfer runs again from the start: the bank, which keeps nothing
    between rounds, is called from scratch and asks again, and the known answers retry."""
    models = Models(SCENARIOS)
    rt = _mcp_runtime(stores, models)
    before = len(_ledger(ledger))
    first = run_turn(rt, HOLDER, "m-rerun", TRANSFER)
    cancel_request(stores, HOLDER, "m-rerun", _now())
    second = run_turn(rt, HOLDER, "m-rerun", TRANSFER)
    assert second.offer is not None
    done = _answer_bank(rt, "m-rerun", second.offer)
    return {
        **_figures([first, second, done], models),
        "mcp_calls": _mcp_calls(_ledger(ledger)[before:]),
        "answer": done.text,
    }


def compare_mcp(stores: Stores) -> dict[str, Any]:
    """Both strategies on the MCP example, against a bank served for the comparison."""
    with tempfile.TemporaryDirectory(prefix="bench-bank-") as work:
        ledger = Path(work) / "bank-ledger.jsonl"
        with _serving_bank(ledger):
            resumed = mcp_resume(stores, ledger)
            rerun = mcp_rerun(stores, ledger)
    return {
        "scenario": "transfer through an MCP server that asks to confirm and for a "
        "reference (input_required), two cards in one pause, one retry",
        "interrupt_and_resume": resumed,
        "end_turn_and_rerun": rerun,
    }


def compare(stores: Stores) -> dict[str, Any]:
    resumed = interrupt_and_resume(stores)
    takeover = takeover_after_crash(stores)
    rerun = end_turn_and_rerun(stores)
    return {
        "scenario": "fetch known source, refused source, approval, fetch, answer",
        "model": "scripted stand-in (tokens estimated as characters / 4)",
        "interrupt_and_resume": resumed,
        "takeover_after_crash": takeover,
        "end_turn_and_rerun": rerun,
        "targets": {
            "resume_repeats_zero_model_calls": resumed["repeated_model_calls"] == 0,
            "resume_repeats_zero_tool_executions": resumed["repeated_tool_executions"] == 0,
            "takeover_repeats_zero_model_calls": takeover["repeated_model_calls"] == 0,
            "takeover_repeats_zero_tool_executions": takeover["repeated_tool_executions"] == 0,
        },
    }


if __name__ == "__main__":
    main()
