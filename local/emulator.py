"""An embedded moto server on 127.0.0.1 with DynamoDB's per-item atomicity.

moto evaluates a conditional write in several Python steps without a lock, so two
threads could both pass the same condition. DynamoDB applies each write atomically;
serializing requests here restores that guarantee, so races observed through this
server are races in our code, not in the emulator. Connections are still accepted
concurrently, so clients really do contend. moto's whole-table costs per call are taken
out (`local.moto_at_scale`), so a long session does not slow down as its tables grow.
"""

from __future__ import annotations

import io
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Final

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

from local import moto_at_scale

moto_at_scale.install()


class Traffic:
    """What reached the emulator: calls and request bytes per `service.Operation`.

    Counted at the server, so it sees every client in every process that uses it.
    """

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()

    def record(self, environ: dict[str, Any], body: bytes = b"") -> None:
        name = journal_named(_operation(environ), body)
        self.calls[name] += 1
        self.bytes[name] += int(environ.get("CONTENT_LENGTH") or 0)

    def take(self) -> dict[str, Any]:
        """The counts since the last take, then start again."""
        taken = {
            "calls": dict(sorted(self.calls.items())),
            "total_calls": sum(self.calls.values()),
            "bytes_sent": dict(sorted(self.bytes.items())),
        }
        self.calls.clear()
        self.bytes.clear()
        return taken


# A `STEP#` sort key as the request names it, not those characters in some other value.
_STEP_KEY: Final = re.compile(rb'"sk":\s*\{\s*"S":\s*"STEP#')


def journal_named(name: str, body: bytes) -> str:
    """`name`, marked `[journal]` when the request records a resumed run's step: a
    transaction that puts a `STEP#` item beside its claim's fence check."""
    if name == "dynamodb.TransactWriteItems" and _STEP_KEY.search(body):
        return name + "[journal]"
    return name


def _operation(environ: dict[str, Any]) -> str:
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target.startswith("DynamoDB_"):
        return "dynamodb." + target.split(".", 1)[1]
    if target.startswith("AmazonSQS."):
        return "sqs." + target.split(".", 1)[1]
    # S3 is REST: name the operation from the method and whether a key is addressed.
    method = str(environ.get("REQUEST_METHOD", ""))
    has_key = str(environ.get("PATH_INFO", "/")).strip("/").count("/") >= 1
    names = {
        ("PUT", True): "PutObject",
        ("GET", True): "GetObject",
        ("HEAD", True): "HeadObject",
        ("DELETE", True): "DeleteObject",
        ("PUT", False): "CreateBucket",
        ("GET", False): "ListObjects",
    }
    return "s3." + names.get((method, has_key), method)


class _Serialized:
    """WSGI middleware: one request at a time through the emulator, each counted."""

    def __init__(self, app: Callable[..., Iterable[bytes]], traffic: Traffic) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._traffic = traffic

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        with self._lock:
            self._traffic.record(environ, body)
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
        self.traffic = Traffic()
        app = _Serialized(DomainDispatcherApplication(create_backend_app), self.traffic)
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
