"""`./dev serve` with a wrong setting says what to fix in one line, before it starts
anything (no emulator, no agent import), and exits; it never prints a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--agent", "nope.module:build"], {}, "no module 'nope.module' for the agent"),
        (["--agent", "examples.analyst"], {}, "an agent is named 'package.module:factory'"),
        (["--agent", "examples.analyst:no_such_factory"], {}, "cannot be loaded"),
        ([], {"INTERLOCK_MODEL": "bedrock:"}, "name a model after 'bedrock:'"),
        ([], {"INTERLOCK_MODEL": "gpt"}, "must be 'scripted', 'tools', 'bedrock[:id]' or 'openai:"),
    ],
)
def test_a_wrong_setting_is_one_line_and_no_traceback(
    args: list[str], env: dict[str, str], says: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "local.server", "--port", "0", "--state", str(tmp_path), *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interlock: "), done.stderr
    assert says in lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""
