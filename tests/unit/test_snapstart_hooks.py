"""The after-restore hook: `random` is reseeded in every environment a snapshot resumes."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable

import pytest

from interlock.api import snapstart


def test_off_lambda_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # not importable
    assert snapstart.register() is False


def test_on_lambda_random_is_reseeded_after_a_restore(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the managed runtime's hook library
    hooks: list[Callable[[], None]] = []
    library = types.ModuleType("snapshot_restore_py")
    library.register_after_restore = hooks.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", library)

    # When the handler registers its hooks, and two environments resume one snapshot
    assert snapstart.register() is True
    state = random.getstate()
    drawn = []
    for _ in range(2):
        random.setstate(state)  # what each restored copy starts from
        for hook in hooks:
            hook()
        drawn.append(random.random())

    # Then they draw different numbers
    assert drawn[0] != drawn[1]
