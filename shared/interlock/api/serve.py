"""The run and resume functions' process: uvicorn serving the streaming app.

`functions/stream/run.sh` starts `python -m interlock.api.serve` behind the AWS Lambda
Web Adapter, on `AWS_LWA_PORT`. A cold start is mostly module-level code, which
allocates a great deal and frees almost nothing: the cyclic garbage collector would
walk that growing heap again and again and find no garbage. So `ready` imports the app
and everything its first request needs with the collector resting, and turns it back
on over a heap frozen as it then stands (`gc.freeze`: later collections skip it).
Importing this module does nothing of the sort; only `ready` does.
"""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from starlette.applications import Starlette

DEFAULT_PORT: Final = 8080


def ready() -> Starlette:
    """The app, with what its first request imports already imported; the collector
    rests meanwhile and is back on afterwards (if it was on)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        import uvicorn  # noqa: F401  (what `main` serves with)

        from interlock.api.stream import create_app

        app = create_app()
        import interlock.resume
        import interlock.turns  # noqa: F401  (the first request's imports, now)
    finally:
        if collecting:
            gc.freeze()
            gc.enable()
    return app


def main() -> None:
    """Serve on 127.0.0.1 (the adapter's side of the function) until stopped."""
    app = ready()
    import uvicorn

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(os.environ.get("AWS_LWA_PORT", DEFAULT_PORT)),
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )


if __name__ == "__main__":
    main()
