"""Local state is kept per agent, and one server at a time keeps it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from interlock.config import DEFAULT_AGENT
from local.persist import KEY_FILE, STATE_FILE, StateBusy, adopt_shared_state, hold_state
from local.server import STATE_DIR, state_directory


def test_each_agent_served_from_a_checkout_has_a_directory_of_its_own(tmp_path: Path) -> None:
    demo = state_directory(DEFAULT_AGENT, tmp_path)
    mine = state_directory("my_agent:build", tmp_path)

    assert demo != mine
    assert (demo.parent, mine.parent) == (tmp_path / STATE_DIR, tmp_path / STATE_DIR)
    assert mine.name == "my_agent-build"
    # Nothing an agent's name holds leads out of `.interlock/`
    assert state_directory("../../etc:passwd", tmp_path).parent == tmp_path / STATE_DIR


def test_a_second_holder_of_a_state_directory_is_refused_naming_the_first(
    tmp_path: Path,
) -> None:
    first = hold_state(tmp_path)
    try:
        with pytest.raises(StateBusy, match=rf"another server \(pid {os.getpid()}\) is serving"):
            hold_state(tmp_path)
    finally:
        os.close(first)
    # Once the first is gone (a process that ends, however, closes it), it is free
    os.close(hold_state(tmp_path))


def test_the_state_an_earlier_version_shared_is_adopted_once(tmp_path: Path) -> None:
    shared, own = tmp_path / STATE_DIR, tmp_path / STATE_DIR / "examples.analyst-build"
    shared.mkdir()
    (shared / STATE_FILE).write_text('{"items": [], "objects": {}}')
    (shared / KEY_FILE).write_text("ab" * 32)

    assert adopt_shared_state(shared, own)
    assert (own / STATE_FILE).is_file() and (own / KEY_FILE).read_text() == "ab" * 32
    assert not (shared / STATE_FILE).exists()
    # Never over a state of its own
    (shared / STATE_FILE).write_text("{}")
    assert not adopt_shared_state(shared, own)
    assert (own / STATE_FILE).read_text() != "{}"
