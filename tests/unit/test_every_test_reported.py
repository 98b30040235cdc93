"""A run whose outcomes do not add up to what it collected fails (`tests/reporting.py`),
under the suite's two workers as without them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reporting import outcomes_missing

ROOT = Path(__file__).resolve().parents[2]
PYTEST = (sys.executable, "-m", "pytest", "-p", "tests.reporting", "-p", "no:cacheprovider", "-q")
TESTS = """
import pytest

@pytest.mark.parametrize("n", range(4))
def test_case(n):
    assert n < 4

def test_skipped():
    pytest.skip("on purpose")
"""
# Three cases under one node id, as a generator that names none of them collects them. A
# scheduler that keeps its work by node id (xdist's by scope, as the suite's own) runs
# one of them, and the run would still say "passed".
SHARED_IDS = """
import pytest

class Case(pytest.Item):
    def runtest(self):
        pass

class Cases(pytest.File):
    def collect(self):
        for _ in range(3):
            yield Case.from_parent(self, name="case")

def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".cases":
        return Cases.from_parent(parent, path=file_path)
"""


def _run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [*PYTEST, "-c", os.devnull, "--rootdir", str(tmp_path), *options, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "two workers"])
def test_a_run_that_reports_each_collected_test_passes(tmp_path: Path, workers: list[str]) -> None:
    (tmp_path / "test_cases.py").write_text(TESTS)
    done = _run(tmp_path, *workers)
    assert done.returncode == 0, done.stdout
    assert "not every collected test was reported" not in done.stdout


def test_cases_sharing_one_id_under_workers_fail_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_cases.py").write_text(TESTS)
    (tmp_path / "generated.cases").write_text("")
    (tmp_path / "conftest.py").write_text(SHARED_IDS)
    done = _run(tmp_path, "-n", "2", "--dist", "loadscope")
    assert done.returncode == 1, done.stdout
    assert "not every collected test was reported: collected 8 tests" in done.stdout


def test_the_count_names_what_was_reported_twice() -> None:
    assert outcomes_missing(2, ["a", "b"]) is None
    assert outcomes_missing(3, ["a", "a"]) == (
        "collected 3 tests but 2 outcomes were reported; reported more than once: ['a']"
    )
