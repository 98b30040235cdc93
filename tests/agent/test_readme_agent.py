"""The docs' own example agent (docs/agents.md), run exactly as a user would write it."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.adapters.factory import Stores
from interlock.agent import Scenario, ScriptedModel, load_factory
from interlock.resume import resume_turn
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, run_turn

AGENTS = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
SUPPORT = Caller("sam", frozenset({"support"}))
# A scripted stand-in choosing what a model would: close one account, then report.
SCRIPT = [
    Scenario(
        "close",
        [
            lambda results: [{"tool": "close_account", "input": {"account": "acct-9"}}],
            lambda results: [{"text": " ".join(results)}],
        ],
    )
]


@pytest.fixture
def readme_agent(tmp_path: Path) -> Iterator[str]:
    text = AGENTS.read_text()
    section = text[text.index("# Use it with your agent") :]
    source = re.search(r"```python\n# my_agent\.py\n(.*?)```", section, re.S)
    assert source is not None, "the section opens with the example module"
    assert len(source.group(1).splitlines()) <= 25, "the example stays about 20 lines"
    (tmp_path / "readme_agent.py").write_text(source.group(1))
    sys.path.insert(0, str(tmp_path))
    try:
        yield "readme_agent:build"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("readme_agent", None)


def test_the_readme_agent_confirms_asks_and_acts_once(
    readme_agent: str, stores: Stores, clock: ManualClock
) -> None:
    rt = Runtime(
        stores, lambda: ScriptedModel(SCRIPT), clock=clock, agent=load_factory(readme_agent)
    )
    chat = "readme-chat"

    # The HumanInTheLoop confirmation is the first card
    paused = run_turn(rt, SUPPORT, chat, "close acct-9")
    assert paused.offer is not None
    confirm = paused.offer.request
    assert (confirm.card["type"], confirm.card["tool"]) == ("confirm", "close_account")

    # Approving it runs the tool, whose own question is the next card
    asked = resume_turn(
        rt,
        SUPPORT,
        chat,
        interrupt_id=confirm.interrupt_id,
        secret=paused.offer.secret,
        status="resolved",
        payload={"decision": "approve"},
    )
    assert asked.offer is not None
    question = asked.offer.request
    assert (question.card["type"], question.card["reason"]) == ("interrupt", "Why close acct-9?")

    # Answering it closes the account once; a second answer replays
    done = resume_turn(
        rt,
        SUPPORT,
        chat,
        interrupt_id=question.interrupt_id,
        secret=asked.offer.secret,
        status="resolved",
        payload="customer request",
    )
    assert done.outcome == "completed"
    assert "Closed acct-9: customer request" in (done.text or "")
    key = f"{chat}#{question.card['tool_use_id']}"
    assert stores.outbox.get(key) == {"close": "acct-9", "reason": "customer request"}
    again = resume_turn(
        rt,
        SUPPORT,
        chat,
        interrupt_id=question.interrupt_id,
        secret=asked.offer.secret,
        status="resolved",
        payload="customer request",
    )
    assert (again.outcome, again.text) == ("replayed", done.text)
