"""Runtime hooks for the functions Lambda resumes from a SnapStart snapshot.

One snapshot starts many execution environments, so whatever the handler's import made
is shared by all of them. Interlock's handlers make nothing unique at import (ids and
secrets come from `os.urandom` when used; clients are made on the first invocation);
the one seeded state is `random`, seeded once when the interpreter started and used by
botocore's retry jitter, so it is reseeded from the restored environment's entropy.
"""

from __future__ import annotations

import random


def register() -> bool:
    """Register the after-restore hooks; a no-op off Lambda's managed runtime.

    Returns:
        Whether the hooks were registered (the runtime provides `snapshot_restore_py`).
    """
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError:  # not Lambda's managed runtime: tests, the local server
        return False
    register_after_restore(reseed)
    return True


def reseed() -> None:
    """Seed `random` afresh from the operating system's entropy."""
    random.seed()
