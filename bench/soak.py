"""A randomized soak of "executed = decided": many chats, random answers from every
surface, random SIGKILLs of the workers carrying them, random sweeps; then a checker.

Each chat pauses on the gated report (`send_report`: one outside effect, through the
outbox). Then, at random moments and at once, one to four answers come (approve, deny,
cancel, or the same one again) from the card page, an AG-UI resume or a Slack tap, each
in its own process forked from a preloaded parent; a third of them are SIGKILLed at a
random instant. Sweeps run meanwhile (they continue claims whose worker died), and two
last ones settle what is left: stranded claims, then what nobody answered.

AWS answers unsteadily too: in a share of the processes (`--unclear`) one DynamoDB
write answers 500 after it landed, or its answer times out, or it is throttled before
it is served. And clocks disagree: every process (a person's worker, a sweep) runs its
clock up to `--skew-ms` (10 s) ahead of or behind the others.

Among the chats run `--long-runs` long ones (bench/killed_run.py): a run of 20 steps
whose worker is SIGKILLed at three random steps, continued each time by a sweep or a
takeover. Each must complete, as approved, repeating no more than one model call or
tool body per kill, and must never be given up.

For every request the checker asserts: it ended settled; the decision it executed is
the last one a person was told was accepted; nobody was told "taken" for an answer other
than the one they gave; the report went out at most once, and only
under an approve; the audit trail holds every answer a person was told was taken.

    .venv/bin/python bench/soak.py [--chats 200] [--long-runs 10] [--seed N] [--parallel 6]

Prints JSON: the seed (a run is replayed by passing it again), the counts, and the
violations (none, when all holds). The scripted model plays the analyst demo.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import secrets
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

PROMPT = "please send the weekly report"
ACTIONS = ("approve", "deny", "cancel", "again")
SURFACES = ("page", "agui", "slack")
KILL_SHARE = 1 / 3
LEASE_MS, GRACE_MS = 1500, 500
LATER_MS = 10 * 60_000  # past every lease and grace
OVERDUE_MS = 2 * 24 * 3600 * 1000  # past every card's expiry
PAYLOADS = {"approve": {"decision": "approve"}, "deny": {"decision": "reject"}}
DECIDED = {"approve": "approved", "deny": "rejected", "cancel": "cancelled"}
LONG_STEPS, LONG_KILLS = 20, 3


@dataclass(frozen=True)
class Where:
    endpoint: str
    table: str
    bucket: str


class _Later:
    """The wall clock moved on by `offset_ms` (a sweep that comes much later, or a
    worker whose clock is off)."""

    def __init__(self, offset_ms: int) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.offset_ms


# DynamoDB calls that write: the ones whose answer may come after they landed.
WRITES = frozenset({"UpdateItem", "PutItem", "DeleteItem", "TransactWriteItems"})
UNCLEAR = ("ambiguous", "timeout", "throttle")


def _unsteady(client: Any, rng: random.Random, share: float) -> str | None:
    """With chance `share`, make one write of this process's `client` answer unclearly:
    served, then a 500 (AWS's own retries spent) or a timed-out read of its answer; or
    throttled before it is served. Which write, and how, follow from `rng`."""
    if rng.random() >= share:
        return None
    from botocore.exceptions import ClientError, ReadTimeoutError

    kind = rng.choice(UNCLEAR)
    target = rng.randint(0, 6)
    state = {"writes": 0, "armed": False}

    def refusal(operation: str, code: str, status: int) -> ClientError:
        error: Any = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
        return ClientError(error, operation)

    def before(model: Any, **_: Any) -> None:
        if model.name not in WRITES:
            return
        state["writes"] += 1
        if state["writes"] - 1 != target:
            return
        if kind == "throttle":
            raise refusal(model.name, "ProvisionedThroughputExceededException", 400)
        state["armed"] = True

    def after(model: Any, **_: Any) -> None:
        if not state["armed"]:
            return
        state["armed"] = False
        if kind == "ambiguous":
            raise refusal(model.name, "InternalServerError", 500)
        raise ReadTimeoutError(endpoint_url=f"soak:{model.name}")

    client.meta.events.register("before-parameter-build", before)
    client.meta.events.register("after-call", after)
    return kind


@dataclass(frozen=True)
class Unsteady:
    """How one process's AWS and clock misbehave (drawn by the soak from its seed)."""

    skew_ms: int = 0
    unclear_share: float = 0.0
    seed: str = ""


def _runtime(
    where: Where, worker: str, offset_ms: int = 0, unsteady: Unsteady | None = None
) -> Any:
    import boto3

    from examples.analyst.script import DEMO_SCENARIOS
    from interlock.adapters.factory import build_stores
    from interlock.harness.model import ScriptedModel
    from interlock.timing import StorePolicy
    from interlock.turns import Runtime, TurnLimits

    session = boto3.session.Session(region_name="us-east-1")
    dynamodb, s3 = (session.client(n, endpoint_url=where.endpoint) for n in ("dynamodb", "s3"))
    unsteady = unsteady or Unsteady()
    fault = _unsteady(dynamodb, random.Random(unsteady.seed), unsteady.unclear_share)
    if fault is not None:
        _FAULTS.append(fault)
    policy = StorePolicy(lease_ms=LEASE_MS, recovery_grace_ms=GRACE_MS)
    stores = build_stores(dynamodb, s3, where.table, where.bucket, policy)
    return Runtime(
        stores,
        lambda: ScriptedModel(DEMO_SCENARIOS),
        clock=_Later(offset_ms + unsteady.skew_ms),
        fetch=lambda url: "a,b\n1,2",
        limits=TurnLimits(heartbeat_s=0.3),
        worker_id=worker,
    )


# The fault this process was dealt, if any (one process, one runtime that misbehaves).
_FAULTS: list[str] = []


def _act(
    where: Where,
    chat: str,
    action: str,
    surface: str,
    log: str,
    unsteady: Unsteady | None = None,
) -> None:
    """One person's action in its own process; what they were told goes to `log`."""
    from interlock import errors
    from interlock.answers import Reply
    from interlock.caller import Caller
    from interlock.channels import APPROVE, REJECT, Link, Tap, fingerprint
    from interlock.manage import cancel_request, open_request
    from interlock.respond import apply_tap
    from interlock.resume import resume_replies
    from interlock.turns import run_turn

    rt = _runtime(where, f"{action}-{surface}-{os.getpid()}", unsteady=unsteady)
    # A user per chat: the open-request cap per user would otherwise refuse the pauses.
    alice = Caller(f"u-{chat}", frozenset({"reporter"}))
    now = rt.clock.now_ms()
    told: dict[str, Any] = {"action": action, "surface": surface, "asked": DECIDED.get(action)}
    try:
        if action == "pause":
            told["outcome"] = run_turn(rt, alice, chat, PROMPT).outcome
        elif action == "cancel":
            cancel_request(rt.stores, alice, chat, now)
            told["accepted"], told["taken"] = "cancelled", True
        elif surface == "slack":
            slack_id = f"U{chat}"
            rt.stores.channels.link(
                Link("slack", slack_id, alice.user_id, alice.roles), "admin", now
            )
            request = rt.stores.requests.get(chat, now)
            assert request is not None
            choice = APPROVE if action == "approve" else REJECT
            tap = Tap("slack", slack_id, chat, fingerprint(request.interrupt_id), "resolved", None)
            text = apply_tap(rt, replace(tap, choice=choice)).text
            told["text"] = text
            for word, decision in (("Approved", "approved"), ("Denied", "rejected")):
                if text.startswith(("Thanks", "Already")) and word in text:
                    told["accepted"] = decision
            if "Cancelled" in text:
                told["accepted"] = "cancelled"
            told["taken"] = text.startswith("Thanks")  # "your answer was taken"
        else:
            opened = open_request(rt.stores, alice, chat, now)
            assert opened.secret is not None, f"not answerable: {opened.request.state}"
            reply = Reply(opened.request.interrupt_id, "resolved", PAYLOADS[action])
            done = resume_replies(rt, alice, chat, secret=opened.secret, replies=[reply])
            told["accepted"], told["taken"] = done.decision, done.outcome != "replayed"
    except errors.DecisionBinding as binding:
        told["accepted"] = binding.current.decision  # told what stands
        told["error"] = binding.code
    except errors.AlreadyAnswered as done:
        told["accepted"] = done.current.decision
    except (errors.InterlockError, AssertionError) as refused:
        told["error"] = getattr(refused, "code", "not answerable")
    told["at"] = time.time()
    told["fault"] = _FAULTS[0] if _FAULTS else None
    told["skew_ms"] = unsteady.skew_ms if unsteady else 0
    with open(log, "a") as out:
        out.write(json.dumps({"chat": chat, **told}) + "\n")


def _sweep(where: Where, offset_ms: int, unsteady: Unsteady | None = None) -> None:
    from interlock import errors
    from interlock.sweeper import sweep

    rt = _runtime(where, f"sweeper-{os.getpid()}", offset_ms, unsteady)
    # A throttled index read: the next scheduled sweep reads it again.
    with contextlib.suppress(errors.StoreError):
        sweep(rt, rt.clock.now_ms())


class Soak:
    def __init__(
        self,
        where: Where,
        work: Path,
        seed: int,
        parallel: int,
        skew_ms: int = 10_000,
        unclear: float = 0.25,
    ) -> None:
        self.where, self.work, self.seed, self.parallel = where, work, seed, parallel
        self.skew_ms, self.unclear = skew_ms, unclear
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(["bench.soak", "interlock.resume", "interlock.sweeper"])
        self.log = str(work / "told.jsonl")
        self.kills = 0
        self.actions = Counter[str]()
        self.long: dict[str, dict[str, Any]] = {}

    def run(self, chats: list[str], long_chats: Sequence[str] = ()) -> None:
        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            ran = [pool.submit(self.long_run, chat) for chat in long_chats]
            list(pool.map(self.chat, chats))
            for done in ran:
                done.result()
        # The last passes run steady: whatever an unsteady one left, they settle.
        self.process(_sweep, (self.where, LATER_MS))  # stranded claims
        self.process(_sweep, (self.where, OVERDUE_MS + LATER_MS))  # nobody answered

    def long_run(self, chat: str) -> None:
        """A long run killed mid-way (bench/killed_run.py), on a table of its own: its
        agent is not the one the other chats' workers build."""
        from bench.killed_run import measure

        seed = random.Random(f"{self.seed}:{chat}").randrange(2**31)
        self.long[chat] = measure(self.where.endpoint, LONG_STEPS, LONG_KILLS, seed, chat=chat)

    def unsteady(self, rng: random.Random) -> Unsteady:
        """One process's clock error and its chance of an unclear AWS answer."""
        skew = rng.randint(-self.skew_ms, self.skew_ms)
        return Unsteady(skew, self.unclear, f"{self.seed}:{rng.random()}")

    def chat(self, chat: str) -> None:
        rng = random.Random(f"{self.seed}:{chat}")  # each chat's plan replays from the seed
        self.process(_act, (self.where, chat, "pause", "page", self.log))
        plan = [(rng.choice(ACTIONS), rng.choice(SURFACES)) for _ in range(rng.randint(1, 4))]
        last = ("approve", "page")
        steps = []
        for action, surface in plan:
            if action == "again":
                action, surface = last
            last = (action, surface)
            steps.append((action, surface, rng.random() < KILL_SHARE, rng.random()))
        with ThreadPoolExecutor(max_workers=len(steps) + 1) as pool:
            for action, surface, kill, delay in steps:
                self.actions[action] += 1
                # Answers arrive at random moments: some overlap, some come after a lease lapsed
                time.sleep(delay * 2.5)
                kill_after = rng.uniform(0.05, 1.5) if kill else None
                act = (self.where, chat, action, surface, self.log, self.unsteady(rng))
                pool.submit(self.process, _act, act, kill_after)
            if rng.random() < 0.3:
                pool.submit(self.process, _sweep, (self.where, 0, self.unsteady(rng)))

    def process(
        self,
        target: Any,
        args: tuple[Any, ...],
        kill_after: float | None = None,
    ) -> None:
        child = self.ctx.Process(target=target, args=args)
        child.start()
        if kill_after is not None:
            child.join(kill_after)
            if child.is_alive():
                os.kill(child.pid or 0, signal.SIGKILL)
                self.kills += 1
        child.join(120)
        if child.is_alive():
            child.kill()


def check(where: Where, log: str, chats: list[str]) -> dict[str, Any]:
    """Every invariant of the module docstring, per request, as violations."""
    rt = _runtime(where, "checker", OVERDUE_MS + 2 * LATER_MS)
    told: dict[str, list[dict[str, Any]]] = {c: [] for c in chats}
    for line in Path(log).read_text().splitlines():
        entry = json.loads(line)
        told[entry["chat"]].append(entry)
    violations: list[str] = []
    ends = Counter[str]()
    for chat in chats:
        request = rt.stores.requests.get(chat, rt.clock.now_ms())
        if request is None:
            violations.append(f"{chat}: no request")
            continue
        ends[request.state.value] += 1
        if request.state.value not in ("done", "cancelled", "expired"):
            violations.append(f"{chat}: not settled ({request.state.value})")
        executed = "cancelled" if request.state.value == "cancelled" else request.decision
        accepted = [t for t in sorted(told[chat], key=lambda t: t["at"]) if t.get("accepted")]
        for t in accepted:
            if t.get("taken") and t["accepted"] != t["asked"]:
                violations.append(f"{chat}: {t['asked']} was answered {t['accepted']} as taken")
        if accepted and accepted[-1]["accepted"] != executed:
            last = accepted[-1]
            violations.append(
                f"{chat}: told {last['accepted']} ({last['surface']}), ran {executed}"
            )
        sent = rt.stores.outbox.get(f"{chat}#{request.card['tool_use_id']}") is not None
        if sent and executed != "approved":
            violations.append(f"{chat}: the report went out under {executed}")
        events = rt.stores.chats.events(chat, limit=1000)
        decided = {e.detail.get("decision") for e in events if e.type == "decision"}
        decided |= {"cancelled"} if any(e.type == "cancelled" for e in events) else set()
        for t in accepted:
            if t.get("error") is None and t["accepted"] not in decided:
                violations.append(f"{chat}: {t['accepted']} is missing from the audit trail")
    return {"ends": dict(ends), "violations": violations}


def check_long(runs: dict[str, dict[str, Any]]) -> list[str]:
    """The long runs' violations: each completed as approved, never given up, repeating
    at most one model call per kill in a model call and one tool body per kill in a tool
    body (what a takeover may repeat)."""
    violations: list[str] = []
    for chat, run in sorted(runs.items()):
        phases = Counter(point["phase"] for point in run["kill_points"])
        if not run["completed"]:
            violations.append(f"{chat}: ended {run['state']} ({run['ended_reason']})")
        if run["given_up_events"]:
            violations.append(f"{chat}: given up")
        if run["model_calls"]["repeated"] > phases["model"]:
            violations.append(f"{chat}: {run['model_calls']['repeated']} model calls repeated")
        if run["tool_bodies"]["repeated"] > phases["tool"]:
            violations.append(f"{chat}: {run['tool_bodies']['repeated']} tool bodies repeated")
    return violations


def _long_summary(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The long runs in figures: how many completed, their kills, what ran again."""
    values = list(runs.values())
    return {
        "runs": len(values),
        "completed": sum(1 for run in values if run["completed"]),
        "kills": sum(run["kills"] for run in values),
        "claims": sum(run["claims"] or 0 for run in values),
        "model_calls_repeated": sum(run["model_calls"]["repeated"] for run in values),
        "tool_bodies_repeated": sum(run["tool_bodies"]["repeated"] for run in values),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--long-runs", type=int, default=10, help="long runs killed mid-way")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--parallel", type=int, default=6)
    parser.add_argument("--skew-ms", type=int, default=10_000, help="largest clock error")
    parser.add_argument(
        "--unclear", type=float, default=0.25, help="share of processes with an unclear write"
    )
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

    import tempfile

    import boto3

    from interlock.adapters.schema import create_storage
    from local.emulator import Emulator

    emulator = Emulator().start()
    session = boto3.session.Session(region_name="us-east-1")
    dynamodb, s3 = (session.client(n, endpoint_url=emulator.endpoint) for n in ("dynamodb", "s3"))
    create_storage(dynamodb, s3, "soak", "soak-data")
    where = Where(emulator.endpoint, "soak", "soak-data")
    chats = [f"soak-{n:04d}" for n in range(args.chats)]
    long_chats = [f"long-{n:03d}" for n in range(args.long_runs)]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        soak = Soak(where, Path(work), seed, args.parallel, args.skew_ms, args.unclear)
        soak.run(chats, long_chats)
        result = check(where, soak.log, chats)
        result["violations"] += check_long(soak.long)
        lines = [json.loads(line) for line in Path(soak.log).read_text().splitlines()]
        told = Counter(
            f"{t['action']}: {t.get('error') or t.get('accepted') or t.get('outcome')}"
            for t in lines
        )
        unclear = Counter(t["fault"] for t in lines if t.get("fault"))
        skews = [t.get("skew_ms", 0) for t in lines if t["action"] != "pause"]
    emulator.stop()
    print(
        json.dumps(
            {
                "seed": seed,
                "chats": args.chats,
                "actions": dict(soak.actions),
                "killed": soak.kills,
                "unclear_answers": dict(sorted(unclear.items())),
                "skew_ms": [min(skews, default=0), max(skews, default=0)],
                "long_runs": _long_summary(soak.long),
                "told": dict(sorted(told.items())),
                "seconds": round(time.monotonic() - started, 1),
                **result,
                "violation_count": len(result["violations"]),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
