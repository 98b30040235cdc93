"""A misspelt `INTERLOCK_*` variable is named, with the closest known one, instead of
being silently ignored; a malformed behaviour setting names the variable it came from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.bundling import PYTHON_VARIABLE
from interlock.config import assemble, known_variables, unknown_variables
from interlock.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[2]
# Where Interlock itself reads its variables (tests set misspelt ones on purpose).
READERS = ("shared", "local", "infra", "functions", "examples", "bench")


@pytest.mark.parametrize(
    ("name", "line"),
    [
        (
            "INTERLOCK_FECTH",
            "INTERLOCK_FECTH is not a setting Interlock reads; did you mean INTERLOCK_FETCH?",
        ),
        ("INTERLOCK_REQUEST_TTL", "; did you mean INTERLOCK_REQUEST_TTL_S?"),
        ("INTERLOCK_MODLE", "; did you mean INTERLOCK_MODEL?"),
        ("INTERLOCK_COLOUR", "INTERLOCK_COLOUR is not a setting Interlock reads"),
    ],
)
def test_an_unknown_variable_is_one_line_naming_the_closest_known_one(name: str, line: str) -> None:
    (said,) = unknown_variables({name: "x", "INTERLOCK_MODEL": "tools", "HOME": "/"})
    assert line in said
    if "did you mean" not in line:
        assert "did you mean" not in said


def test_every_variable_interlock_reads_is_known() -> None:
    named = {
        found
        for where in READERS
        for path in (ROOT / where).rglob("*.py")
        for found in re.findall(r"\bINTERLOCK_[A-Z][A-Z0-9_]*\b", path.read_text())
    }
    named |= set(re.findall(r"\bINTERLOCK_[A-Z][A-Z0-9_]*\b", (ROOT / "dev").read_text()))
    assert PYTHON_VARIABLE in known_variables()
    assert sorted(named - known_variables()) == []
    assert unknown_variables(dict.fromkeys(known_variables(), "x")) == []


def test_a_malformed_behaviour_setting_names_its_variable_and_value() -> None:
    with pytest.raises(InvalidInput, match=re.escape("(from INTERLOCK_REQUEST_TTL_S='abc')")):
        assemble({"INTERLOCK_REQUEST_TTL_S": "abc"})
    # A value the per-agent document set is not blamed on the variable it overrode
    with pytest.raises(InvalidInput) as refused:
        assemble({"INTERLOCK_LEASE_MS": "5000"}, {"lease_ms": 1})
    assert "INTERLOCK_LEASE_MS" not in str(refused.value)
