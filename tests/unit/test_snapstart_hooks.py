"""The snapshot hooks: what a request needs is loaded before the snapshot, and `random`
is reseeded in every environment a snapshot resumes."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from interlock.api import snapstart

Hook = tuple[Callable[..., None], tuple[Any, ...]]


def _library(monkeypatch: pytest.MonkeyPatch) -> list[Hook]:
    """The managed runtime's hook library; returns the after-restore hooks registered."""
    after: list[Hook] = []
    library = types.ModuleType("snapshot_restore_py")
    library.register_before_snapshot = lambda f, *a: None  # type: ignore[attr-defined]
    library.register_after_restore = lambda f, *a: after.append((f, a))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", library)
    return after


def test_off_lambda_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # not importable
    assert snapstart.register() is False


def test_on_lambda_random_is_reseeded_after_a_restore(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the managed runtime's hook library
    after = _library(monkeypatch)

    # When the handler registers its hooks, and two environments resume one snapshot
    assert snapstart.register() is True
    state = random.getstate()
    drawn = []
    for _ in range(2):
        random.setstate(state)  # what each restored copy starts from
        for hook, args in after:
            hook(*args)
        drawn.append(random.random())

    # Then they draw different numbers
    assert drawn[0] != drawn[1]


# In a fresh interpreter: the requests handler's import, then its before-snapshot hooks.
SNAPSHOT = """
import importlib.util, json, sys, types
before = []
library = types.ModuleType("snapshot_restore_py")
library.register_before_snapshot = lambda f, *a: before.append((f, a))
library.register_after_restore = lambda f, *a: None
sys.modules["snapshot_restore_py"] = library
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
imported = "pydantic" in sys.modules
for hook, args in before:
    hook(*args)
print(json.dumps([imported, sorted(m for m in sys.modules if m.startswith("interlock"))]))
"""


def test_before_the_snapshot_what_the_first_request_loads_is_imported() -> None:
    # When the requests handler is imported on the managed runtime, and the snapshot is
    # about to be taken
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", SNAPSHOT, str(root / "functions" / "requests" / "handler.py")],
        env={**os.environ, "PYTHONPATH": str(root / "shared"), "AWS_REGION": "us-east-1"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    imported_pydantic, loaded = json.loads(done.stdout.splitlines()[-1])

    # Then the import itself left pydantic's models to the first request, and the
    # snapshot holds them: the settings' model and the response bodies
    assert imported_pydantic is False
    assert {"interlock.config_model", "interlock.api.schemas", "interlock.answers"} <= set(loaded)


def test_the_modules_that_screen_a_tap_load_no_answer_rules() -> None:
    # The channels function screens every tap with these before it acknowledges: the
    # answer rules (pydantic) load only once a tap is applied
    root = Path(__file__).resolve().parents[2]
    probe = (
        "import sys, interlock.respond, interlock.channels, interlock.adapters.slack, "
        "interlock.adapters.telegram; print('pydantic' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(root / "shared")},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "False"
