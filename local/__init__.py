"""Local mode: an embedded AWS emulator, the local server and its tools.

Interlock's runtime package lives in `shared/` (the layout of its Lambda layer), so it
is put on the path here: every `python -m local.<tool>` started from the checkout's root
finds it, as `./dev serve` and the tests do.
"""

import sys
from pathlib import Path

_SHARED = str(Path(__file__).resolve().parent.parent / "shared")
if _SHARED not in sys.path:
    sys.path.insert(0, _SHARED)
