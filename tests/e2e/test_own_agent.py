"""A team's own agent, brought through the public surface only, resumed exactly once.

The agent below is written by the test as a module of its own, the way a team would
write theirs: it imports `strands` and `interlock.agent`, nothing else of Interlock. One
of its tools asks inside its body (`tool_context.interrupt`, with an answer schema);
another is guarded by the vended `HumanInTheLoop` intervention. The script calls both
in one batch, so the run pauses once on two interrupts, answered in one resume.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlock import errors
from interlock.adapters.factory import Stores
from interlock.agent import load_factory
from interlock.answers import Reply
from interlock.config import InterlockConfig
from interlock.outcomes import TurnResult
from interlock.records import RequestState
from interlock.resume import resume_replies
from interlock.turns import Runtime, TurnLimits, run_turn
from tests.e2e.support import ALICE, TIMEOUT_S, finished_by, outbox_records, pointer
from tests.e2e.test_processes import CRASH_LEASE, Lab, wait_for_lapse
from tests.e2e.test_resume_race import RACE_LIMITS, RACERS, all_at_once

pytestmark = pytest.mark.server

MODULE = "restock_agent"
AGENT_SOURCE = textwrap.dedent(
    '''
    """Restocking: order a part (asks which supplier), flush a cache (asks to confirm)."""

    from strands import ToolContext, tool
    from strands.vended_interventions.hitl import HumanInTheLoop

    from interlock.agent import AgentInputs, AgentSpec, Scenario, send_once

    SUPPLIER_SCHEMA = {
        "type": "object",
        "properties": {"supplier": {"enum": ["acme", "globex"]}},
        "required": ["supplier"],
        "additionalProperties": False,
    }


    @tool(context=True)
    def order_part(part: str, tool_context: ToolContext) -> str:
        """Order a spare part from the supplier the user picks."""
        picked = tool_context.interrupt(
            "pick-supplier",
            reason={"message": f"Which supplier for {part}?", "response_schema": SUPPLIER_SCHEMA},
        )
        if not isinstance(picked, dict) or "supplier" not in picked:
            return f"No supplier picked; {part} not ordered."
        if send_once(tool_context, {"order": part, "supplier": picked["supplier"]}):
            return f"Ordered {part} from {picked['supplier']}."
        return f"{part} was already ordered; not ordering it twice."


    @tool(context=True)
    def flush_cache(region: str, tool_context: ToolContext) -> str:
        """Flush the stock cache of one region."""
        if send_once(tool_context, {"flush": region}):
            return f"Flushed {region}."
        return f"{region} was already flushed; not flushing it twice."


    @tool
    def stock_level(part: str) -> str:
        """How many of a part are in stock."""
        return f"{part}: 0 in stock"


    def _both(results):
        return [
            {"text": "Ordering the valve and flushing the cache."},
            {"tool": "order_part", "input": {"part": "valve"}},
            {"tool": "flush_cache", "input": {"region": "eu-west"}},
        ]


    def _report(results):
        return [{"text": "Restocked. " + " ".join(results)}]


    SCRIPT = [Scenario("restock", [_both, _report], keywords=("restock",))]


    def build(inputs: AgentInputs) -> AgentSpec:
        return AgentSpec(
            tools=[order_part, flush_cache, stock_level],
            system_prompt="You restock the workshop.",
            model=inputs.model(scripted=SCRIPT),
            interventions=[HumanInTheLoop(allowed_tools=["order_part", "stock_level"])],
        )
    '''
)
PAYLOADS = {"pick-supplier": {"supplier": "acme"}, "*": {"decision": "approve"}}
DONE_TEXT = ("Ordered valve from acme.", "Flushed eu-west.")


@pytest.fixture
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    where = tmp_path_factory.mktemp("own-agent")
    (where / f"{MODULE}.py").write_text(AGENT_SOURCE)
    sys.path.insert(0, str(where))
    try:
        yield where
    finally:
        sys.path.remove(str(where))
        sys.modules.pop(MODULE, None)


def own_runtime(stores: Stores, worker: str, limits: TurnLimits | None = None) -> Runtime:
    return Runtime(
        stores,
        lambda: pytest.fail("the agent plays its own script"),
        limits=limits or TurnLimits(),
        worker_id=worker,
        agent=load_factory(f"{MODULE}:build"),
        config=InterlockConfig(model="scripted"),
    )


def replies(result: TurnResult) -> list[Reply]:
    assert result.offer is not None, result
    return [
        Reply(a.interrupt_id, "resolved", PAYLOADS.get(a.card["interrupt_name"], PAYLOADS["*"]))
        for a in result.offer.request.asked
    ]


def answer_all(rt: Runtime, chat: str, given: list[Reply], secret: str) -> TurnResult:
    return resume_replies(rt, ALICE, chat, secret=secret, replies=given)


def assert_each_effect_once(aws: dict[str, Any], chat: str) -> None:
    payloads = sorted(
        json.dumps(json.loads(item["payload"]["S"]), sort_keys=True)
        for item in outbox_records(aws)
        if item["pk"]["S"].startswith(f"OUTBOX#{chat}#")
    )
    assert payloads == [
        json.dumps({"flush": "eu-west"}),
        json.dumps({"order": "valve", "supplier": "acme"}, sort_keys=True),
    ]


def test_the_pause_holds_both_cards_with_their_own_shapes(
    agent_dir: Path, server_stores: Stores
) -> None:
    paused = run_turn(own_runtime(server_stores, "A"), ALICE, "own-cards", "restock please")

    assert paused.offer is not None
    cards = {a.card["interrupt_name"]: a.card for a in paused.offer.request.asked}
    assert set(cards) == {"pick-supplier", "strands:human-in-the-loop"}
    supplier, confirm = cards["pick-supplier"], cards["strands:human-in-the-loop"]
    assert (supplier["type"], supplier["tool"], supplier["reason"]) == (
        "interrupt",
        "order_part",
        "Which supplier for valve?",
    )
    assert supplier["schema"]["properties"]["supplier"]["enum"] == ["acme", "globex"]
    assert (confirm["type"], confirm["tool"], confirm["summary"]) == (
        "confirm",
        "flush_cache",
        {"region": "eu-west"},
    )


def test_own_agent_pauses_in_one_process_and_resumes_once_in_another(
    agent_dir: Path, server_aws: dict[str, Any], server_stores: Stores, tmp_path: Path
) -> None:
    lab = Lab(server_aws, tmp_path, chat="own-two")
    own = ("--agent", f"{MODULE}:build", "--path", str(agent_dir))
    try:
        # Given process A ran the turn until it paused on both interrupts, and exited
        lab.run("pause", "A", "--prompt", "restock please", *own)
        offer = json.loads((tmp_path / "offer.json").read_text())
        assert len(offer["asked"]) == 2

        # When process B, holding nothing but the store, answers both, then again
        lab.run("resume", "B", *own, "--payloads", json.dumps(PAYLOADS))
        b = json.loads((tmp_path / "B.json").read_text())
    finally:
        lab.kill_all()

    # Then B completed the run with both effects, and its second answer replayed it
    first, again = b["first"], b["again"]
    assert first["outcome"] == "completed"
    assert all(part in first["text"] for part in DONE_TEXT), first["text"]
    assert (again["outcome"], again["text"]) == ("replayed", first["text"])
    request = pointer(server_stores, lab.chat)
    assert (request.state, request.claim_count, finished_by(server_stores, lab.chat)) == (
        RequestState.DONE,
        1,
        "B",
    )
    assert_each_effect_once(server_aws, lab.chat)


def test_own_agent_killed_after_its_effect_is_taken_over_without_repeating_it(
    agent_dir: Path, server_aws: dict[str, Any], server_stores: Stores, tmp_path: Path
) -> None:
    lab = Lab(server_aws, tmp_path, chat="own-crash")
    own = ("--agent", f"{MODULE}:build", "--path", str(agent_dir), "--payloads")
    own += (json.dumps(PAYLOADS), *CRASH_LEASE)
    try:
        lab.run("pause", "A", "--prompt", "restock please", *own)
        # Given B claimed the request and stopped dead right after its first effect
        b = lab.start("resume", "B", "--hang", "outbox", *own)
        lab.wait_until_hung(b, "B")
        assert pointer(server_stores, lab.chat).state is RequestState.CLAIMED

        # When B is killed, its lease lapses, and C answers with the same secret
        b.kill()
        b.wait(timeout=TIMEOUT_S)
        wait_for_lapse(server_stores, lab.chat)
        lab.run("resume", "C", *own)
        c = json.loads((tmp_path / "C.json").read_text())
    finally:
        lab.kill_all()

    # Then C finished on a second claim and every effect happened exactly once
    assert c["first"]["outcome"] == "completed", c
    request = pointer(server_stores, lab.chat)
    assert (request.state, request.claim_count, finished_by(server_stores, lab.chat)) == (
        RequestState.DONE,
        2,
        "C",
    )
    assert_each_effect_once(server_aws, lab.chat)


def test_sixteen_answers_to_own_agent_at_once_run_it_once(
    agent_dir: Path, server_aws: dict[str, Any], server_stores: Stores
) -> None:
    chat = "own-race"
    paused = run_turn(own_runtime(server_stores, "pauser"), ALICE, chat, "restock please")
    assert paused.offer is not None
    given, secret = replies(paused), paused.offer.secret

    outcomes = all_at_once(
        RACERS,
        lambda n: answer_all(own_runtime(server_stores, f"w{n}", RACE_LIMITS), chat, given, secret),
    )

    completed = [o for o in outcomes if isinstance(o, TurnResult) and o.outcome == "completed"]
    assert len(completed) == 1, outcomes
    others = [o for o in outcomes if o is not completed[0]]
    assert all(
        (isinstance(o, TurnResult) and o.outcome == "replayed")
        or isinstance(o, errors.ResumeInProgress)
        for o in others
    ), others
    request = pointer(server_stores, chat)
    assert (request.state, request.claim_count) == (RequestState.DONE, 1)
    assert_each_effect_once(server_aws, chat)
