"""Interlock's side of the peer bench: two resumes race through the local server.

One turn pauses on the demo's download approval (`POST /runs`), then two threads send
the same approval to `POST /resume` at once. The demo's `fetch_url` downloads through
the runtime's fetch transport (it records no outbox row: the outbox is for effects
such as `send_report`), so downloads are counted there, each held open until the race
is decided. Also counted: model calls and tool bodies entered per phase, from the
scripted model and the AG-UI events, so reruns on resume can be compared with a peer's.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.api_cycle import _restoring_environment, _serve, approval
from bench.peers.effects import Downloads
from local.emulator import Emulator

PROMPT = "Download the table"  # the same prompt bench/api_cycle.py sends


def race(emulator: Emulator) -> dict[str, Any]:
    """Pause once, race two identical approvals; downloads, outcomes and reruns."""
    return _restoring_environment(_race, emulator)


def _race(emulator: Emulator) -> dict[str, Any]:
    from interlock.harness import transport

    downloads = Downloads(transport.demo_fetch, racers=2)
    chat = f"race-{uuid.uuid4().hex[:12]}"  # its own table and chat: moto's state is per process
    with _counted(downloads) as model_calls:
        server, token = _serve(emulator, chat)
        url = f"http://127.0.0.1:{server.port}"
        try:
            paused = _post(url, "/runs", token, _turn(chat))[1]
            calls_to_pause = model_calls.total()
            answer = approval(chat, paused[-1]["outcome"]["interrupts"][0])
            outcomes = _concurrently(url, token, answer, downloads)
        finally:
            server.shutdown()
    winner = next((events for status, events in outcomes if status == 200), [])
    return {
        "reruns": _reruns(paused, winner, calls_to_pause, model_calls.total()),
        "race": {
            "resumes": 2,
            "downloads": downloads.count,
            "http_statuses": sorted(status for status, _ in outcomes),
            "outcomes": [_outcome(status, events) for status, events in outcomes],
        },
    }


@contextmanager
def _counted(downloads: Downloads) -> Iterator[Counter[str]]:
    """The demo transport replaced by the counted one, and model calls counted, while
    inside. Both are read when the runtime is built, so this wraps the server's start."""
    from interlock.api import wiring
    from interlock.harness import transport
    from interlock.harness.model import ScriptedModel

    calls: Counter[str] = Counter()
    stream = ScriptedModel.stream

    def counting(self: ScriptedModel, *args: Any, **kwargs: Any) -> Any:
        calls["model"] += 1
        return stream(self, *args, **kwargs)

    demo_fetch = transport.demo_fetch
    transport.demo_fetch = downloads
    ScriptedModel.stream = counting  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        transport.demo_fetch = demo_fetch
        ScriptedModel.stream = stream  # type: ignore[method-assign]
        wiring.runtime.cache_clear()  # the next server builds its runtime afresh


def _concurrently(
    url: str, token: str, answer: dict[str, Any], downloads: Downloads
) -> list[tuple[int, list[dict[str, Any]]]]:
    """Two threads send the same answer at the same moment."""
    start = threading.Barrier(2)
    outcomes: list[tuple[int, list[dict[str, Any]]]] = []

    def resume() -> None:
        start.wait()
        outcome = _post(url, "/resume", token, answer)
        outcomes.append(outcome)
        downloads.answered()

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def _reruns(
    paused: list[dict[str, Any]], resumed: list[dict[str, Any]], to_pause: int, total: int
) -> dict[str, Any]:
    """Model calls and tool bodies entered per phase; what the resume entered again.

    A tool body is entered by every call that starts, and again on resume by a call
    that started before the pause and gets its result only now (Strands re-runs an
    interrupted tool from the top, as LangGraph re-runs its node).
    """
    started_before = {e["toolCallId"]: e["toolCallName"] for e in paused if _is(e, "START")}
    names = dict(started_before)
    names.update({e["toolCallId"]: e["toolCallName"] for e in resumed if _is(e, "START")})
    rerun = [
        e["toolCallId"] for e in resumed if _is(e, "RESULT") and e["toolCallId"] in started_before
    ]
    in_resume = Counter(names[e["toolCallId"]] for e in resumed if _is(e, "START"))
    in_resume.update(started_before[i] for i in rerun)
    return {
        "pause": {"model_calls": to_pause, "tool_bodies": dict(Counter(started_before.values()))},
        "resume": {"model_calls": total - to_pause, "tool_bodies": dict(in_resume)},
        "rerun_on_resume": {
            "model_calls": 0,
            "tool_bodies": Counter(started_before[i] for i in rerun),
        },
    }


def _is(event: dict[str, Any], kind: str) -> bool:
    return bool(event.get("type") == f"TOOL_CALL_{kind}")


def _outcome(status: int, events: list[dict[str, Any]]) -> dict[str, Any]:
    """What one racer heard: the run's outcome, or the refusal's error code."""
    last = events[-1] if events else {}
    refused = last.get("error", {}).get("code")
    return {"status": status, "result": refused or last.get("result", {}).get("outcome")}


def _turn(chat: str) -> dict[str, Any]:
    return {
        "threadId": chat,
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": PROMPT}],
    }


def _post(
    url: str, path: str, token: str, body: dict[str, Any]
) -> tuple[int, list[dict[str, Any]]]:
    """The status and the events (or the error body, as one event) of one request."""
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, [json.loads(refused.read() or b"{}")]
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    return status, events
