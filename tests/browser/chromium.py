"""Where the browser tests find their browser: Debian's chromium, never a download."""

from __future__ import annotations

from pathlib import Path
from typing import Final

CHROMIUM: Final = Path("/usr/bin/chromium")
CHROMIUM_ARGS: Final = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
INSTALL_HINT: Final = (
    "The browser tests need Debian's chromium at /usr/bin/chromium and the playwright "
    "package: run `./dev setup` as root, or `apt-get update && apt-get install -y chromium` "
    "and `.venv/bin/pip install -r requirements-dev.txt`. Never `playwright install`."
)
