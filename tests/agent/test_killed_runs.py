"""A long run whose worker dies mid-way, again and again, goes on to its end as long as
each of its workers moved it on: the retry cap counts only claims that added nothing to
the journal (`records.given_up`). A run that keeps dying without moving on is still
given up, and then says so on every surface: its request view, its channel card and
its trail, never "Approved by …" for what was never carried through.

A worker's death is `WorkerDied`, raised from inside the model call it died in: a
`BaseException`, so, as with a SIGKILL, no failure path of the run handles it (no
release, no event); its lease is left to lapse. `bench/killed_run.py` kills real
processes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from strands import tool

from interlock import errors
from interlock.agent import AgentInputs, AgentSpec, Scenario, request_approval
from interlock.api.views import request_view
from interlock.channels import Link, Tap
from interlock.config import InterlockConfig
from interlock.notify import Notifier
from interlock.ports import Stores
from interlock.records import TOO_MANY_CLAIMS, RequestRecord, RequestState
from interlock.resume import resume_turn
from interlock.sweeper import sweep
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, TurnLimits, run_turn

CHAT = "chat-killed"
PARTS = 8
# Past a dead worker's lease, the recovery's grace and any clock margin a taker keeps.
LATER_S = 300


class WorkerDied(BaseException):
    """The worker's process ends here: nothing after it runs."""


@dataclass
class Plan:
    """A run of `PARTS` steps after a person approved it (Interlock's own approval card,
    whose answer is not a journal step), each a model call that builds one part; the
    model call for each step in `kill_at` kills its worker the first time it is made,
    and the one for `kill_always` every time."""

    kill_at: frozenset[int] = frozenset()
    kill_always: int | None = None
    calls: Counter[int] = field(default_factory=Counter)
    bodies: Counter[int] = field(default_factory=Counter)
    kills: int = 0

    def step(self, k: int) -> Any:
        def play(results: list[str]) -> list[dict[str, Any]]:
            self.calls[k] += 1
            if (k in self.kill_at and self.calls[k] == 1) or k == self.kill_always:
                self.kills += 1
                raise WorkerDied(f"killed while the model answered step {k}")
            if k == 0:
                reason = "Build the parts with partkit."
                return [
                    {
                        "tool": "request_approval",
                        "input": {"reason": reason, "packages": ["partkit"]},
                    }
                ]
            if k <= PARTS:
                return [{"text": f"Part {k}."}, {"tool": "build_part", "input": {"n": k}}]
            return [{"text": f"All {PARTS} parts built."}]

        return play

    def build(self, inputs: AgentInputs) -> AgentSpec:
        bodies = self.bodies

        @tool
        def build_part(n: int) -> str:
            """Build part n."""
            bodies[n] += 1
            return f"part {n} built"

        script = [Scenario("parts", [self.step(k) for k in range(PARTS + 2)])]
        return AgentSpec(
            tools=[request_approval, build_part],
            system_prompt="You build parts.",
            model=inputs.model(scripted=script),
        )

    @property
    def repeated_calls(self) -> int:
        return sum(n - 1 for n in self.calls.values())


@dataclass
class Platform:
    """A chat platform that records the cards posted and how they were edited."""

    posts: list[str] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)

    def post(self, link: Link, request: RequestRecord, page_url: str | None) -> dict[str, Any]:
        self.posts.append(request.interrupt_id)
        return {"ts": f"m{len(self.posts)}"}

    def settle(self, ref: dict[str, Any], text: str) -> None:
        self.edits.append(text)

    def tell(self, tap: Tap, text: str) -> None:
        return None


def _runtime(stores: Stores, clock: ManualClock, plan: Plan, platform: Platform) -> Runtime:
    stores.channels.link(Link("slack", "U-ALICE", "alice"), "root", clock.now_ms())
    notifier = Notifier(
        stores.channels,
        {"slack": platform},  # type: ignore[dict-item]
        clock.now_ms,
        requests=stores.requests,
    )
    return Runtime(
        stores,
        lambda: None,  # type: ignore[arg-type, return-value]
        clock=clock,
        agent=plan.build,
        config=InterlockConfig(model="scripted"),
        limits=TurnLimits(heartbeat_s=60),
        worker_id="worker-1",
        notifier=notifier,
    )


def _go_on(rt: Runtime, alice: Caller, way: str, secret: str, interrupt_id: str) -> Any:
    """The dead worker's run continued: by the sweeper's recovery, by its settling of
    an overdue request (once past the request's expiry), or by the person answering
    again (the same answer: a takeover)."""
    if way == "overdue":
        request = rt.stores.requests.get(CHAT, rt.clock.now_ms())
        if request is not None and not request.is_past_expiry(rt.clock.now_ms()):
            clock = rt.clock
            assert isinstance(clock, ManualClock)
            clock.advance(ms=request.expires_at * 1000 - clock.now_ms() + LATER_S * 1000)
    if way in ("sweeper", "overdue"):
        return sweep(rt, rt.clock.now_ms())
    return resume_turn(
        rt,
        alice,
        CHAT,
        interrupt_id=interrupt_id,
        secret=secret,
        status="resolved",
        payload={"decision": "approve"},
    )


def _approved_then_continued(
    rt: Runtime, alice: Caller, clock: ManualClock, way: str, attempts: int
) -> tuple[str, str]:
    """Pause, approve (the first worker), and continue `way` up to `attempts` times,
    each worker dying as the plan says; returns the interrupt id and secret."""
    paused = run_turn(rt, alice, CHAT, "build the parts")
    assert paused.offer is not None
    interrupt_id, secret = paused.offer.request.interrupt_id, paused.offer.secret
    with pytest.raises(WorkerDied):
        _go_on(rt, alice, "person", secret, interrupt_id)
    for _ in range(attempts):
        clock.advance(seconds=LATER_S)
        try:
            _go_on(rt, alice, way, secret, interrupt_id)
        except (WorkerDied, errors.RequestExpired):
            continue
        else:
            break
    return interrupt_id, secret


@pytest.mark.parametrize("way", ["sweeper", "overdue", "person"])
@pytest.mark.parametrize("kill_at", [(3, 5, 7), (2, 3, 4, 5, 6)], ids=["3-kills", "5-kills"])
def test_a_long_run_killed_mid_way_again_and_again_completes_with_its_effects_once(
    stores: Stores, clock: ManualClock, alice: Caller, way: str, kill_at: tuple[int, ...]
) -> None:
    # Given a run of 8 steps whose worker is killed at each of these steps, more times
    # than the retry cap allows claims that add nothing (3)
    plan, platform = Plan(kill_at=frozenset(kill_at)), Platform()
    rt = _runtime(stores, clock, plan, platform)
    assert len(kill_at) >= stores.policy.max_claims

    # When the person approves and each dead worker's run is continued
    _approved_then_continued(rt, alice, clock, way, attempts=len(kill_at) + 1)

    # Then the run went to its end, on the approval, through every kill
    assert plan.kills == len(kill_at)
    done = stores.requests.get(CHAT, clock.now_ms())
    assert done is not None
    assert (done.state, done.decision) == (RequestState.DONE, "approved"), done.ended_reason
    assert done.claim_count == 1 + len(kill_at)
    assert stores.chats.turns(CHAT)[-1]["text"] == f"All {PARTS} parts built."
    # And every part was built exactly once: the takeovers replayed the journal
    assert plan.bodies == Counter(range(1, PARTS + 1))
    # And the only model calls made again are the ones each worker died in
    assert plan.repeated_calls == plan.kills
    assert all(plan.calls[k] == 1 + (k in kill_at) for k in range(PARTS + 2))
    # And nothing on the trail or the card says it was given up
    assert not [e for e in stores.chats.events(CHAT, limit=1000) if e.type == "given_up"]
    (edited,) = platform.edits  # once, when it ended: carried through, as approved
    assert edited.splitlines()[-1].startswith("Approved ")


@pytest.mark.parametrize("way", ["sweeper", "overdue", "person"])
def test_a_run_that_keeps_dying_without_moving_on_is_given_up_and_says_so_everywhere(
    stores: Stores, clock: ManualClock, alice: Caller, way: str
) -> None:
    # Given a run whose worker dies every time it asks the model for its first part
    plan, platform = Plan(kill_always=1), Platform()
    rt = _runtime(stores, clock, plan, platform)
    cap = stores.policy.max_claims

    # When the person approves and the run is continued again and again
    _approved_then_continued(rt, alice, clock, way, attempts=cap + 2)

    # Then, after the cap's worth of claims that added nothing, it is given up instead
    # of being claimed once more
    ended = stores.requests.get(CHAT, clock.now_ms())
    assert ended is not None and ended.state is RequestState.EXPIRED
    assert ended.ended_reason == TOO_MANY_CLAIMS
    assert ended.claim_count == cap and plan.kills == cap
    assert ended.decision == "approved", "the answer stays recorded, as history"
    assert not plan.bodies, "no part was ever built"

    # And the request view says it was given up, not approved
    view = request_view(ended, clock.now_ms(), None)
    assert (view["state"], view["decision"]) == ("expired", "given_up")
    assert view["decided"].startswith("Given up (too many attempts in a row")
    assert "(Approved by alice at " in view["decided"]
    assert view["decided"].endswith("was never carried out")
    assert view["endedReason"] == TOO_MANY_CLAIMS

    # And its card in the channel was edited to say so, never "Approved by …"
    assert platform.posts and platform.edits
    outcomes = [text.splitlines()[-1] for text in platform.edits]  # under the card's title
    assert outcomes[-1].startswith("Given up at ") and "too many attempts" in outcomes[-1]
    assert not any(outcome.startswith("Approved") for outcome in outcomes)

    # And the trail holds the give-up, with its reason, once
    given_up = [e for e in stores.chats.events(CHAT, limit=1000) if e.type == "given_up"]
    assert len(given_up) == 1
    assert given_up[0].detail["reason"] == TOO_MANY_CLAIMS
    assert given_up[0].detail["decision"] == "approved"

    # And an answer that comes later hears it was given up
    with pytest.raises(errors.RequestExpired, match="given up"):
        _go_on(rt, alice, "person", "any", ended.interrupt_id)
