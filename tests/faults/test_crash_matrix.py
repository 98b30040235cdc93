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
real process and still cheap. A cell that begins from a pause (or from a resume killed
after its steps) begins from a copy of what one fault-free run of that prefix stored
and logged (`Start`), its trace too, instead of running the prefix again. The matrix is
written to `artifacts/crash_matrix.json`.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import threading
import time
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
from interlock.admission import ASK_POOL
from interlock.harness.mcp import idempotency_key
from interlock.harness.tools import ASKING_TOOLS
from interlock.interrupts import tool_use_id_of
from interlock.records import RequestState
from interlock.timing import StorePolicy, SystemClock
from tests.e2e.test_mcp_input import Bank, serve_bank
from tests.faults.cell import LATER_MS, OVERDUE_MS, STORIES, CellSpec, Story, read_lines
from tests.faults.injector import finishes, in_flight, is_write
from tests.faults.zygote import Zygote

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
    ("report-edited", "resume", "system"),
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
    forks = [Zygote("tests.faults.cell", log, PHASE_TIMEOUT_S) for _ in range(ZYGOTES)]
    yield forks
    for fork in forks:
        fork.close()


@dataclass(frozen=True)
class Place:
    """Where one cell runs: a directory (its logs), a table and a bucket of its own, and
    the chat it drives (the same chat in every cell copied from one `Start`)."""

    work: Path
    chat: str

    @property
    def table(self) -> str:
        return f"t-{self.work.name}"

    @property
    def bucket(self) -> str:
        return f"b-{self.work.name}"


@dataclass(frozen=True)
class Start:
    """A chat as a fault-free prefix left it (paused; or a resume killed after its
    steps): what it stored and logged, copied into each cell that begins there instead
    of running the prefix again. Made anew once `START_FRESH_S` old, so a cell's chat
    is never much older than its trace's."""

    place: Place
    items: list[dict[str, Any]]
    objects: list[str]  # the keys in its bucket
    made_s: float


START_FRESH_S: Final = 15.0
LOGS: Final = ("models.log", "tools.log", "outcomes.log")


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
        self._starts: dict[tuple[str, str], Start] = {}
        self._starting = threading.RLock()  # a taken start traces a resume: from the paused one
        self._stale: list[Place] = []

    def workdir(self, chat: str | None = None) -> Place:
        """A cell's own directory with its own table and bucket, for `chat` (by default
        a new chat named as the directory).

        The chat always lands in the first shard of the expiry index, so a sweep makes
        the same calls in the same order in every cell as in the trace.
        """
        name = f"c{uuid.uuid4().hex[:10]}"
        while chat is None and keys.sweep_shard(name, SWEEP_SHARDS) != "OPEN#0":
            name = f"c{uuid.uuid4().hex[:10]}"
        place = Place(self.root / name, chat or name)
        place.work.mkdir()
        create_storage(self.aws["dynamodb"], self.aws["s3"], place.table, place.bucket)
        return place

    def storage(self, place: Place) -> dict[str, Any]:
        return {**self.aws, "table": place.table, "bucket": place.bucket}

    def stores(self, place: Place) -> Stores:
        aws = self.storage(place)
        return build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"], StorePolicy())

    def spec(self, place: Place, story: str, phase: str, **extra: Any) -> CellSpec:
        return CellSpec(
            endpoint=self.aws["endpoint"],
            table=place.table,
            bucket=place.bucket,
            work=str(place.work),
            chat=place.chat,
            user=f"u-{place.chat}",
            story=story,
            phase=phase,
            **extra,
        )

    def run(self, spec: CellSpec) -> int:
        forks = self.idle.get()
        try:
            return forks.run(asdict(spec))
        finally:
            self.idle.put(forks)

    def cells(self, cells: list[Cell]) -> dict[str, list[str]]:
        """Run `cells`, as many at once as there are zygotes; the broken ones by name."""
        with ThreadPoolExecutor(max_workers=self.idle.qsize()) as pool:
            verdicts = list(pool.map(self.cell, cells))
        return {cell.name: broken for cell, broken in zip(cells, verdicts, strict=True) if broken}

    def trace(self, story: str, phase: str) -> list[str]:
        """The AWS calls of one fault-free run of `phase`, in order."""
        place = self._prepared(story, phase)
        spec = self.spec(place, story, phase, trace=True, offset_ms=_offset(phase))
        assert self.run(spec) == 0
        self._drop(place)
        return [line["op"] for line in read_lines(place.work / "trace.jsonl")]

    def cell(self, cell: Cell) -> list[str]:
        """Run one cell; returns its violations (empty when every invariant holds)."""
        place = self._prepared(cell.story, cell.phase)
        spec = self.spec(
            place,
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
            assert self.run(self.spec(place, cell.story, phase, offset_ms=offset)) == 0
        allowance = 1 if in_flight(cell.op, cell.mode) else 0
        # A fault at the finish can cost the answer's model call only, never a body
        bodies = 0 if finishes(cell.op) else allowance
        story = STORIES[cell.story]
        broken = verdict(self.stores(place), self.storage(place), place, story, allowance, bodies)
        if story.agent == "payments" and self.bank is not None:
            broken += bank_verdict(self.stores(place), place.chat, self.bank, cell)
        self._drop(place)
        return broken

    def close(self) -> None:
        """Drop the starts' tables and buckets."""
        for place in [*self._stale, *(start.place for start in self._starts.values())]:
            self._drop(place)
        self._stale.clear()
        self._starts.clear()

    def _drop(self, place: Place) -> None:
        """Delete the cell's table and bucket: the emulator serves the whole session."""
        aws = self.storage(place)
        aws["dynamodb"].delete_table(TableName=aws["table"])
        listed = aws["s3"].list_objects_v2(Bucket=aws["bucket"]).get("Contents", [])
        for found in listed:
            aws["s3"].delete_object(Bucket=aws["bucket"], Key=found["Key"])
        aws["s3"].delete_bucket(Bucket=aws["bucket"])

    def _prepared(self, story: str, phase: str) -> Place:
        """A new place where `phase` of `story` can begin: copied from its start, or
        (the payments story, whose bank tells cells apart by chat) a new chat whose
        prefix runs here."""
        prefix = {"resume": "paused", "sweep": "paused", "takeover": "taken"}.get(phase)
        if prefix is None:
            return self.workdir()
        if STORIES[story].agent == "payments":
            place = self.workdir()
            self._run_prefix(place, story, prefix)
            return place
        start = self._start(story, prefix)
        place = self.workdir(start.place.chat)
        self._copy(start, place)
        return place

    def _start(self, story: str, prefix: str) -> Start:
        with self._starting:
            start = self._starts.get((story, prefix))
            if start is None or time.monotonic() - start.made_s > START_FRESH_S:
                if start is not None:
                    self._stale.append(start.place)
                place = self.workdir()
                self._run_prefix(place, story, prefix)
                scanned = self.aws["dynamodb"].scan(TableName=place.table)["Items"]
                listed = self.aws["s3"].list_objects_v2(Bucket=place.bucket).get("Contents", [])
                objects = [found["Key"] for found in listed]
                start = Start(place, scanned, objects, time.monotonic())
                self._starts[(story, prefix)] = start
            return start

    def _run_prefix(self, place: Place, story: str, prefix: str) -> None:
        assert self.run(self.spec(place, story, "pause")) == 0
        if prefix == "taken":
            # The resume dies just after its second step is recorded (not a clean exit)
            op, nth = self._step_write(story)
            self.run(self.spec(place, story, "resume", mode="kill_after", op=op, nth=nth))

    def _copy(self, start: Start, place: Place) -> None:
        """Give `place` the start's items, objects and logs, as stored."""
        dynamodb, s3 = self.aws["dynamodb"], self.aws["s3"]
        for at in range(0, len(start.items), 25):
            batch = [{"PutRequest": {"Item": item}} for item in start.items[at : at + 25]]
            left = dynamodb.batch_write_item(RequestItems={place.table: batch})
            assert not left.get("UnprocessedItems"), left
        for key in start.objects:
            source = {"Bucket": start.place.bucket, "Key": key}
            s3.copy_object(Bucket=place.bucket, Key=key, CopySource=source)
        for log in LOGS:
            if (start.place.work / log).exists():
                shutil.copyfile(start.place.work / log, place.work / log)

    def _step_write(self, story: str) -> tuple[str, int]:
        """The call of a fault-free resume of `story` that records its takeover step:
        as it is described, and which of the calls described so it is."""
        if story not in self._steps:
            ops = self.trace(story, "resume")
            # Its answer is never a step (the finish stores it): after any step, the
            # run still has the model to ask
            steps = [i for i, op in enumerate(ops) if "Put STEP" in op]
            assert len(steps) >= STEPS_BEFORE_TAKEOVER, ops
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
    stores: Stores,
    aws: dict[str, Any],
    place: Place,
    story: Story,
    allowance: int,
    bodies: int,
) -> list[str]:
    """Every invariant of the module docstring, as a list of what is broken: at most
    `allowance` repeats in all, of which at most `bodies` tool bodies."""
    chat, work = place.chat, place.work
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
    for report in reports:
        sent_to = json.loads(report["payload"]["S"])["recipient"]
        if story.recipient is not None and sent_to != story.recipient:
            broken.append(f"a report went to {sent_to}, not {story.recipient}")
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
    answered = _answered_calls(stores, chat)
    broken += _repeats(work, allowance, bodies, answered, models_too=not reset)
    meta = stores.chats.meta(chat)
    if meta.run_token is not None:
        broken.append("a turn still holds the chat")
    slots = _rows(aws, keys.user_pk(user), keys.SLOTS_SK)
    if any(name.startswith(ASK_POOL) for row in slots for name in row):
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
    work: Path, allowance: int, bodies: int, answered: frozenset[str], models_too: bool = True
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
    repeated_bodies = sum(n - 1 for n in tools.values())
    repeated = sum(n - 1 for n in models.values()) + repeated_bodies
    if repeated > allowance or repeated_bodies > bodies:
        return [f"{repeated} repeated model calls or tool bodies ({repeated_bodies} bodies)"]
    return []


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
    request: pytest.FixtureRequest,
    story: str,
    phase: str,
    recovery: str,
) -> None:
    lab = Lab(zygotes, server_aws, tmp_path, bank)
    request.addfinalizer(lab.close)
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
