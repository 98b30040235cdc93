"""The docs cannot drift from the code: every code name README.md and the pages of
docs/ mention in backticks exists: files, modules and their members,
`path/module.NAME` references, and constants or variables in capitals."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
DOCS: Final = tuple(
    p.relative_to(ROOT).as_posix()
    for p in (ROOT / "README.md", ROOT / "UPGRADING.md", *sorted((ROOT / "docs").glob("*.md")))
    if p.exists()
)
# Where a short path in the docs may be rooted (`adapters/fencing.py` is the layer's).
ROOTS: Final = (ROOT, ROOT / "shared" / "interlock", ROOT / "shared", ROOT / "docs")
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
_FILE: Final = re.compile(r"[\w.-]+(/[\w.-]+)*\.(py|mjs|jsx|js|md|json|yaml|txt|sh|png|lock)")
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


# The layout of docs/architecture.md names every module, and README.md's tier table every
# test tier: a module or tier added without a word about it fails here.
_PACKAGES: Final = (
    "shared/interlock",
    "shared/interlock/adapters",
    "shared/interlock/api",
    "shared/interlock/harness",
    "infra",
    "local",
)


def _layout() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return text.split("## Layout", 1)[1].split("```", 2)[1]


def _tiers() -> list[str]:
    return sorted(
        p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and any(p.glob("test_*.py"))
    )


def test_the_layout_names_every_module() -> None:
    words = set(re.findall(r"[A-Za-z_][\w-]*", _layout()))
    unnamed = [
        f"{package}/{path.name}"
        for package in _PACKAGES
        for path in sorted((ROOT / package).glob("*.py"))
        if path.stem != "__init__" and path.stem not in words
    ]
    functions = [p.name for p in (ROOT / "functions").iterdir() if p.is_dir()]
    assert unnamed == []
    assert all(name in words for name in functions)


def test_the_layout_and_the_readme_name_every_test_tier() -> None:
    layout = _layout()
    listed = layout[layout.index("\ntests/ ") : layout.index("\nbench/ ")]
    table = (ROOT / "docs" / "testing.md").read_text()

    assert [t for t in _tiers() if f" {t}/" not in listed] == []
    assert [t for t in _tiers() if f"| `tests/{t}` |" not in table] == []
