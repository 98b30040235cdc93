"""Every collected test is reported: a run whose outcomes do not add up to what it
collected fails.

Under the suite's workers (pytest-xdist), tests that share one node id all run but are
reported once, so a run could collect fifteen fuzzing cases, report one, and still say
"passed". `Tally` counts what the run collected and each test's one outcome (passed,
failed, skipped, xfailed, xpassed, or an error before its call) and fails a completed
run in which the two differ, naming the difference. A run stopped early (`-x`, an
interrupt) or one that only collects is not judged; nor is a worker's share.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest


def outcomes_missing(collected: int, reported: Sequence[str]) -> str | None:
    """Why the outcomes do not add up to the collected tests, or None when they do."""
    if len(reported) == collected:
        return None
    repeated = sorted({nodeid for nodeid in reported if reported.count(nodeid) > 1})
    shown = f"; reported more than once: {repeated[:5]}" if repeated else ""
    return f"collected {collected} tests but {len(reported)} outcomes were reported{shown}"


class Tally:
    """What one run collected and what it reported."""

    def __init__(self) -> None:
        self.collected: int | None = None
        self.reported: list[str] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: Sequence[str]) -> None:
        # With workers the controller collects nothing itself; every worker collects
        # the same list and says so.
        self.collected = len(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A test's outcome is its call's, or its setup's when the call never ran.
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.reported.append(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        judged = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        if self.collected is None or session.shouldstop or exitstatus not in judged:
            return
        if problem := outcomes_missing(self.collected, self.reported):
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"not every collected test was reported: {problem}", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def register(config: pytest.Config) -> None:
    """Count this run, unless it is a worker's share of one or only collects."""
    if not hasattr(config, "workerinput") and not config.option.collectonly:
        config.pluginmanager.register(Tally(), "interlock-tally")


pytest_configure = register  # loaded by name (`-p tests.reporting`), it registers itself
