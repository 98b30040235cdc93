"""The run and resume functions' process: uvicorn serving the streaming app.

`functions/stream/run.sh` starts `python -m interlock.api.serve` behind the AWS Lambda
Web Adapter, on `AWS_LWA_PORT`. A cold start is mostly module-level code, which
allocates a great deal and frees almost nothing: the cyclic garbage collector would
walk that growing heap again and again and find no garbage. So it rests while the app
and everything its first request needs are imported, and comes back once they are, over
a heap frozen as it then stands (`gc.freeze`: later collections skip it).
"""

from __future__ import annotations

import gc

gc.disable()  # before the imports below: they are the cold start

import os  # noqa: E402
from typing import Final  # noqa: E402

import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402

from interlock.api.stream import create_app  # noqa: E402

DEFAULT_PORT: Final = 8080


def ready() -> Starlette:
    """The app, with what its first request imports already imported; the collector
    is back on afterwards."""
    try:
        app = create_app()
        import interlock.resume
        import interlock.turns  # noqa: F401  (the first request's imports, now)
    finally:
        gc.freeze()
        gc.enable()
    return app


def main() -> None:
    """Serve on 127.0.0.1 (the adapter's side of the function) until stopped."""
    uvicorn.run(
        ready(),
        host="127.0.0.1",
        port=int(os.environ.get("AWS_LWA_PORT", DEFAULT_PORT)),
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )


if __name__ == "__main__":
    main()
