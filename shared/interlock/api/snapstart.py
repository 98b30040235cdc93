"""Runtime hooks for the functions Lambda resumes from a SnapStart snapshot.

One snapshot starts many execution environments, so whatever the handler's import made
is shared by all of them. Interlock's handlers make nothing unique at import (ids and
secrets come from `os.urandom` when used; clients are made on the first invocation);
the one seeded state is `random`, seeded once when the interpreter started and used by
botocore's retry jitter, so it is reseeded from the restored environment's entropy.

The handlers leave to their first request the modules only a request needs (pydantic's
models: the settings, the response bodies), which keeps their import light where no
snapshot is taken; before a snapshot is taken, those modules are imported, so a
restored environment's first request finds them loaded as if the import had.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Iterable
from typing import Final

WARM: Final = ("interlock.config_model",)
"""What every snapshotted function's first request loads: its stores read the settings."""


def register(warm: Iterable[str] = ()) -> bool:
    """Register the snapshot hooks; a no-op off Lambda's managed runtime.

    Args:
        warm: Modules the handler's first request imports, beyond `WARM`, to load
            before the snapshot is taken.

    Returns:
        Whether the hooks were registered (the runtime provides `snapshot_restore_py`).
    """
    try:
        from snapshot_restore_py import register_after_restore, register_before_snapshot
    except ImportError:  # not Lambda's managed runtime: tests, the local server
        return False
    register_before_snapshot(load, *WARM, *warm)
    register_after_restore(reseed)
    return True


def load(*modules: str) -> None:
    """Import `modules`, so the snapshot holds them."""
    for name in modules:
        importlib.import_module(name)


def reseed() -> None:
    """Seed `random` afresh from the operating system's entropy."""
    random.seed()
