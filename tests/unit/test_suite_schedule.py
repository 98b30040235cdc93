"""How `./dev test` shares the suite between its two workers (`tests/conftest.py`)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import group_of

ROOT = Path(__file__).resolve().parents[2]
PASSED = re.compile(r"^\[(gw\d+)\].* PASSED (\S+?)::")


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        (
            "tests/faults/test_crash_matrix.py::test_cell[download-run]",
            "tests/faults/test_crash_matrix.py",
        ),
        ("tests/e2e/test_http.py::test_one", "tests/e2e/test_http.py"),
        ("tests/browser/test_card_page.py::test_one", "browser"),
        ("tests/infra/test_api.py::test_one", "infra"),
        (
            "tests/race/test_event_numbers.py::test_race[3]",
            "tests/race/test_event_numbers.py::test_race[3]",
        ),
        ("tests/test_top.py::test_one", "tests/test_top.py"),
    ],
)
def test_a_test_runs_in_its_files_group_its_tiers_or_alone(nodeid: str, group: str) -> None:
    assert group_of(nodeid) == group


def test_two_workers_keep_each_file_whole() -> None:
    # Given two files of several tests each, run as `./dev test` runs the suite
    files = ["tests/unit/test_questions.py", "tests/unit/test_heartbeat.py"]
    pytest_args = ["-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "-v"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args, "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:]

    # Then every test of a file ran on the same worker
    workers: defaultdict[str, set[str]] = defaultdict(set)
    for line in run.stdout.splitlines():
        if found := PASSED.match(line):
            workers[found.group(2)].add(found.group(1))
    assert sorted(workers) == sorted(files)
    assert all(len(ran_on) == 1 for ran_on in workers.values()), dict(workers)
