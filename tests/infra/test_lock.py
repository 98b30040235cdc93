"""The lock the layer installs: generated from `requirements-layer.txt` for the functions'
platform, every distribution hashed, and what no function imports left out."""

from __future__ import annotations

import re
from pathlib import Path

from infra.agent_lock import compile_command as agent_command
from infra.bundling import requirement_names
from infra.lock import LOCK, NOT_SHIPPED, REQUIREMENTS, compile_command


def _lines(text: str) -> list[str]:
    return text.replace("\\\n", " ").splitlines()


def test_every_pin_of_the_layer_requirements_is_locked_at_its_version() -> None:
    pins = requirement_names(REQUIREMENTS.read_text().splitlines())
    locked = requirement_names(_lines(LOCK.read_text()))

    assert pins, "requirements-layer.txt pins something"
    mismatched = {name: (v, locked.get(name)) for name, v in pins.items() if locked.get(name) != v}
    assert mismatched == {}, "run `.venv/bin/python -m infra.lock` after changing a pin"


def test_the_lock_was_written_by_todays_command() -> None:
    # uv records the command in the header: the platform, the runtime's version, hashes
    # and the packages left out are all the ones `infra.lock` asks for now.
    header = LOCK.read_text().splitlines()[1].strip("# ")
    assert header == " ".join(["uv", *compile_command("uv")[1:]])


def test_every_locked_distribution_is_hashed_and_none_is_left_out_wrongly() -> None:
    entries = [line for line in _lines(LOCK.read_text()) if re.match(r"^[A-Za-z0-9]", line)]
    assert entries and all("--hash=sha256:" in line for line in entries)
    locked = requirement_names(entries)
    assert not set(locked) & set(NOT_SHIPPED)
    pins = requirement_names(REQUIREMENTS.read_text().splitlines())
    assert not set(pins) & set(NOT_SHIPPED), "a pinned requirement is imported by definition"


def test_the_agents_lock_is_compiled_for_the_same_platform_as_interlocks() -> None:
    # The agent's layer is unpacked over Interlock's on the same functions: the same
    # platform, Python and wheels-only resolution, with Interlock's lock as constraints.
    agent = agent_command("uv", Path("requirements.txt"), Path("agent.lock"))
    ours = compile_command("uv")
    for option in ("--python-platform", "--python-version", "--only-binary"):
        assert agent[agent.index(option) + 1] == ours[ours.index(option) + 1], option
    assert {"--generate-hashes", "--no-python-downloads"} <= set(agent)
    assert agent[agent.index("--constraint") + 1] == str(LOCK)
