"""Where the files Interlock deploys are: the functions' handlers, the card page, the
layer's lock and the demo agent.

In this repository they sit around this package; in a wheel (`pip install interlock`)
they are packed beside it as `_assets`, so a team's own CDK app synthesizes from the
installed package alone. The layer's `interlock` package is wherever Python imports it
from: `shared/interlock` here, site-packages once installed.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Final

_HERE: Final = Path(__file__).resolve().parent
_PACKED: Final = _HERE / "_assets"
ROOT: Final = _PACKED if _PACKED.is_dir() else _HERE.parent
"""The directory holding `functions/`, `web/`, the lock and `examples/`."""

FUNCTIONS_DIR: Final = ROOT / "functions"
WEB_DIR: Final = ROOT / "web"
REQUIREMENTS: Final = ROOT / "requirements-layer.txt"
LOCK: Final = ROOT / "requirements.lock"
EXAMPLES_DIR: Final = ROOT / "examples"


def _package_dir() -> Path:
    spec = find_spec("interlock")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the interlock package is not importable: install it, or add shared/")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


PACKAGE_DIR: Final = _package_dir()
"""The `interlock` package the layer carries."""
