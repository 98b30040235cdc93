"""A single-threaded process that imported Strands, boto3 and Interlock once, and forks
one child per phase it is sent: real processes (a SIGKILL ends one for real) that start
in milliseconds instead of the seconds a fresh interpreter takes.

Protocol, one JSON object per line: a `CellSpec` in on stdin; `{"exit": code}` out on
stdout once the child has ended (`code` is -9 for a child killed by SIGKILL).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from tests.faults.cell import CellSpec, child_main  # noqa: E402


def main() -> int:
    for line in sys.stdin:
        spec = CellSpec(**json.loads(line))
        pid = os.fork()
        if pid == 0:
            os.dup2(2, 1)  # the child's prints must not mix with the protocol on stdout
            code = 0
            try:
                child_main(spec)
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
    sys.exit(main())
