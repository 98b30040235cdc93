"""A single-threaded process that imported a child module (and through it Strands, boto3
and Interlock) once, and forks one child per spec it is sent: real processes (a SIGKILL
ends one for real) that start in milliseconds instead of the second or more a fresh
interpreter takes.

Run as `python -m tests.faults.zygote <module>`; `Zygote` drives one from a test.
Protocol, one JSON object per line: a spec in on stdin, which the child hands to the
module's `child_main`; `{"exit": code}` out on stdout once the child has ended (`code`
is -9 for a child killed by SIGKILL).
"""

from __future__ import annotations

import importlib
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class Zygote:
    """A forking process for `module`, driven over pipes; its children's output goes to
    `log`."""

    def __init__(self, module: str, log: Path, timeout_s: float = 60) -> None:
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        self.log = log
        self._timeout_s = timeout_s
        self._log = log.open("ab")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.zygote", module],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )

    def run(self, spec: dict[str, Any]) -> int:
        """Fork a child for `spec`, wait for it; its exit code (-9: SIGKILLed)."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write((json.dumps(spec) + "\n").encode())
        self._process.stdin.flush()
        ready, _, _ = select.select([self._process.stdout], [], [], self._timeout_s)
        assert ready, f"a child of {spec} hung"
        return int(json.loads(self._process.stdout.readline())["exit"])

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._log.close()


def main(module_name: str) -> int:
    sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]
    module = importlib.import_module(module_name)
    for line in sys.stdin:
        spec = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os.dup2(2, 1)  # the child's prints must not mix with the protocol on stdout
            code = 0
            try:
                module.child_main(spec)
            except BaseException:  # report, then leave without running the parent's exit hooks
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"exit": code}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
