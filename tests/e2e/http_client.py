"""An AG-UI client over real HTTP, and the local server run as a child process.

Everything a test sends is built with the protocol's own models and everything it
reads back is parsed with them: if a plain AG-UI client could not drive a pause and a
resume with these helpers, the tests say so.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from ag_ui.core import (
    BaseEvent,
    Event,
    EventType,
    Interrupt,
    MessagesSnapshotEvent,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from pydantic import BaseModel, TypeAdapter

from local import devtokens
from tests.forks import Forked, fork_server

ROOT: Final = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S: Final = 30.0
REQUEST_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 10.0
EVENT: Final[TypeAdapter[Any]] = TypeAdapter(Event)
SSE_FIELDS: Final = frozenset({"data", "event", "id", "retry"})


@dataclass(frozen=True)
class Reply:
    """One HTTP response, read whole."""

    status: int
    content_type: str
    body: bytes

    def json(self) -> Any:
        assert self.content_type.startswith("application/json"), self.describe()
        return json.loads(self.body)

    def error(self) -> tuple[int, str]:
        """Status and code of an error reply, after checking the documented shape."""
        body = self.json()
        assert isinstance(body, dict) and set(body) == {"error"}, self.describe()
        error = body["error"]
        assert isinstance(error, dict) and {"code", "message"} <= set(error), self.describe()
        assert set(error) <= {"code", "message", "holder"}, self.describe()
        assert isinstance(error["code"], str) and error["code"], self.describe()
        assert isinstance(error["message"], str) and error["message"], self.describe()
        return self.status, error["code"]

    def stream(self, thread_id: str, run_id: str, known: Collection[str] = frozenset()) -> Stream:
        """The AG-UI run this reply streams, checked and parsed; `known` are the tool
        calls earlier runs of the thread started."""
        assert self.status == 200, self.describe()
        assert self.content_type.startswith("text/event-stream"), self.describe()
        return Stream(check_run(parse_sse(self.body.decode()), thread_id, run_id, known))

    def describe(self) -> str:
        return f"HTTP {self.status} {self.content_type}: {self.body[:600]!r}"


@dataclass(frozen=True)
class Stream:
    """The parsed events of one run."""

    events: list[BaseEvent]

    @property
    def finished(self) -> RunFinishedEvent:
        last = self.events[-1]
        assert isinstance(last, RunFinishedEvent)
        return last

    @property
    def interrupt(self) -> Interrupt:
        """The one interrupt the run paused on (Interlock answers one at a time)."""
        outcome = self.finished.outcome
        assert isinstance(outcome, RunFinishedInterruptOutcome), f"not paused: {self.text!r}"
        assert len(outcome.interrupts) == 1, outcome.interrupts
        return outcome.interrupts[0]

    @property
    def result(self) -> dict[str, Any]:
        """RUN_FINISHED.result of a run that ended without pausing."""
        finished = self.finished
        assert isinstance(finished.outcome, RunFinishedSuccessOutcome), finished.outcome
        assert isinstance(finished.result, dict), finished.result
        return finished.result

    @property
    def text(self) -> str:
        """The text the run streamed; for a replay, the answer its snapshot carries."""
        streamed = "".join(e.delta for e in self.events if isinstance(e, TextMessageContentEvent))
        if streamed:
            return streamed
        snapshots = [e for e in self.events if isinstance(e, MessagesSnapshotEvent)]
        said = [
            m.content
            for s in snapshots
            for m in s.messages
            if m.role == "assistant" and isinstance(m.content, str)
        ]
        return said[-1] if said else ""

    def of_type(self, kind: EventType) -> list[BaseEvent]:
        return [e for e in self.events if e.type == kind]


def parse_sse(body: str) -> list[BaseEvent]:
    """Every event of a `text/event-stream` body, each validated as an AG-UI `Event`."""
    events: list[BaseEvent] = []
    for frame in body.replace("\r\n", "\n").split("\n\n"):
        data = []
        for line in frame.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            assert name in SSE_FIELDS, f"not an SSE line: {line!r}"
            if name == "data":
                data.append(value.removeprefix(" "))
        if data:
            event = EVENT.validate_json("\n".join(data))
            known_fields_only(event)
            events.append(event)
    return events


def known_fields_only(value: Any) -> None:
    """Fail on any field the AG-UI models do not declare, at any depth."""
    # The models keep unknown keys rather than drop them: none should be there, at any depth.
    if isinstance(value, BaseModel):
        assert not value.model_extra, f"unknown fields {value.model_extra} in {value!r}"
        for name in type(value).model_fields:
            known_fields_only(getattr(value, name))
    elif isinstance(value, list):
        for item in value:
            known_fields_only(item)


def check_run(
    events: list[BaseEvent], thread_id: str, run_id: str, known: Collection[str] = frozenset()
) -> list[BaseEvent]:
    """One run: started first, finished last, messages and tool calls opened and closed.

    A call an earlier run of the thread started (`known`) is never started again (AG-UI
    appends argument deltas: a second start would break the client's stored arguments);
    this run may only give it its result. A replay re-sends the run it replays.
    """
    assert events, "empty stream"
    first, last = events[0], events[-1]
    assert isinstance(first, RunStartedEvent), first
    assert isinstance(last, RunFinishedEvent), last
    assert (first.thread_id, first.run_id) == (thread_id, run_id)
    assert (last.thread_id, last.run_id) == (thread_id, run_id)
    middle = events[1:-1]
    assert not {EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR} & {
        e.type for e in middle
    }, [e.type for e in events]
    _check_pairs(
        middle,
        "message_id",
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_END,
        inside={EventType.TEXT_MESSAGE_CONTENT},
    )
    ended = _check_pairs(
        middle,
        "tool_call_id",
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_END,
        inside={EventType.TOOL_CALL_ARGS},
    )
    # A replay re-sends a stored run whole (with its ids), for a client that missed it
    replayed = isinstance(last.result, dict) and last.result.get("outcome") == "replayed"
    assert replayed or not ended & set(known), f"calls started again: {ended & set(known)}"
    for event in middle:
        if isinstance(event, ToolCallResultEvent):
            assert event.tool_call_id in ended | set(known), f"a result for no call: {event!r}"
    return events


def _check_pairs(
    events: Sequence[BaseEvent], key: str, start: EventType, end: EventType, inside: set[EventType]
) -> set[str]:
    """Each id opened once, closed once, with its `inside` events in between."""
    opened: set[str] = set()
    closed: set[str] = set()
    for event in events:
        ident = str(getattr(event, key, ""))
        if event.type == start:
            assert ident not in opened, f"{start} twice for {ident}"
            opened.add(ident)
        elif event.type == end or event.type in inside:
            assert ident in opened and ident not in closed, f"{event.type} outside {ident}"
            if event.type == end:
                closed.add(ident)
    assert opened == closed, f"unclosed: {opened - closed}"
    return closed


def run_body(thread_id: str, run_id: str, prompt: str) -> str:
    message = UserMessage(id=f"m_{uuid.uuid4().hex}", role="user", content=prompt)
    run = RunAgentInput(thread_id=thread_id, run_id=run_id, messages=[message])
    return run.model_dump_json(by_alias=True)


def resume_body(
    thread_id: str,
    run_id: str,
    entries: Sequence[ResumeEntry],
) -> str:
    run = RunAgentInput(thread_id=thread_id, run_id=run_id, messages=[], resume=list(entries))
    return run.model_dump_json(by_alias=True)


def answer(
    interrupt: Interrupt,
    payload: Any,
    secret: str,
    status: Literal["resolved", "cancelled"] = "resolved",
) -> ResumeEntry:
    """The resume entry answering `interrupt`, carrying the secret it was offered with."""
    return ResumeEntry(
        interrupt_id=interrupt.id, status=status, payload=payload, metadata={"secret": secret}
    )


def secret_of(interrupt: Interrupt) -> str:
    secret = (interrupt.metadata or {}).get("secret")
    assert isinstance(secret, str) and secret, interrupt.metadata
    return secret


# Tool calls started per thread, across every client of the session.
_THREAD_CALLS: dict[str, set[str]] = {}


class Client:
    """One user's HTTP client for the local server."""

    def __init__(self, url: str, token: str | None, user: str = "") -> None:
        parts = urlsplit(url)
        assert parts.hostname and parts.port
        self.host, self.port = parts.hostname, parts.port
        self.token = token
        self.user = user

    def known(self, chat: str) -> frozenset[str]:
        """The tool calls earlier runs of `chat` started, whichever client read them (a
        thread is one conversation, whoever answers its card)."""
        return frozenset(_THREAD_CALLS.get(chat, set()))

    def _seen(self, chat: str, stream: Stream) -> Stream:
        _THREAD_CALLS.setdefault(chat, set()).update(
            e.tool_call_id for e in stream.events if isinstance(e, ToolCallStartEvent)
        )
        return stream

    def call(self, method: str, path: str, body: str | bytes | None = None) -> Reply:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT_S)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return Reply(response.status, response.getheader("Content-Type", ""), response.read())
        finally:
            connection.close()

    def post_run(self, chat: str, prompt: str, run_id: str | None = None) -> Reply:
        return self.call("POST", "/runs", run_body(chat, run_id or _run_id(), prompt))

    def run(self, chat: str, prompt: str) -> Stream:
        run_id = _run_id()
        return self._seen(chat, self.post_run(chat, prompt, run_id).stream(chat, run_id))

    def post_resume(self, chat: str, entry: ResumeEntry, run_id: str | None = None) -> Reply:
        return self.call("POST", "/resume", resume_body(chat, run_id or _run_id(), [entry]))

    def resume(self, chat: str, entry: ResumeEntry) -> Stream:
        run_id = _run_id()
        reply = self.post_resume(chat, entry, run_id)
        return self._seen(chat, reply.stream(chat, run_id, self.known(chat)))

    def get(self, path: str) -> Any:
        reply = self.call("GET", path)
        assert reply.status == 200, reply.describe()
        return reply.json()


@dataclass(frozen=True)
class LocalServer:
    """A running `local.server` and the key its development tokens are signed with."""

    url: str
    key: bytes
    pid: int = 0

    def client(self, user: str, groups: Sequence[str] = ()) -> Client:
        return Client(self.url, devtokens.issue(self.key, user, list(groups)), user)


@contextmanager
def local_server(
    aws: dict[str, Any], log: Path, extra_env: dict[str, str] | None = None
) -> Iterator[LocalServer]:
    """Serve the API on a free port over `aws`'s moto server, table and bucket."""
    key = secrets.token_bytes(32)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLOCK_"))}
    env.update(
        INTERLOCK_DEV_KEY=key.hex(),
        INTERLOCK_MODEL="scripted",
        INTERLOCK_FETCH="demo",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    env.update(extra_env or {})
    argv = [sys.executable, "-m", "local.server", "--port", "0", "--sweep-every", "0"]
    argv += ["--aws-endpoint", aws["endpoint"], "--table", aws["table"], "--bucket", aws["bucket"]]
    with log.open("wb") as out:
        child = fork_server().spawn(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield LocalServer(_wait_ready(child, log), key, child.pid)
    finally:
        child.terminate()
        try:
            child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=STOP_TIMEOUT_S)


def _wait_ready(child: Forked, log: Path) -> str:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("READY "):
                return line.removeprefix("READY ").strip()
        assert child.poll() is None, f"the server exited:\n{log.read_text(errors='replace')}"
        time.sleep(0.05)
    raise AssertionError(f"the server was not ready in {READY_TIMEOUT_S} s:\n{log.read_text()}")


def _run_id() -> str:
    return f"run_{uuid.uuid4().hex}"
