"""Serving a run live over ASGI: events as they happen, heartbeats while a step is silent.

The run works on a thread of its own and reports into a queue; the response reads the
queue. Two rules follow from AG-UI and from running in Lambda:

- **Refusal or failure.** Until the run reports `Started` (the turn admitted, the
  request claimed), nothing is stored and no event was sent: a refusal is an HTTP error
  with the JSON error body, as every other route answers. From `Started` on, the 200 and
  `RUN_STARTED` are already on the wire, so a failure is `RUN_ERROR` with the same code.
- **The run outlives its client.** A client that goes away stops being written to, but
  the response keeps draining the queue until the run ends, so the run finishes and
  stores its outcome inside the same invocation (a Lambda function whose response ended
  would be frozen mid-run). The stored outcome is there to read on reconnect.

Written by hand rather than with a streaming-response helper: those stop the producer
when the client disconnects, which is exactly what a run must not do.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from interlock.api.errors import error_body
from interlock.outcomes import TurnResult
from interlock.progress import Progress, ProgressEvent, ToolFinished, ToolStarted

if TYPE_CHECKING:
    # AG-UI's models load with the first run that streams (`interlock.api.stream`).
    from ag_ui.core import BaseEvent

    from interlock.api.agui import RunStream

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Work = Callable[[Progress], TurnResult]
"""The run: given where to report, runs to its result (or raises)."""
Standing = Callable[[], TurnResult | None]
"""Where the thread stands now, told after a refused answer (None: nothing to tell)."""

IN_BAND: Final = frozenset(
    {
        "pending_interrupt",  # a pending interrupt blocks new input
        "turn_running",
        "unknown",  # no such interrupt, or not this request's
        "refused",  # a stale secret: the request was read (and its secret renewed) since
        "expired",
        "timed_out",
        "cancelled",
        "incomplete_resume",
        "invalid_payload",
        "decision_binding",  # a different answer to one already acted on
        "in_progress",
    }
)
"""The refusals by the interrupt rules: a client that reads an event stream hears them
in the run's events, a refused answer as a run that finishes where the thread stands
(`RunStream.refused`), any other as `RUN_ERROR` with the code. Authentication, malformed
bodies and limits stay HTTP statuses (docs/agui.md has the table)."""

HEARTBEAT: Final = b": keepalive\n\n"
"""An SSE comment: clients ignore it, proxies and gateways see the stream is alive."""
SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-store"),
    # Proxies that buffer (nginx and friends) would hold events back.
    (b"x-accel-buffering", b"no"),
]


@dataclass(frozen=True, slots=True)
class _Done:
    result: TurnResult


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


_Item = ProgressEvent | _Done | _Failed


async def respond_live(
    send: Send,
    work: Work,
    stream: RunStream,
    *,
    heartbeat_s: float,
    observe: Callable[[TurnResult | BaseException], None] = lambda _: None,
    in_band: bool = False,
    told: Collection[str] = frozenset(),
    standing: Standing | None = None,
) -> None:
    """Run `work` and answer with its events as they come (see the module's rules).

    `observe` hears the run's result or failure (for metrics), once. With `in_band`
    (the client reads an event stream), a refusal by the interrupt rules is told in the
    run's events, as AG-UI has it, not as an HTTP error: for an answer (`standing`
    given), a run that finishes where the thread stands; else `RUN_ERROR`. `told` names
    the tool calls whose results the client already has: they are not sent again.
    """
    from interlock.api.agui import encode  # loaded already, with `stream`

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[_Item] = asyncio.Queue()

    def put(item: _Item) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def run() -> None:
        try:
            put(_Done(work(put)))
        except BaseException as exc:  # handed to the response, which reports it
            put(_Failed(exc))

    threading.Thread(target=run, name="interlock-run", daemon=True).start()
    item = await queue.get()
    if isinstance(item, _Failed):
        observe(item.error)
        status, body = error_body(_exception(item.error))
        if not (in_band and body["error"]["code"] in IN_BAND):
            await send_json(send, status, body)
            return
        client = _Client(send)
        await client.start()
        detail = body["error"]
        told_so = await _refused(stream, standing, detail["code"], detail["message"])
        await client.write(encode(told_so).encode())
        await client.end()
        return
    client = _Client(send)
    await client.start()
    calls = _Calls(told)
    while True:
        if isinstance(item, _Done):
            observe(item.result)
            for settled in calls.untold(item.result):
                await client.write(encode(stream.progress(settled)).encode())
            await client.write(encode(stream.finished(item.result)).encode())
            break
        if isinstance(item, _Failed):
            observe(item.error)
            _, body = error_body(_exception(item.error))
            detail = body["error"]
            await client.write(encode(stream.failed(detail["code"], detail["message"])).encode())
            break
        if calls.tells(item):
            await client.write(encode(stream.progress(item)).encode())
        item = await _next(queue, client, heartbeat_s)
    await client.end()


async def _refused(
    stream: RunStream, standing: Standing | None, code: str, message: str
) -> list[BaseEvent]:
    """A refusal in the run's events: a run that finishes where the thread stands after
    a refused answer, else (nothing the client could act on, or even that read refused:
    the chat is not the caller's) `RUN_ERROR`."""
    if standing is None:
        return stream.failed(code, message)
    try:
        now = await asyncio.to_thread(standing)
    except Exception:  # the refusal stands; only what would follow it is lost
        now = None
    return stream.failed(code, message) if now is None else stream.refused(code, message, now)


class _Calls:
    """The tool calls a stream told of, so that each result is told once.

    A run that pauses leaves the other calls of its paused batch settled (run, or not
    run by a hook) without a result in the agent's messages, so no progress tells
    them: they are told with the run's end (`untold`), before the interrupt. The run
    that resumes it appends them again with the paused call's result; a client that
    already has them (`told`) does not hear them twice.
    """

    def __init__(self, told: Collection[str]) -> None:
        self._told = set(told)
        self._started: set[str] = set()

    def tells(self, event: ProgressEvent) -> bool:
        """Whether `event` is sent (a result the client has is not), noting what it tells."""
        if isinstance(event, ToolStarted):
            self._started.add(event.call_id)
        if not isinstance(event, ToolFinished):
            return True
        if event.call_id in self._told:
            return False
        self._told.add(event.call_id)
        return True

    def untold(self, result: TurnResult) -> list[ToolFinished]:
        """The results of calls this stream started that no progress told."""
        return [
            ToolFinished(call["id"], call["result"])
            for call in result.tool_calls
            if call.get("result") is not None
            and call["id"] in self._started
            and call["id"] not in self._told
        ]


async def _next(queue: asyncio.Queue[_Item], client: _Client, heartbeat_s: float) -> _Item:
    while True:
        try:
            return await asyncio.wait_for(queue.get(), heartbeat_s)
        except TimeoutError:
            await client.write(HEARTBEAT)


async def send_json(send: Send, status: int, body: Any) -> None:
    """A whole JSON response (never cached: every body is one user's)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


class _Client:
    """The response as the run sees it: writes after the client left are dropped."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.gone = False

    async def start(
        self, status: int = 200, headers: list[tuple[bytes, bytes]] = SSE_HEADERS
    ) -> None:
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def write(self, chunk: bytes) -> None:
        await self._message({"type": "http.response.body", "body": chunk, "more_body": True})

    async def end(self) -> None:
        await self._message({"type": "http.response.body", "body": b"", "more_body": False})

    async def _message(self, message: Message) -> None:
        if self.gone:
            return
        try:
            await self._send(message)
        except OSError:  # the client disconnected (ASGI servers raise an OSError)
            self.gone = True


def _exception(error: BaseException) -> Exception:
    # KeyboardInterrupt and friends are not the run's fault to describe.
    return error if isinstance(error, Exception) else RuntimeError(type(error).__name__)


Opened = tuple[int, list[tuple[bytes, bytes]], Any]
"""Another function's answer: status, headers and an iterator of body chunks."""


@dataclass(frozen=True, slots=True)
class _Head:
    status: int
    headers: list[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class _Chunk:
    data: bytes


@dataclass(frozen=True, slots=True)
class _End:
    pass


async def relay(send: Send, open_answer: Callable[[], Opened]) -> None:
    """Relay another function's streamed answer as it arrives, reading it to its end
    even when the client has gone (the other function's run ends its own way)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[_Head | _Chunk | _End | _Failed] = asyncio.Queue()

    def put(item: _Head | _Chunk | _End | _Failed) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def read() -> None:
        try:
            status, headers, chunks = open_answer()
            put(_Head(status, headers))
            for chunk in chunks:
                put(_Chunk(chunk))
            put(_End())
        except BaseException as exc:  # handed to the response, which reports it
            put(_Failed(exc))

    threading.Thread(target=read, name="interlock-relay", daemon=True).start()
    head = await queue.get()
    if isinstance(head, _Failed):
        await send_json(send, *error_body(_exception(head.error)))
        return
    assert isinstance(head, _Head)
    client = _Client(send)
    await client.start(head.status, head.headers)
    while not isinstance(item := await queue.get(), _End | _Failed):
        assert isinstance(item, _Chunk)
        await client.write(item.data)
    await client.end()
