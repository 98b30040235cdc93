"""What one process of a crash-matrix cell does: a phase of a chat's life under a fault.

Each phase runs in its own forked process (from a forkserver that imported Strands
once), holding nothing but the moto server's address: whatever survives a SIGKILL is in
the store, or in the append-only logs this module writes for the checks:

- `models.log`: one line per model call that completed (role, scenario, step);
- `tools.log`: one line per tool body that ran to its end (role, toolUseId, name).

Phases:
    pause    run the turn until it pauses (the cell's starting point)
    run      the same, under the fault
    resume   answer the open request, under the fault
    sweep    sweep the request once it is overdue, under the fault
    recover  a later worker drives the chat to its end (answers again, or asks again)
    takeover the same, over a resumed run that died after recording two of its steps
    sweeper  a later sweep settles whatever is left (past expiry)
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import boto3
from strands.types.events import ToolResultEvent
from strands.types.tools import AgentTool, ToolSpec, ToolUse

import examples.mcp as payments
from examples import analyst
from examples.analyst.script import DOWNLOAD, INFO, REPORT
from interlock import errors
from interlock.adapters.factory import build_stores
from interlock.agent import AgentFactory, AgentInputs, AgentSpec
from interlock.caller import Caller
from interlock.config import InterlockConfig
from interlock.deps import Runtime, TurnLimits
from interlock.harness.model import Scenario, ScriptedModel
from interlock.manage import open_request
from interlock.pause import PAUSE_FAILED
from interlock.records import RequestState
from interlock.resume import resume_turn
from interlock.sweeper import sweep
from interlock.timing import DAY_S, StorePolicy, SystemClock
from interlock.turns import run_turn
from tests.faults.injector import FaultPlan, Mode

REGION: Final = "us-east-1"
LATER_MS: Final = 10 * 60_000  # past a resume lease (30 s) and a turn's lease (6 min)
OVERDUE_MS: Final = (DAY_S + 600) * 1000  # past a card's expiry
ROLE: dict[str, str] = {"now": "run"}  # which half of the chat's life is running
# What a download fetches: a table over `StorePolicy.inline_bytes`, so the resumed run
# records its result as an object first and the put and the read of that object are
# cells of the matrix too.
TABLE: Final = "a,b\n" + "\n".join(f"{i},{i * i}" for i in range(600))


def _ask(prompt: str) -> dict[str, Any]:
    return {
        "tool": "ask_user",
        "input": {
            "type": "single_choice",
            "prompt": prompt,
            "options": ["Yes", "No"],
            "default": "Yes",
        },
    }


_LOW_REPORT: Final = {
    "tool": "send_report",
    "input": {"recipient": "team@example.org", "summary": "Figures.", "risk": "low"},
}
ASK_THEN_REPORT = Scenario(
    "ask-then-report",
    [
        lambda r: [_ask("Send the figures?")],
        lambda r: [_LOW_REPORT],
        lambda r: [{"text": "Sent: " + " ".join(r)}],
    ],
    keywords=("ask-then-send",),
)
CHAIN = Scenario(
    "chain",
    [
        lambda r: [_ask("First question?")],
        lambda r: [_ask("Second question?")],
        lambda r: [_LOW_REPORT],
        lambda r: [{"text": "Chain done: " + " ".join(r)}],
    ],
    keywords=("chain",),
)


@dataclass(frozen=True)
class Story:
    """A scenario of the matrix: its prompt, the answer a person gives, and the effects
    a correct single run leaves for each final decision."""

    name: str
    scenario: Scenario
    prompt: str
    answer: dict[str, Any]
    roles: frozenset[str] = frozenset({"reporter"})
    sends_report: tuple[str, ...] = ()  # final decisions after which one report is sent
    grants_site: bool = False  # an approval grants the table's site
    agent: str = "analyst"  # or "payments": the MCP example, over the module's bank
    phases: tuple[str, ...] = ("run", "resume")  # the phases put under faults
    recipient: str | None = None  # where a sent report must go (the person's edit)

    def expected_reports(self, decision: str | None) -> int:
        return 1 if decision in self.sends_report else 0


ANSWERED: Final = ("approved", "answered", "defaulted", "timed_out", "rejected", "cancelled")
STORIES: Final = {
    s.name: s
    for s in (
        Story(
            "download",
            DOWNLOAD,
            "please download the table",
            {"decision": "approve"},
            grants_site=True,
        ),
        Story(
            "report",
            REPORT,
            "please send the weekly report",
            {"decision": "approve"},
            sends_report=("approved",),
        ),
        # The person corrects the recipient before approving: the report goes, once,
        # where they said, also when a worker dies after the answer is recorded.
        Story(
            "report-edited",
            REPORT,
            "please send the weekly report",
            {"decision": "approve", "edits": {"recipient": "ops@example.org"}},
            sends_report=("approved",),
            recipient="ops@example.org",
            phases=("resume",),
        ),
        Story(
            "report-reject",
            REPORT,
            "please send the weekly report",
            {"decision": "reject"},
            sends_report=("approved",),
        ),
        Story(
            "ask-then-report",
            ASK_THEN_REPORT,
            "ask-then-send",
            {"answer": "Yes"},
            sends_report=ANSWERED,
        ),
        Story("chain", CHAIN, "chain", {"answer": "Yes"}, sends_report=ANSWERED),
        Story("info", INFO, "run the export", {"bucket_name": "exports", "retention_days": 7}),
        # The bank's question: its retry is reserved and its reply recorded in the
        # outbox, the new steps of a resume. A pause makes no new AWS call: resume only.
        Story(
            "transfer",
            payments.SCENARIOS[1],
            "send Ada 80 euros, reference INV-1",
            {"ok": True},
            roles=frozenset(),
            agent="payments",
            phases=("resume",),
        ),
    )
}
SCENARIOS: Final = tuple(
    {s.scenario.name: s.scenario for s in STORIES.values() if s.agent == "analyst"}.values()
)


@dataclass
class CellSpec:
    """Everything a phase process needs, picklable."""

    endpoint: str
    table: str
    bucket: str
    work: str
    chat: str
    user: str
    story: str
    phase: str
    mode: Mode = "none"
    at: int = -1
    op: str = ""  # with it, the fault is the nth call described so (`FaultPlan.op`)
    nth: int = 0
    trace: bool = False
    offset_ms: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class ShiftedClock:
    """Wall-clock time moved forward: a worker that comes along later."""

    def __init__(self, offset_ms: int) -> None:
        self._offset_ms = offset_ms

    def now_ms(self) -> int:
        return SystemClock().now_ms() + self._offset_ms


class LoggedModel(ScriptedModel):
    """The scripted stand-in model, logging each call that completed."""

    def __init__(self, log: Path, scenarios: tuple[Scenario, ...] | None = None) -> None:
        super().__init__(scenarios or SCENARIOS)
        self._log = log

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterable[Any]:  # type: ignore[override]
        async for event in super().stream(messages, *args, **kwargs):
            yield event
        scenario, step = self.played[-1]
        _append(self._log, {"role": ROLE["now"], "scenario": scenario, "step": step})


class LoggedTool(AgentTool):
    """A tool that logs each body that ran to its end (a paused body does not end)."""

    def __init__(self, inner: AgentTool, log: Path) -> None:
        super().__init__()
        self._inner = inner
        self._log = log

    @property
    def tool_name(self) -> str:
        return self._inner.tool_name

    @property
    def tool_spec(self) -> ToolSpec:
        return self._inner.tool_spec

    @property
    def tool_type(self) -> str:
        return self._inner.tool_type

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        async for event in self._inner.stream(tool_use, invocation_state, **kwargs):
            # The executor stops reading at the result, so the body's end is logged here.
            if isinstance(event, ToolResultEvent):
                _append(
                    self._log,
                    {"role": ROLE["now"], "id": tool_use["toolUseId"], "name": tool_use["name"]},
                )
            yield event


# Made once in the forkserver: every forked phase inherits the loaded service models, so
# making its clients costs nothing (loading them anew is most of a small process's time).
_SESSION = boto3.session.Session(region_name=REGION)
for _service in ("dynamodb", "s3"):
    _SESSION.client(_service, endpoint_url="http://127.0.0.1:9")


def child_main(fields: dict[str, Any]) -> None:
    """The forked process's entry point: one phase (a `CellSpec`'s fields), then exit."""
    spec = CellSpec(**fields)

    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_SESSION_TOKEN="testing",
        AWS_DEFAULT_REGION=REGION,
    )
    work = Path(spec.work)
    config = boto3.session.Config(retries={"max_attempts": 1})
    clients = [
        _SESSION.client(n, endpoint_url=spec.endpoint, config=config) for n in ("dynamodb", "s3")
    ]
    trace = work / "trace.jsonl" if spec.trace else None
    plan = FaultPlan(spec.at, spec.mode, trace, op=spec.op or None, nth=spec.nth)
    plan.attach(*clients)
    stores = build_stores(clients[0], clients[1], spec.table, spec.bucket, StorePolicy())
    rt = Runtime(
        stores,
        lambda: LoggedModel(work / "models.log"),
        clock=ShiftedClock(spec.offset_ms),
        fetch=lambda url: TABLE,
        limits=TurnLimits(heartbeat_s=120),
        # Named by the phase and its time, not the pid: the slot a worker tries first
        # follows from its name, so a cell makes the same calls as its trace
        worker_id=f"{spec.phase}-{spec.offset_ms}",
        config=InterlockConfig(),
        agent=_logged(STORIES[spec.story], work),
    )
    story = STORIES[spec.story]
    caller = Caller(spec.user, story.roles)
    outcome = PHASES[spec.phase](rt, caller, spec, story)
    _append(work / "outcomes.log", {"phase": spec.phase, "outcome": outcome})


def _logged(story: Story, work: Path) -> AgentFactory:
    """The story's agent, every tool of it logging each body that ran to its end (and
    the payments agent's own script logging each model call, as the analyst's does)."""

    def build(inputs: AgentInputs) -> AgentSpec:
        if story.agent == "payments":
            spec = payments.build(inputs)
            spec = replace(spec, model=LoggedModel(work / "models.log", payments.SCENARIOS))
        else:
            spec = analyst.build(inputs)
        return replace(spec, tools=[LoggedTool(tool, work / "tools.log") for tool in spec.tools])

    return build


def _pause(rt: Runtime, caller: Caller, spec: CellSpec, story: Story) -> str:
    ROLE["now"] = "run"
    return _guard(lambda: run_turn(rt, caller, spec.chat, story.prompt).outcome)


def _resume(rt: Runtime, caller: Caller, spec: CellSpec, story: Story) -> str:
    return _answer_open(rt, caller, spec, story)


def _sweep(rt: Runtime, caller: Caller, spec: CellSpec, story: Story) -> str:
    ROLE["now"] = "resume"
    return _guard(lambda: str(sweep(rt, rt.clock.now_ms())))


def _recover(rt: Runtime, caller: Caller, spec: CellSpec, story: Story) -> str:
    """Drive the chat to its end as a later user would: answer what is open, or ask again
    (also when the turn ended saying its pause could not be saved)."""
    said = []
    for _ in range(6):
        request = rt.stores.requests.get(spec.chat, rt.clock.now_ms())
        turns = rt.stores.chats.turns(spec.chat)
        if request is not None and request.claimable(rt.clock.now_ms()):
            said.append(_answer_open(rt, caller, spec, story))
        elif turns and turns[-1]["role"] == "assistant" and turns[-1]["text"] != PAUSE_FAILED:
            if request is not None and request.state is RequestState.DONE:
                # The person's tab asks once more: the stored answer is replayed (which
                # also frees the open-request slot if the finishing worker died first).
                said.append(_replay(rt, caller, spec, request.interrupt_id))
            return " / ".join([*said, "done"])
        else:
            said.append(_pause(rt, caller, spec, story))
    return " / ".join([*said, "gave up"])


def _answer_open(rt: Runtime, caller: Caller, spec: CellSpec, story: Story) -> str:
    ROLE["now"] = "resume"

    def answer() -> str:
        opened = open_request(rt.stores, caller, spec.chat, rt.clock.now_ms())
        assert opened.secret is not None, f"not answerable: {opened.request.state}"
        return resume_turn(
            rt,
            caller,
            spec.chat,
            interrupt_id=opened.request.interrupt_id,
            secret=opened.secret,
            status="resolved",
            payload=story.answer,
        ).outcome

    return _guard(answer)


def _replay(rt: Runtime, caller: Caller, spec: CellSpec, interrupt_id: str) -> str:
    ROLE["now"] = "resume"
    return _guard(
        lambda: (
            resume_turn(
                rt,
                caller,
                spec.chat,
                interrupt_id=interrupt_id,
                secret="stale",
                status="resolved",
                payload={},
            ).outcome
        )
    )


def _guard(step: Any) -> str:
    try:
        return str(step())
    except errors.InterlockError as refused:
        return f"error:{refused.code}"


PHASES: Final = {
    "pause": _pause,
    "run": _pause,
    "resume": _resume,
    "sweep": _sweep,
    "recover": _recover,
    # A later worker taking over a resumed run that died after recording steps: it reads
    # them back (the journal's query) and goes on from there
    "takeover": _recover,
    "sweeper": _sweep,
}


def _append(path: Path, line: dict[str, Any]) -> None:
    # One write call per line on a file opened for append: a SIGKILL never leaves half.
    with path.open("a") as out:
        out.write(json.dumps(line) + "\n")


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


__all__ = ["STORIES", "CellSpec", "RequestState", "child_main", "read_lines"]
