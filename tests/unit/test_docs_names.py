"""The docs cannot drift from the code: every code name README.md and
docs/architecture.md mention in backticks exists: files, modules and their members,
`path/module.NAME` references, and constants or variables in capitals."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
DOCS: Final = ("README.md", "docs/architecture.md")
# Where a short path in the docs may be rooted (`adapters/fencing.py` is the layer's).
ROOTS: Final = (ROOT, ROOT / "shared" / "interlock", ROOT / "shared")
CODE_GLOBS: Final = (
    "shared/**/*.py",
    "functions/**/*.py",
    "local/*.py",
    "infra/*.py",
    "bench/**/*.py",
    "examples/**/*.py",
    "tests/**/*.py",
    "tests/**/*.mjs",
    "web/*.js",
    "dev",
    ".ci/run",
)
# Spans that look like code names and are not: what each one is.
NOT_CODE: Final = {
    "interlock.secret": "the key under which an AG-UI run's state carries the secret",
    "config.json": "the card page's settings, written next to it when it is deployed",
}
_FILE: Final = re.compile(r"[\w.-]+(/[\w.-]+)*\.(py|mjs|js|md|json|yaml|txt|sh|png|lock)")
_DOTTED: Final = re.compile(r"(interlock|local|infra|bench)(\.\w+)+")
_PATH_NAME: Final = re.compile(r"[a-z_]+(/[a-z_]+)+\.[A-Za-z_]\w*")
_CAPITALS: Final = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+")


def _code() -> str:
    files = {p for pattern in CODE_GLOBS for p in ROOT.glob(pattern) if p.is_file()}
    files.discard(Path(__file__).resolve())  # its own examples of drift are not code
    return "\n".join(p.read_text(errors="replace") for p in sorted(files))


def _spans() -> set[tuple[str, str]]:
    return {
        (doc, span)
        for doc in DOCS
        for span in re.findall(r"`([^`\n]+)`", (ROOT / doc).read_text())
        if span not in NOT_CODE
    }


def _exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def _missing(span: str, code: str) -> str | None:
    """Why `span` names nothing, or None (also for what is not a code name)."""
    if _FILE.fullmatch(span):
        return None if any((r / span).exists() for r in ROOTS) else "no such file"
    if _DOTTED.fullmatch(span):
        return None if _exists(span) else "no such module or member"
    if _PATH_NAME.fullmatch(span):
        path, _, name = span.rpartition(".")
        module = next((r / f"{path}.py" for r in ROOTS if (r / f"{path}.py").exists()), None)
        if module is None:
            return "no such module"
        return None if re.search(rf"\b{name}\b", module.read_text()) else f"no {name} in it"
    if _CAPITALS.fullmatch(span):
        return None if re.search(rf"\b{span}\b", code) else "named nowhere in the code"
    return None


def test_every_code_name_the_docs_mention_exists() -> None:
    code = _code()
    missing = sorted((doc, span, why) for doc, span in _spans() if (why := _missing(span, code)))
    assert missing == []


def test_the_check_catches_a_name_that_drifted() -> None:
    code = _code()
    assert _missing("HOLDS_LEASE_NOT_A_THING", code) == "named nowhere in the code"
    assert _missing("interlock.api.live.NO_SUCH_NAME", code) == "no such module or member"
    assert _missing("adapters/fencing.no_such_function", code) == "no no_such_function in it"
    assert _missing("shared/interlock/nothing.py", code) == "no such file"
    assert _missing("interlock.api.live.IN_BAND", code) is None
