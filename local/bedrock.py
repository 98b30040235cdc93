"""A local Bedrock Runtime: `ConverseStream` on 127.0.0.1, played from a script.

It answers as Bedrock does on the wire, so Strands' own `BedrockModel` and botocore run
against it unchanged: `POST /model/{modelId}/converse-stream` with the Converse request
body, answered with AWS event-stream frames (`application/vnd.amazon.eventstream`:
prelude, headers, payload and CRC32s) carrying `messageStart`, `contentBlockStart`,
`contentBlockDelta` (text, or a tool's input as JSON text), `contentBlockStop`,
`messageStop` with the stop reason, and `metadata` with token usage. What the model says
is what the scripted model (`interlock.harness.model.ScriptedModel`) would say for the
same messages, so the analyst demo plays through it; the requests it was sent are kept.

Failures come as Bedrock sends them, chosen by the model id:

- `...-throttled` once per turn prompt: HTTP 429 `ThrottlingException` (Strands retries);
- `...-too-long`: HTTP 400 `ValidationException` "Input is too long for requested model";
- `...-stream-error`: a `modelStreamErrorException` frame after the first text delta.

    .venv/bin/python -m local.bedrock [--port 8766] [--scenarios my_agent:SCRIPT | --tools]

Started from the checkout's root; a module of scenarios elsewhere is found through
`PYTHONPATH` (the demo's, `examples.analyst.script:DEMO_SCENARIOS`, by default). With
`--tools` it plays the tools stand-in (`interlock.harness.model.ToolsModel`) instead: it
calls the tool the person's message names, from the tools the request offers.

Point a local server at it with `INTERLOCK_BEDROCK_URL=http://127.0.0.1:8766` and
`INTERLOCK_MODEL=bedrock:<any model id>`; without `INTERLOCK_BEDROCK_URL`, Bedrock is the
real service, reached with the machine's own credentials.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import struct
import sys
import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import unquote

from strands.models.model import Model

from interlock.harness.model import Scenario, ScriptedModel, ToolsModel

EVENT_STREAM: Final = "application/vnd.amazon.eventstream"
_STRING: Final = 7  # the event-stream header value type of a UTF-8 string
_MAX_BODY: Final = 16 * 1024 * 1024


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: its prelude (lengths and their CRC32), string
    headers, the payload, and the CRC32 of all that came before."""
    encoded = b"".join(
        bytes([len(name)])
        + name.encode()
        + bytes([_STRING])
        + struct.pack(">H", len(value))
        + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return head + struct.pack(">I", zlib.crc32(head))


def event_frame(event: dict[str, Any]) -> bytes:
    """A ConverseStream event (`{"contentBlockDelta": {...}}`) as its frame."""
    ((name, body),) = event.items()
    headers = {":event-type": name, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps(body).encode())


def exception_frame(kind: str, message: str) -> bytes:
    """An error inside the stream, as Bedrock sends one (a `modelStreamErrorException`)."""
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps({"message": message}).encode())


def indexed(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scripted model's events as Bedrock sends them: each content block numbered,
    and no start for a text block (Bedrock starts only tool-use blocks)."""
    index, out = -1, []
    for event in events:
        ((name, body),) = event.items()
        if name == "contentBlockStart":
            index += 1
            if not body.get("start"):
                continue
        if name in ("contentBlockStart", "contentBlockDelta", "contentBlockStop"):
            body = {**body, "contentBlockIndex": index}
        out.append({name: body})
    return out


@dataclass
class Recorded:
    """What the fake was asked: each request's model id and body, in order."""

    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, model_id: str, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append((model_id, body))

    def of(self, model_id: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [b for m, b in self.requests if model_id is None or m == model_id]


class Hold:
    """Lets `after` more requests through, then holds the next one until `release`: a
    model still thinking when its caller's process dies (the takeover tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._left: int | None = None
        self.holding = threading.Event()
        self._released = threading.Event()

    def after(self, calls: int) -> None:
        with self._lock:
            self._left = calls
            self.holding.clear()
            self._released.clear()

    def release(self) -> None:
        with self._lock:
            self._left = None
        self._released.set()

    def wait_if_held(self) -> None:
        with self._lock:
            if self._left is None:
                return
            self._left -= 1
            held = self._left < 0
        if held:
            self.holding.set()
            self._released.wait(timeout=120)


Played = Sequence[Scenario] | None
"""What a fake plays: scenarios, or None for the tools stand-in (`ToolsModel`), which
calls the tool a message names from the tools the request offers."""


def stand_in(played: Played) -> Model:
    """A fresh model for one request: the script, or the tools stand-in."""
    return ToolsModel() if played is None else ScriptedModel(played)


class _Handler(BaseHTTPRequestHandler):
    scenarios: Played
    recorded: Recorded
    throttled: set[str]
    hold: Hold

    def do_POST(self) -> None:
        parts = self.path.split("/")
        if len(parts) != 4 or parts[1] != "model" or parts[3] != "converse-stream":
            return self._error(404, "UnknownOperationException", "no such operation")
        model_id = unquote(parts[2])
        length = int(self.headers.get("Content-Length", "0"))
        if length > _MAX_BODY:
            return self._error(413, "ValidationException", "the request is too large")
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return self._error(400, "SerializationException", "the body is not JSON")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._error(400, "ValidationException", "messages: at least one is required")
        self.recorded.add(model_id, body)
        self.hold.wait_if_held()
        if model_id.endswith("-too-long"):
            return self._error(400, "ValidationException", "Input is too long for requested model.")
        if model_id.endswith("-throttled"):
            prompt = json.dumps(messages[0])
            if prompt not in self.throttled:
                self.throttled.add(prompt)
                return self._error(429, "ThrottlingException", "Too many requests, please wait.")
        tools = (body.get("toolConfig") or {}).get("tools") or []
        specs = [t["toolSpec"] for t in tools if isinstance(t, dict) and "toolSpec" in t]
        events = indexed(asyncio.run(_collect(stand_in(self.scenarios), messages, specs)))
        frames = [event_frame(e) for e in events]
        if model_id.endswith("-stream-error"):
            first_delta = next(i for i, e in enumerate(events) if "contentBlockDelta" in e)
            frames = frames[: first_delta + 1]
            frames.append(exception_frame("modelStreamErrorException", "The model stopped."))
        self._stream(frames)

    def _stream(self, frames: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", EVENT_STREAM)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-amzn-RequestId", "local-bedrock")
        self.end_headers()
        for chunk in frames:  # a frame per chunk, as the service streams them
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _error(self, status: int, kind: str, message: str) -> None:
        raw = json.dumps({"message": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header(
            "x-amzn-ErrorType", f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        )
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        return


async def _collect(model: Model, messages: Any, tool_specs: Any = None) -> list[dict[str, Any]]:
    # Bedrock's Converse messages and tool specs are the shape Strands' own have.
    return [dict(event) async for event in model.stream(messages, tool_specs)]


class QuietServer(ThreadingHTTPServer):
    """A threading server that does not print a traceback for a caller that hung up."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A caller that died mid-stream (the takeover tests kill one) is not an error here.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@dataclass
class LocalBedrock:
    """A running fake: its URL and what it was sent."""

    url: str
    recorded: Recorded
    hold: Hold = field(default_factory=Hold)


@contextmanager
def serving(scenarios: Played, port: int = 0) -> Iterator[LocalBedrock]:
    """Serve the fake on 127.0.0.1 (`port` 0: any free one) until the block ends,
    playing `scenarios` (None: the tools stand-in)."""
    recorded, hold = Recorded(), Hold()
    handler = type(
        "Handler",
        (_Handler,),
        {"scenarios": scenarios, "recorded": recorded, "throttled": set(), "hold": hold},
    )
    server = QuietServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, name="local-bedrock", daemon=True)
    thread.start()
    try:
        yield LocalBedrock(f"http://127.0.0.1:{server.server_port}", recorded, hold)
    finally:
        hold.release()
        server.shutdown()
        server.server_close()


def load_scenarios(name: str) -> Sequence[Scenario]:
    """`package.module:NAME`, a sequence of scenarios (`interlock.agent.Scenario`), found
    on the path (the directory started from, then `PYTHONPATH`).

    Raises:
        ValueError: the name is malformed, or names no module, no attribute, or no
            sequence of scenarios; the message says which.
    """
    module, _, attribute = name.partition(":")
    if not module or not attribute:
        raise ValueError(f"scenarios are named 'package.module:NAME', not {name!r}")
    try:
        found = getattr(importlib.import_module(module), attribute)
    except ImportError as exc:
        raise ValueError(
            f"no module {module!r} for {name!r} (is it on PYTHONPATH?): {exc}"
        ) from exc
    except AttributeError:
        raise ValueError(f"module {module!r} has no {attribute!r}") from None
    scenarios = list(found) if isinstance(found, (list, tuple)) else [found]
    if not scenarios or not all(isinstance(s, Scenario) for s in scenarios):
        raise ValueError(f"{name!r} is not a list of interlock.agent.Scenario")
    return scenarios


def add_played(parser: argparse.ArgumentParser) -> None:
    """The options that choose what a fake plays: `--scenarios` or `--tools`."""
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--scenarios",
        default="examples.analyst.script:DEMO_SCENARIOS",
        help="the scenarios to play, package.module:NAME (the demo's by default)",
    )
    chosen.add_argument(
        "--tools",
        action="store_true",
        help="play the tools stand-in: call the tool the message names (no script)",
    )


def played(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Played:
    """What the options chose; a scenarios name that loads nothing ends in one line."""
    if args.tools:
        return None
    try:
        return load_scenarios(args.scenarios)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: {exc}\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Bedrock ConverseStream, scripted.")
    parser.add_argument("--port", type=int, default=8766)
    add_played(parser)
    args = parser.parse_args(argv)
    with serving(played(parser, args), args.port) as running:
        print(f"READY {running.url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
