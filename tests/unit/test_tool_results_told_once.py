"""A streamed run tells each tool call's result once: the results a paused batch already
holds are told when the run pauses, and the run that resumes it does not tell a client
again what its input shows it has."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ag_ui.core import AssistantMessage, FunctionCall, RunAgentInput, ToolCall, ToolMessage

from interlock.api.agui import RunStream
from interlock.api.live import respond_live
from interlock.api.stream import told_results
from interlock.outcomes import TurnResult
from interlock.progress import Progress, Started, ToolFinished, ToolStarted

NOT_RUN = "Not run: request_approval must be called on its own."


def streamed(work: Any, told: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The events `work` streams, in order."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(respond_live(send, work, RunStream("chat-1", "run-1"), heartbeat_s=5, told=told))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    frames = body.decode().split("\n\n")
    return [json.loads(f.removeprefix("data: ")) for f in frames if f.startswith("data: ")]


def results(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["toolCallId"], e["content"]) for e in events if e["type"] == "TOOL_CALL_RESULT"]


def test_a_run_that_pauses_tells_the_results_its_batch_already_holds_before_it_ends() -> None:
    # Given a run whose batch made two calls: one waits on a card, a hook did not run one
    def work(progress: Progress) -> TurnResult:
        progress(Started())
        progress(ToolStarted("asks", "request_approval", {"reason": "r"}))
        progress(ToolStarted("held", "fetch_url", {"url": "https://a.example.org"}))
        calls = [
            {"id": "asks", "name": "request_approval", "input": {}, "result": None},
            {"id": "held", "name": "fetch_url", "input": {}, "result": NOT_RUN},
        ]
        return TurnResult("chat-1", "interrupted", tool_calls=calls)

    events = streamed(work)

    # Then the call that was not run is told so, once, before the run's end; the one
    # that waits has no result
    assert results(events) == [("held", NOT_RUN)]
    kinds = [e["type"] for e in events]
    assert kinds.index("TOOL_CALL_RESULT") < kinds.index("RUN_FINISHED")


def test_a_resumed_run_does_not_tell_a_client_again_a_result_it_has() -> None:
    # Given a client whose input carries the result the paused run told it
    call = ToolCall(id="held", function=FunctionCall(name="fetch_url", arguments="{}"))
    had = RunAgentInput(
        thread_id="chat-1",
        run_id="run-2",
        state={},
        messages=[
            AssistantMessage(id="held", tool_calls=[call]),
            ToolMessage(id="msg_held", tool_call_id="held", content=NOT_RUN),
        ],
        tools=[],
        context=[],
        forwarded_props={},
    )

    # When the resumed run appends the held result with the paused call's own
    def work(progress: Progress) -> TurnResult:
        progress(Started())
        progress(ToolFinished("held", NOT_RUN))
        progress(ToolFinished("asks", "Approved by the user."))
        return TurnResult("chat-1", "completed", text="Done.")

    events = streamed(work, told=told_results(had))

    # Then only the paused call's result is told
    assert results(events) == [("asks", "Approved by the user.")]
