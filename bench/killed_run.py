"""A long run whose worker process is killed (SIGKILL) mid-way, three times, still ends:
the retry cap counts only claims that added nothing to the run's journal. Prints JSON.

A person approves a run of N steps (20 by default), each a model call that builds one
part (a tool). Every worker is a real process forked from a preloaded server, against a
moto server on 127.0.0.1; at each of the kill points, drawn at random from the seed
(a step, and whether in its model call or at the end of its tool body, before the
result is recorded), the process holding the claim SIGKILLs itself, leaving nothing
but its lease to lapse. The run is then continued by the sweeper's recovery or by the
person answering again (a takeover), picked at random, each in a process of its own,
until it ends. Each process's clock runs ten minutes ahead of the one before, past any
lease, grace and clock margin, instead of waiting them out.

Every model call and every tool body is logged as it happens (a line written through
before any kill), so the figures are what ran: model calls made against the N + 2 the
run needs (the one that asks, N steps, the answer) and how many were made again, and
tool bodies run again. The model is the scripted stand-in (no LLM is reachable here).
What a takeover may repeat is one model call per kill in a model call (its response
was never recorded) and one tool body per kill in a tool body (its result was not).

    .venv/bin/python bench/killed_run.py [--steps 20] [--kills 3] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

PHASES: Final = ("model", "tool")
WAYS: Final = ("sweeper", "takeover")
LEASE_MS, GRACE_MS = 1500, 500
LATER_MS: Final = 10 * 60_000  # each process's clock ahead of the one before
APPROVE: Final = {"decision": "approve"}


@dataclass(frozen=True)
class Where:
    """The emulator and the table one run uses, and what it logs to."""

    endpoint: str
    table: str
    bucket: str
    chat: str
    steps: int
    log: str


@dataclass(frozen=True)
class Kill:
    """Where a worker dies: in the model call for `step`, or at the end of its tool body."""

    step: int
    phase: str


class _Ahead:
    """The wall clock, `offset_ms` ahead (a process that comes after the others)."""

    def __init__(self, offset_ms: int) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.offset_ms


def _log(where: Where, **entry: Any) -> None:
    # One write per line, flushed before anything else happens: a SIGKILL after it
    # loses nothing of what was logged.
    with open(where.log, "a") as out:
        out.write(json.dumps(entry) + "\n")
        out.flush()


def _die(where: Where, kill: Kill) -> None:
    _log(where, kind="kill", step=kill.step, phase=kill.phase, pid=os.getpid())
    os.kill(os.getpid(), signal.SIGKILL)


def _factory(where: Where, kill: Kill | None) -> Any:
    """The run's agent (a user's, through `interlock.agent`): Interlock's approval card
    first, then one model call per part; this process dies at `kill`."""
    from strands import tool

    from interlock.agent import AgentInputs, AgentSpec, Scenario, request_approval

    @tool
    def build_part(n: int) -> str:
        """Build part n."""
        _log(where, kind="body", step=n, pid=os.getpid())
        if kill == Kill(n, "tool"):
            _die(where, kill)
        return f"part {n} built"

    def step(k: int) -> Any:
        def play(results: list[str]) -> list[dict[str, Any]]:
            _log(where, kind="model", step=k, pid=os.getpid())
            if kill == Kill(k, "model"):
                _die(where, kill)
            if k == 0:
                reason = "Build the parts with partkit."
                return [
                    {"tool": "request_approval", "input": {"reason": reason, "packages": ["pk"]}}
                ]
            if k <= where.steps:
                return [{"text": f"Part {k}."}, {"tool": "build_part", "input": {"n": k}}]
            return [{"text": f"All {where.steps} parts built."}]

        return play

    script = [Scenario("parts", [step(k) for k in range(where.steps + 2)])]

    def build(inputs: AgentInputs) -> AgentSpec:
        return AgentSpec(
            tools=[request_approval, build_part],
            system_prompt="You build parts.",
            model=inputs.model(scripted=script),
        )

    return build


def _runtime(where: Where, offset_ms: int, kill: Kill | None, worker: str) -> Any:
    import boto3

    from interlock.adapters.factory import build_stores
    from interlock.config import InterlockConfig
    from interlock.timing import StorePolicy
    from interlock.turns import Runtime, TurnLimits

    session = boto3.session.Session(region_name="us-east-1")
    dynamodb, s3 = (session.client(n, endpoint_url=where.endpoint) for n in ("dynamodb", "s3"))
    policy = StorePolicy(lease_ms=LEASE_MS, recovery_grace_ms=GRACE_MS)
    return Runtime(
        build_stores(dynamodb, s3, where.table, where.bucket, policy),
        lambda: None,  # type: ignore[arg-type, return-value]  # the agent brings its model
        clock=_Ahead(offset_ms),
        agent=_factory(where, kill),
        config=InterlockConfig(model="scripted"),
        # The whole run in one invocation when nothing kills it (the default cap is 12).
        limits=TurnLimits(heartbeat_s=0.3, max_model_calls=where.steps + 10),
        worker_id=worker,
    )


def _worker(where: Where, act: str, offset_ms: int, kill: Kill | None) -> None:
    """One process: pause the run, answer it, or continue it (`sweeper`, `takeover`)."""
    from interlock import errors
    from interlock.caller import Caller
    from interlock.resume import resume_turn
    from interlock.sweeper import sweep
    from interlock.turns import run_turn

    rt = _runtime(where, offset_ms, kill, f"{act}-{os.getpid()}")
    alice = Caller(f"u-{where.chat}", frozenset({"builder"}))
    try:
        if act == "pause":
            paused = run_turn(rt, alice, where.chat, f"build {where.steps} parts")
            assert paused.offer is not None
            request = paused.offer.request
            _log(
                where, kind="paused", interrupt_id=request.interrupt_id, secret=paused.offer.secret
            )
        elif act == "sweeper":
            report = sweep(rt, rt.clock.now_ms())
            _log(where, kind="ended", act=act, recovered=report.recovered, failed=report.failed)
        else:
            asked = _paused(where)
            done = resume_turn(
                rt,
                alice,
                where.chat,
                interrupt_id=asked["interrupt_id"],
                secret=asked["secret"],
                status="resolved",
                payload=APPROVE,
            )
            _log(where, kind="ended", act=act, outcome=done.outcome)
    except errors.InterlockError as refused:
        _log(where, kind="ended", act=act, error=refused.code, message=str(refused))


def _paused(where: Where) -> dict[str, Any]:
    return next(e for e in _entries(where) if e["kind"] == "paused")


def _entries(where: Where) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(where.log).read_text().splitlines()]


def kill_points(rng: random.Random, steps: int, kills: int) -> list[Kill]:
    """`kills` distinct steps of the run (1..`steps`), in order, each in a random phase."""
    chosen = sorted(rng.sample(range(1, steps + 1), kills))
    return [Kill(step, rng.choice(PHASES)) for step in chosen]


def measure(
    endpoint: str,
    steps: int = 20,
    kills: int = 3,
    seed: int | None = None,
    storage: tuple[str, str] | None = None,
    chat: str = "killed",
) -> dict[str, Any]:
    """One killed run of `chat` on the emulator at `endpoint`, on a table and bucket of
    its own unless `storage` names existing ones (the soak's, shared with its chats)."""
    import boto3

    from interlock.adapters.factory import build_stores
    from interlock.adapters.schema import create_storage
    from interlock.timing import StorePolicy, SystemClock

    seed = seed if seed is not None else secrets.randbelow(2**31)
    rng = random.Random(seed)
    points = kill_points(rng, steps, kills)
    session = boto3.session.Session(region_name="us-east-1")
    dynamodb, s3 = (session.client(n, endpoint_url=endpoint) for n in ("dynamodb", "s3"))
    if storage is None:
        table = f"killed-{secrets.token_hex(4)}"
        storage = (table, f"{table}-data")
        create_storage(dynamodb, s3, *storage)
    stores = build_stores(dynamodb, s3, *storage, StorePolicy())
    far = SystemClock().now_ms() + (kills + 5) * LATER_MS  # past every process's clock
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["bench.killed_run", "interlock.resume", "interlock.sweeper"])
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        where = Where(endpoint, *storage, chat, steps, f"{work}/log.jsonl")
        Path(where.log).touch()
        processes: list[dict[str, Any]] = []

        def process(act: str, offset_ms: int, kill: Kill | None) -> int:
            child = context.Process(target=_worker, args=(where, act, offset_ms, kill))
            child.start()
            child.join(300)
            if child.is_alive():
                child.kill()
                child.join()
            code = child.exitcode if child.exitcode is not None else -1
            killed = code == -signal.SIGKILL
            processes.append({"act": act, "kill": asdict(kill) if kill else None, "killed": killed})
            return code

        process("pause", 0, None)
        process("answer", 0, points[0])  # the person's approve: its worker is the first to die
        for attempt in range(1, kills + 4):
            current = stores.requests.get(where.chat, far)
            if current is None or current.state.value not in ("pending", "claimed"):
                break  # it ended: done, or given up
            kill = points[attempt] if attempt < len(points) else None
            process(rng.choice(WAYS), attempt * LATER_MS, kill)
        entries = _entries(where)
    request = stores.requests.get(where.chat, far)
    turns = stores.chats.turns(chat)
    events = stores.chats.events(chat, limit=1000)
    calls = Counter(e["step"] for e in entries if e["kind"] == "model")
    bodies = Counter(e["step"] for e in entries if e["kind"] == "body")
    done = request is not None and request.state.value == "done"
    completed = done and bool(turns) and turns[-1]["text"] == f"All {steps} parts built."
    died = [e for e in entries if e["kind"] == "kill"]
    return {
        "seed": seed,
        "steps": steps,
        "completed": completed,
        "state": request.state.value if request else None,
        "ended_reason": request.ended_reason if request else None,
        "kills": len(died),
        "kill_points": [asdict(point) for point in points],
        "continued_by": [p["act"] for p in processes[2:]],
        "claims": request.claim_count if request else None,
        "claims_allowed_in_a_row_without_progress": StorePolicy().max_claims,
        "model_calls": {
            "made": sum(calls.values()),
            "needed": steps + 2,
            "repeated": sum(n - 1 for n in calls.values()),
            "steps_never_asked": sorted(set(range(steps + 2)) - set(calls)),
        },
        "tool_bodies": {
            "run": sum(bodies.values()),
            "needed": steps,
            "repeated": sum(n - 1 for n in bodies.values()),
        },
        "given_up_events": sum(1 for e in events if e.type == "given_up"),
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

    from local.emulator import Emulator

    emulator = Emulator().start()
    try:
        print(json.dumps(measure(emulator.endpoint, args.steps, args.kills, args.seed), indent=1))
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
