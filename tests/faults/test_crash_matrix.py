"""The crash matrix: every AWS call of run, pause, resume, chain, finish and sweep is, in
turn, the place where a real process is SIGKILLed (before the call, or after its
response arrived) or where the call fails; then a later worker (or the sweeper) answers
again, or, in the `system` cells, nobody clicks at all and only the sweeper's own passes
carry the chat to its end. Every cell checks the same invariants:

- each side effect happened exactly once, and only if the recorded decision allows it;
- the approval rows match the decision;
- the transcript holds every turn in order, with exactly one answer;
- no model call and no tool body was repeated (but the one a fault caught between its
  end and its journal record, which is all a fault there can cost);
- the chat is settled: the request is done, no turn holds the chat, no slot is held.

Cells are forked from a zygote process that imported Strands once, so each phase is a
real process and still cheap. The matrix is written to `artifacts/crash_matrix.json`.
"""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from interlock import keys
from interlock.adapters.factory import Stores, build_stores
from interlock.adapters.schema import SWEEP_SHARDS, create_storage
from interlock.harness.mcp import idempotency_key
from interlock.harness.tools import ASKING_TOOLS
from interlock.interrupts import tool_use_id_of
from interlock.records import RequestState
from interlock.timing import StorePolicy, SystemClock
from tests.e2e.test_mcp_input import Bank, serve_bank
from tests.faults.cell import LATER_MS, OVERDUE_MS, STORIES, CellSpec, Story, read_lines
from tests.faults.injector import in_flight, is_write

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
REPORT_FILE = ROOT / "artifacts" / "crash_matrix.json"
# (story, phase under fault): every approval kind pauses and resumes under faults; the
# gated report and the question that leads to an unattended report are also swept.
# Each plan names who comes along after the fault: a person answering again, or only
# the system's own passes (the sweeper continuing a stranded claim, then timing out what
# nobody answered): no click at all.
PLANS = [
    *[(name, phase, "person") for name, story in STORIES.items() for phase in story.phases],
    ("report", "sweep", "person"),
    ("ask-then-report", "sweep", "person"),
    ("report", "resume", "system"),
    ("download", "resume", "system"),
    ("download", "takeover", "person"),
]
# A takeover starts from a resumed run that died right after recording this many steps.
STEPS_BEFORE_TAKEOVER: Final = 2
RESULTS: dict[str, dict[str, Any]] = {}
# The snapshot's own S3 step in a phase that pauses (run) or loads a pause (resume).
SNAPSHOT_STEP: Final = {"run": "PutObject snapshots", "resume": "GetObject snapshots"}


@dataclass(frozen=True)
class Cell:
    story: str
    phase: str
    at: int
    op: str
    mode: str
    recovery: str = "person"
    nth: int = 0  # which call described as `op` it is (the trace's count before `at`)

    @property
    def name(self) -> str:
        return f"{self.story}/{self.phase}/{self.at}:{self.op}/{self.mode}/{self.recovery}"


PHASE_TIMEOUT_S = 60


class Zygote:
    """The forking process (`tests/faults/zygote.py`), driven over pipes."""

    def __init__(self, log: Path) -> None:
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        self._log = log.open("ab")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.zygote"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )

    def run(self, spec: CellSpec) -> int:
        """Fork a child for `spec`, wait for it; its exit code (-9: SIGKILLed)."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write((json.dumps(asdict(spec)) + "\n").encode())
        self._process.stdin.flush()
        ready, _, _ = select.select([self._process.stdout], [], [], PHASE_TIMEOUT_S)
        assert ready, f"phase {spec.phase} of {spec.chat} hung"
        return int(json.loads(self._process.stdout.readline())["exit"])

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._log.close()


# One zygote per core: cells are independent (each has its own chat), so two run at once.
ZYGOTES = max(1, min(2, os.cpu_count() or 1))


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bank]:
    """The example bank the payments story's agent calls, one for the module: each
    cell tells its own calls by their idempotency keys."""
    work = tmp_path_factory.mktemp("bank")
    child, url = serve_bank(work / "ledger.jsonl", work / "bank.log")
    os.environ["BANK_MCP_URL"] = url  # the zygotes, started next, pass it on
    try:
        yield Bank(url, work / "ledger.jsonl")
    finally:
        os.environ.pop("BANK_MCP_URL", None)
        child.kill()
        child.wait(timeout=PHASE_TIMEOUT_S)


@pytest.fixture(scope="module")
def zygotes(tmp_path_factory: pytest.TempPathFactory, bank: Bank) -> Iterator[list[Zygote]]:
    log = tmp_path_factory.mktemp("zygote") / "children.log"
    forks = [Zygote(log) for _ in range(ZYGOTES)]
    yield forks
    for fork in forks:
        fork.close()


class Lab:
    """Runs the phases of cells as forked processes, each cell on a table and bucket of
    its own (a sweeper in one cell must not settle another cell's request)."""

    def __init__(
        self, forks: list[Zygote], aws: dict[str, Any], root: Path, bank: Bank | None = None
    ) -> None:
        self.bank = bank
        self.idle: queue.Queue[Zygote] = queue.Queue()
        for fork in forks:
            self.idle.put(fork)
        self.aws = aws
        self.root = root
        self._steps: dict[str, tuple[str, int]] = {}

    def workdir(self) -> Path:
        """A cell's own directory (its name is the chat's) with its own table and bucket.

        The chat always lands in the first shard of the expiry index, so a sweep makes
        the same calls in the same order in every cell as in the trace.
        """
        name = f"c{uuid.uuid4().hex[:10]}"
        while keys.sweep_shard(name, SWEEP_SHARDS) != "OPEN#0":
            name = f"c{uuid.uuid4().hex[:10]}"
        work = self.root / name
        work.mkdir()
        create_storage(self.aws["dynamodb"], self.aws["s3"], f"t-{work.name}", f"b-{work.name}")
        return work

    def storage(self, work: Path) -> dict[str, Any]:
        return {**self.aws, "table": f"t-{work.name}", "bucket": f"b-{work.name}"}

    def stores(self, work: Path) -> Stores:
        aws = self.storage(work)
        return build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"], StorePolicy())

    def spec(self, work: Path, story: str, phase: str, **extra: Any) -> CellSpec:
        chat = work.name
        return CellSpec(
            endpoint=self.aws["endpoint"],
            table=f"t-{work.name}",
            bucket=f"b-{work.name}",
            work=str(work),
            chat=chat,
            user=f"u-{chat}",
            story=story,
            phase=phase,
            **extra,
        )

    def run(self, spec: CellSpec) -> int:
        forks = self.idle.get()
        try:
            return forks.run(spec)
        finally:
            self.idle.put(forks)

    def cells(self, cells: list[Cell]) -> dict[str, list[str]]:
        """Run `cells`, as many at once as there are zygotes; the broken ones by name."""
        with ThreadPoolExecutor(max_workers=self.idle.qsize()) as pool:
            verdicts = list(pool.map(self.cell, cells))
        return {cell.name: broken for cell, broken in zip(cells, verdicts, strict=True) if broken}

    def trace(self, story: str, phase: str) -> list[str]:
        """The AWS calls of one fault-free run of `phase`, in order."""
        work = self.workdir()
        self._prepare(work, story, phase)
        assert self.run(self.spec(work, story, phase, trace=True, offset_ms=_offset(phase))) == 0
        self._drop(work)
        return [line["op"] for line in read_lines(work / "trace.jsonl")]

    def cell(self, cell: Cell) -> list[str]:
        """Run one cell; returns its violations (empty when every invariant holds)."""
        work = self.workdir()
        self._prepare(work, cell.story, cell.phase)
        spec = self.spec(
            work,
            cell.story,
            cell.phase,
            mode=cell.mode,
            at=cell.at,
            op=cell.op,
            nth=cell.nth,
            offset_ms=_offset(cell.phase),
        )
        self.run(spec)
        for phase, offset in _recovery(cell):
            assert self.run(self.spec(work, cell.story, phase, offset_ms=offset)) == 0
        allowance = 1 if in_flight(cell.op, cell.mode) else 0
        story = STORIES[cell.story]
        broken = verdict(self.stores(work), self.storage(work), work, story, allowance)
        if story.agent == "payments" and self.bank is not None:
            broken += bank_verdict(self.stores(work), work.name, self.bank, cell)
        self._drop(work)
        return broken

    def _drop(self, work: Path) -> None:
        """Delete the cell's table and bucket: the emulator serves the whole session."""
        aws = self.storage(work)
        aws["dynamodb"].delete_table(TableName=aws["table"])
        listed = aws["s3"].list_objects_v2(Bucket=aws["bucket"]).get("Contents", [])
        for found in listed:
            aws["s3"].delete_object(Bucket=aws["bucket"], Key=found["Key"])
        aws["s3"].delete_bucket(Bucket=aws["bucket"])

    def _prepare(self, work: Path, story: str, phase: str) -> None:
        if phase in ("resume", "sweep", "takeover"):
            assert self.run(self.spec(work, story, "pause")) == 0
        if phase == "takeover":
            # The resume dies just after its second step is recorded (not a clean exit)
            op, nth = self._step_write(story)
            self.run(self.spec(work, story, "resume", mode="kill_after", op=op, nth=nth))

    def _step_write(self, story: str) -> tuple[str, int]:
        """The call of a fault-free resume of `story` that records its takeover step:
        as it is described, and which of the calls described so it is."""
        if story not in self._steps:
            ops = self.trace(story, "resume")
            steps = [i for i, op in enumerate(ops) if "Put STEP" in op]
            assert len(steps) > STEPS_BEFORE_TAKEOVER, ops
            at = steps[STEPS_BEFORE_TAKEOVER - 1]
            self._steps[story] = (ops[at], ops[:at].count(ops[at]))
        return self._steps[story]


def _offset(phase: str) -> int:
    return {"sweep": OVERDUE_MS, "takeover": LATER_MS}.get(phase, 0)


def _recovery(cell: Cell) -> list[tuple[str, int]]:
    """Who comes along after the fault: a later worker, or the sweeper."""
    if cell.recovery == "system":
        # A stranded claim is continued once its lease and grace ran out; a request
        # still pending (the fault came before the claim) is timed out at its expiry.
        return [("sweeper", LATER_MS), ("sweeper", OVERDUE_MS + LATER_MS)]
    if cell.phase == "sweep":
        return [("sweeper", OVERDUE_MS + LATER_MS), ("recover", OVERDUE_MS + 2 * LATER_MS)]
    if cell.phase == "takeover":
        return [("recover", 2 * LATER_MS)]
    if cell.phase == "resume" and cell.mode == "kill_after":
        # The sweeper finds the request overdue; a person's recorded answer wins over
        # the timeout. Then the person's tab looks once more.
        return [("sweeper", OVERDUE_MS), ("recover", OVERDUE_MS + LATER_MS)]
    return [("recover", LATER_MS)]


def verdict(
    stores: Stores, aws: dict[str, Any], work: Path, story: Story, allowance: int
) -> list[str]:
    """Every invariant of the module docstring, as a list of what is broken."""
    chat = work.name
    user = f"u-{chat}"
    later = SystemClock().now_ms() + 3 * OVERDUE_MS
    broken: list[str] = []
    request = stores.requests.get(chat, later)
    if request is None or request.state is not RequestState.DONE:
        return [f"not settled: {request.state if request else 'no request'}"]
    decision = request.decision
    reports = _rows(aws, keys.outbox_pk(f"{chat}#"), "OUTBOX", prefix=True)
    if len(reports) != story.expected_reports(decision):
        broken.append(f"{len(reports)} reports for decision {decision}")
    sites = {
        row["subject_name"]["S"]
        for row in _rows(aws, keys.chat_pk(chat), keys.approval_prefix(user))
    }
    wanted = {"data.example.org"} if story.grants_site and decision == "approved" else set()
    if sites != wanted:
        broken.append(f"approval rows {sorted(sites)} for decision {decision}")
    broken += _transcript(stores, chat, request.final_text)
    # A run reset after a failure that acted on nothing threw its journaled model
    # responses away with the answer (the decision rule): asking the model again then is
    # by design, and costs no effect. Tool bodies still never repeat.
    reset = any(e.type == "run_failed" and e.detail.get("reset") for e in stores.chats.events(chat))
    broken += _repeats(work, allowance, _answered_calls(stores, chat), models_too=not reset)
    meta = stores.chats.meta(chat)
    if meta.run_token is not None:
        broken.append("a turn still holds the chat")
    if _rows(aws, keys.user_pk(user), "ASK#"):
        broken.append("the open-request slot is still held")
    return broken


def bank_verdict(stores: Stores, chat: str, bank: Bank, cell: Cell) -> list[str]:
    """The bank's side of a payments cell: the answer reached it at most once, money
    moved on every retry that carried a confirmation and on no other, the person is told
    what happened,
    and only a worker dying with its reservation landed and nothing sent may leave the
    bank unasked (the successor cannot tell that from a lost reply, so it does not send).
    """
    request = stores.requests.get(chat, SystemClock().now_ms() + 3 * OVERDUE_MS)
    final = (request.final_text if request else None) or ""
    keys_ = {idempotency_key(chat, use, 1) for use in _answered_calls(stores, chat)}
    retries = [r for r in bank.rounds(2) if r.get("key") in keys_]
    moved = [line for line in bank.lines() if "transfer" in line and line.get("key") in keys_]
    broken = []
    # A confirmation nobody gave in time reaches the bank as `cancel`: no money moves.
    moving = len(retries) if request is not None and request.decision == "answered" else 0
    if len(retries) > 1 or len(moved) != moving:
        broken.append(f"{len(retries)} retries and {len(moved)} transfers at the bank")
    reserved_then_died = "Put OUTBOX" in cell.op and cell.nth == 0 and cell.mode == "kill_after"
    if not retries and not reserved_then_died:
        broken.append("the answer never reached the bank")
    if moved and "Sent 80.00 EUR" not in final and "not sent twice" not in final:
        broken.append(f"money moved and the person was told: {final!r}")
    if not moved and "Sent 80.00 EUR" in final:
        broken.append("the person was told money moved, and it did not")
    return broken


def _transcript(stores: Stores, chat: str, answer: str | None) -> list[str]:
    """Numbered in order; every answer follows its own prompt (a prompt whose turn died
    has none, and was asked again); the last answer is the request's stored one."""
    turns = stores.chats.turns(chat)
    roles = "".join("a" if turn["role"] == "assistant" else "u" for turn in turns)
    broken = []
    if [turn["seq"] for turn in turns] != list(range(1, len(turns) + 1)):
        broken.append(f"turn numbers {[t['seq'] for t in turns]}")
    if not roles.endswith("ua") or "aa" in roles or roles.startswith("a"):
        broken.append(f"transcript roles {roles}")
    elif answer is not None and turns[-1]["text"] != answer:
        broken.append("the saved answer differs from the stored one")
    return broken


def _answered_calls(stores: Stores, chat: str) -> frozenset[str]:
    """The tool calls that raised a card. An asking tool's call ends only in its answer
    branch (the first call pauses), whoever answered: a person or the sweeper."""
    return frozenset(
        use
        for event in stores.chats.events(chat)
        if event.type == "paused"
        and (use := tool_use_id_of(str(event.detail.get("interrupt_id")))) is not None
    )


def _repeats(
    work: Path, allowance: int, answered: frozenset[str], models_too: bool = True
) -> list[str]:
    models = Counter(
        (line["scenario"], line["step"])
        for line in read_lines(work / "models.log")
        if line["role"] == "resume" and models_too
    )
    # An asking tool's answer branch is not journaled: a takeover re-runs it, computing
    # the same result from its card and the recorded answer. Not work repeated.
    tools = Counter(
        line["id"]
        for line in read_lines(work / "tools.log")
        if line["role"] == "resume"
        and not (line["name"] in ASKING_TOOLS and line["id"] in answered)
    )
    repeated = sum(n - 1 for n in models.values()) + sum(n - 1 for n in tools.values())
    return [f"{repeated} repeated model calls or tool bodies"] if repeated > allowance else []


def _rows(
    aws: dict[str, Any], pk: str, sk_prefix: str, prefix: bool = False
) -> list[dict[str, Any]]:
    if prefix:
        items = aws["dynamodb"].scan(
            TableName=aws["table"],
            FilterExpression="begins_with(pk, :pk)",
            ExpressionAttributeValues={":pk": {"S": pk}},
        )["Items"]
        return list(items)
    return list(
        aws["dynamodb"].query(
            TableName=aws["table"],
            KeyConditionExpression="pk = :pk AND begins_with(sk, :sk)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":sk": {"S": sk_prefix}},
        )["Items"]
    )


def cells_of(story: str, phase: str, ops: list[str], recovery: str = "person") -> list[Cell]:
    """Every fault at every call: kill before it, fail it, and for a write, kill after.

    Before the phase's first write nothing durable has changed, so every fault there
    leaves the same state as a kill before the first call: that one cell stands for all.
    """
    first_write = next((at for at, op in enumerate(ops) if is_write(op)), len(ops))
    cells = [Cell(story, phase, 0, ops[0], "kill_before", recovery)]
    for at, op in enumerate(ops[first_write:], start=first_write):
        modes = ["kill_before", "fail"] + (["kill_after"] if is_write(op) else [])
        nth = ops[:at].count(op)
        cells += [Cell(story, phase, at, op, mode, recovery, nth) for mode in modes]
    return cells


@pytest.mark.parametrize(
    ("story", "phase", "recovery"),
    PLANS,
    ids=[f"{s}-{p}" + ("" if r == "person" else f"-{r}") for s, p, r in PLANS],
)
def test_every_fault_at_every_step_leaves_each_effect_exactly_once(
    zygotes: list[Zygote],
    bank: Bank,
    server_aws: dict[str, Any],
    tmp_path: Path,
    story: str,
    phase: str,
    recovery: str,
) -> None:
    lab = Lab(zygotes, server_aws, tmp_path, bank)
    # Given the AWS calls a fault-free run of this phase makes
    ops = lab.trace(story, phase)
    assert ops, "the phase made no AWS call"
    # Every pause PUTs its snapshot before its pointer, every resume GETs it: each is
    # a step of its own
    snapshot_ops = [op for op in ops if op.endswith(" snapshots")]
    if phase in SNAPSHOT_STEP:
        assert SNAPSHOT_STEP[phase] in snapshot_ops, ops

    # When each call in turn is where a process dies or a call fails, and a later worker
    # (or the sweeper) carries on
    cells = cells_of(story, phase, ops, recovery)
    failures = lab.cells(cells)

    # Then every invariant held in every cell
    RESULTS[f"{story}/{phase}" + ("" if recovery == "person" else f"/{recovery}")] = {
        "steps": len(ops),
        "cells": len(cells),
        "passed": len(cells) - len(failures),
        "ops": ops,
    }
    _write_report()
    assert not failures, json.dumps(failures, indent=1)


def _write_report() -> None:
    REPORT_FILE.parent.mkdir(exist_ok=True)
    total = {
        "cells": sum(r["cells"] for r in RESULTS.values()),
        "passed": sum(r["passed"] for r in RESULTS.values()),
    }
    REPORT_FILE.write_text(json.dumps({"total": total, "rows": RESULTS}, indent=1))
