"""The egress rules and the body bounds give the same answers on every Python this
machine has (3.11, 3.12, 3.13 where installed): each interpreter classifies the same
addresses, URLs and hostile bodies in a child process, and the answers must match the
suite's own interpreter's."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

from tests.unit.test_egress import REFUSED_URLS
from tests.unit.test_transport import CLASSES

ROOT: Final = Path(__file__).resolve().parents[2]
VERSIONS: Final = ("3.11", "3.12", "3.13")
ADDRESSES: Final = [
    *CLASSES.values(),
    "192.0.0.192",
    "192.0.0.9",
    "3fff::1",
    "5f00::1",
    "2001:db8::1",
    "93.184.216.34",
    "2606:2800:220:1::1",
    "64:ff9b::5db8:d822",
]
URLS: Final = [
    *REFUSED_URLS,
    "https://Example.org/data.csv?token=abc#frag",
    "https://bücher.example/x",
]
BODIES: Final = [
    "[" * 1000 + "]" * 1000,
    '{"n": ' + "9" * 5000 + "}",
    '{"x": NaN}',
    '{"t": "\\ud800"}',
    '{"a": "ok"}',
    "not json",
    " " * 300_000,
]
# Run in each interpreter, with only the standard library and Interlock's own modules.
PROBE: Final = """
import ipaddress, json, sys
from interlock.harness.transport import refusal
from interlock.egress import safe_url
from interlock.api.bodies import bounded_json
cases = json.loads(sys.stdin.read())
def outcome(call, value):
    try:
        return ["ok", call(value)]
    except Exception as exc:
        return ["refused", type(exc).__name__]
print(json.dumps({
    "addresses": [refusal(ipaddress.ip_address(a)) is not None for a in cases["addresses"]],
    "urls": [outcome(lambda u: safe_url(u).url, u) for u in cases["urls"]],
    "bodies": [outcome(bounded_json, b)[0] + ":" + str(outcome(bounded_json, b)[1])[:40]
               for b in cases["bodies"]],
}))
"""


def interpreters() -> dict[str, str]:
    """Each of 3.11, 3.12 and 3.13 this machine has that runs: on PATH, or pyenv's."""
    found: dict[str, str] = {}
    for version in VERSIONS:
        candidates = [shutil.which(f"python{version}") or ""]
        candidates += sorted(
            glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python3"))
        )
        for candidate in filter(None, candidates):
            probe = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version)"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            if probe.returncode == 0 and probe.stdout.startswith(version):
                found[version] = candidate
                break
    return found


def answers(python: str) -> dict[str, list[object]]:
    cases = {"addresses": ADDRESSES, "urls": URLS, "bodies": BODIES}
    done = subprocess.run(
        [python, "-c", PROBE],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT / "shared")},
        check=True,
    )
    return json.loads(done.stdout)


def test_every_python_here_gives_the_same_answers() -> None:
    found = interpreters()
    this = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert this in found or this not in VERSIONS
    found.setdefault(this, sys.executable)
    expected = answers(sys.executable)
    # The suite's own answers are the right ones to begin with
    assert all(expected["addresses"][: len(CLASSES)]), "a non-public class passed"
    assert expected["addresses"][len(CLASSES) : len(CLASSES) + 5] == [True] * 5
    assert expected["addresses"][-3:] == [False] * 3
    for version, python in sorted(found.items()):
        assert answers(python) == expected, f"Python {version} ({python}) answers differently"
