"""An embedded moto server on 127.0.0.1 with DynamoDB's per-item atomicity.

moto evaluates a conditional write in several Python steps without a lock, so two
threads could both pass the same condition. DynamoDB applies each write atomically;
serializing requests here restores that guarantee, so races observed through this
server are races in our code, not in the emulator. Connections are still accepted
concurrently, so clients really do contend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server


class _Serialized:
    """WSGI middleware: one request at a time through the emulator."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        with self._lock:
            return list(self._app(environ, start_response))


class _QuietHandler(MotoRequestHandler):
    """Keeps the request log out of test and benchmark output."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class Emulator:
    """A moto server in a background thread.

    Args:
        host: Interface to bind; loopback only.
        port: 0 picks a free port.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        app = _Serialized(DomainDispatcherApplication(create_backend_app))
        self._server: BaseWSGIServer = make_server(
            host, port, app, threaded=True, request_handler=_QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://{self._server.host}:{self._server.port}"

    def start(self) -> Emulator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
