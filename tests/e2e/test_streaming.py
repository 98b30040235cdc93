"""Runs stream over real HTTP: events as they happen, heartbeats while a step is silent,
and a run that outlives the client that started it.

The local server runs a deliberately slow scripted model (`scripted:1200/40`: 1.2 s of
silence before each answer, 40 ms between streamed words) and sends a heartbeat after
0.3 s of silence. The assertions are causal rather than timed: what the client had read
before the run had ended, as the store shows it.
"""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from ag_ui.core import Interrupt

from local.emulator import Emulator
from tests.conftest import fresh_storage
from tests.e2e.http_client import (
    LocalServer,
    answer,
    local_server,
    resume_body,
    run_body,
    secret_of,
)
from tests.e2e.support import wait_for

pytestmark = pytest.mark.server

HEARTBEAT = b": keepalive"


@pytest.fixture(scope="module")
def slow_server(
    emulator: Emulator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    aws = fresh_storage(emulator.endpoint, "interlock-streaming")
    log = tmp_path_factory.mktemp("streaming-server") / "server.log"
    slow = {"INTERLOCK_MODEL": "scripted:1200/40", "INTERLOCK_HEARTBEAT_S": "0.3"}
    with local_server(aws, log, slow) as running:
        yield running


class Reader:
    """Reads an SSE response a chunk at a time, keeping each read's events apart."""

    def __init__(self, server: LocalServer, user: str, body: str) -> None:
        url = urlsplit(server.url)
        self.connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        token = server.client(user, ["reporter"]).token
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.connection.request("POST", "/runs", body=body, headers=headers)
        self.response = self.connection.getresponse()
        assert self.response.status == 200
        assert self.response.getheader("Content-Type") == "text/event-stream"
        self._buffer = b""

    def next_read(self) -> list[bytes]:
        """The complete SSE frames of the next chunk the server sent ([] at the end)."""
        chunk = self.response.read1(65536)
        if not chunk:
            return []
        self._buffer += chunk
        *frames, self._buffer = self._buffer.split(b"\n\n")
        return frames or self.next_read()

    def close(self) -> None:
        self.connection.close()


def event_type(frame: bytes) -> str | None:
    if not frame.startswith(b"data:"):
        return None
    return str(json.loads(frame.removeprefix(b"data:"))["type"])


def read_all(reader: Reader) -> list[list[bytes]]:
    reads = []
    while frames := reader.next_read():
        reads.append(frames)
    reader.close()
    return reads


def types_of(reads: list[list[bytes]]) -> list[str | None]:
    return [event_type(f) for read in reads for f in read]


def read_of(reads: list[list[bytes]], kind: str) -> list[int]:
    """The indexes of the reads that carried an event of `kind`."""
    return [i for i, read in enumerate(reads) for f in read if event_type(f) == kind]


def test_text_streams_as_the_model_writes_with_heartbeats_while_it_is_silent(
    slow_server: LocalServer,
) -> None:
    chat = f"stream-{uuid.uuid4().hex[:8]}"
    client = slow_server.client("alice", ["reporter"])
    reader = Reader(slow_server, "alice", run_body(chat, "r1", "hello"))
    first = reader.next_read()
    # The first read is the run starting, while the turn is still running: the chat
    # refuses another turn until this one ends.
    assert [event_type(f) for f in first] == ["RUN_STARTED"]
    busy = client.call("POST", "/runs", run_body(chat, "r0", "hello"))
    assert busy.error() == (409, "turn_running")
    reads = [first, *read_all(reader)]

    types = types_of(reads)
    assert types[-1] == "RUN_FINISHED"
    # Heartbeats (SSE comments) came while the model was silent, before its first word
    assert None in types[1 : types.index("TEXT_MESSAGE_START")]
    assert all(f.startswith(HEARTBEAT) for read in reads for f in read if not event_type(f))
    # The text came a word at a time, over many reads, before the run finished
    deltas = read_of(reads, "TEXT_MESSAGE_CONTENT")
    assert len(deltas) > 5 and len(set(deltas)) > 3
    assert max(deltas) < read_of(reads, "RUN_FINISHED")[0]


def test_a_pause_and_its_resume_stream_the_tool_call_then_the_continuation(
    slow_server: LocalServer,
) -> None:
    chat = f"resume-{uuid.uuid4().hex[:8]}"
    reads = read_all(Reader(slow_server, "alice", run_body(chat, "r1", "send the weekly report")))
    types = types_of(reads)
    assert types.index("TOOL_CALL_START") < types.index("TOOL_CALL_END") < len(types) - 1
    finished = json.loads(reads[-1][-1].removeprefix(b"data:"))
    interrupts = finished["outcome"]["interrupts"]
    interrupt = Interrupt.model_validate(interrupts[0])
    entry = answer(interrupt, {"decision": "approve"}, secret_of(interrupt))

    # The resume goes to the same URL, as AG-UI's HttpAgent sends it
    reads = read_all(Reader(slow_server, "alice", resume_body(chat, "r2", [entry])))
    types = types_of(reads)
    # The paused call's result came first (no second start), then the model's answer
    assert "TOOL_CALL_START" not in types
    assert read_of(reads, "TOOL_CALL_RESULT")[0] < read_of(reads, "TEXT_MESSAGE_CONTENT")[0]
    assert types[-1] == "RUN_FINISHED"


def test_a_client_that_disconnects_loses_nothing(slow_server: LocalServer) -> None:
    chat = f"gone-{uuid.uuid4().hex[:8]}"
    client = slow_server.client("alice", ["reporter"])
    reader = Reader(slow_server, "alice", run_body(chat, "r1", "hello"))
    assert [event_type(f) for f in reader.next_read()] == ["RUN_STARTED"]
    reader.close()  # the client goes away while the model is still silent

    # The run goes on to its end and stores its answer
    def answered() -> bool:
        turns = client.get(f"/chats/{chat}/turns")["turns"]
        return any(t["role"] == "assistant" for t in turns)

    wait_for(answered, "the abandoned stream's run to finish")
    # Reconnecting: the audit trail after what the client last saw (nothing, in a new
    # chat) tells what happened since
    events = client.get(f"/chats/{chat}/events?after=0")["events"]
    assert [(e["type"], e["detail"]["turn"]) for e in events] == [("turn_completed", 1)]
    turns = client.get(f"/chats/{chat}/turns")["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant"]
    assert turns[1]["text"].startswith("Hello!")
