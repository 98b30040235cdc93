"""Everything the model writes that a surface shows is scrubbed where it enters: its text
(streamed in pieces a credential may straddle) and its tool inputs reach no event,
snapshot, journal, stored answer or saved turn with a secret in them, while its signed
reasoning passes as written (a provider refuses edited thinking, and no surface shows
it); and a provider's error that echoes the configured key shows it to nobody, in the
run's error or in a log."""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from collections.abc import AsyncIterable
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from interlock.api.agui import encode, run_events
from interlock.api.errors import error_body
from interlock.config import ModelSpec
from interlock.errors import ModelFailed
from interlock.harness.agent import ModelConfig, build_model
from interlock.harness.model import Scenario, ScriptedModel
from interlock.harness.scrub import UrlScrubbedModel, configured_secrets, failure_secrets
from interlock.outcomes import TurnResult
from interlock.ports import Stores
from interlock.progress import ProgressEvent
from interlock.resume import resume_turn
from interlock.scrubbing import scrub_text
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, TurnLimits, run_turn
from tests.agent.support import Transport, everything_stored, scenario

# Each marker is the secret part of one spelling; none is a part of another.
MARKERS = ["Zq1aa11", "Zq2bb22", "Zq3cc33", "Zq4dd44", "Zq5ee55", "Zq6ff66"]
MARKERS += ["Zq7gg77", "Zq8hh88", "Zq9ii99", "Zq0jj00", "Zq1kk11", "Zq2ll22"]
LEAKY_TEXT = (
    "I read files.example.org/r.csv?token=Zq1aa11 and https\uff1a//x.example.org/a?token="
    "Zq2bb22 with api_key=Zq3cc33, Authorization: Bearer Zq4dd44xyz and "
    '{"password": "Zq5ee55"}; the key AKIAZQ6FF66GG77HH8XY, '
    "sk-proj-Zq7gg77hhhhhhhhhhhhhhhhhhhhhhhhhhhhhh, xoxb-Zq8hh88-iiiiii, "
    "123456789:Zq9ii99jjjjjjjjjjjjjjjjjjjjjjjjjjjjjj, eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0"
    ".Zq0jj00sig, to\u200bken=Zq1kk11 and https://bob:Zq2ll22@x.example.org/b. The token "
    "budget is 5."
)
URL = "https://data.example.org/table.csv?token=Zq1aa11"


class ChoppyModel(ScriptedModel):
    """The scripted model, streaming its text three characters at a time, so a
    credential straddles deltas."""

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        async for event in super().stream(messages, tool_specs, system_prompt, **kwargs):
            text = event.get("contentBlockDelta", {}).get("delta", {}).get("text")
            if text is None:
                yield event
                continue
            for at in range(0, len(text), 3):
                yield {"contentBlockDelta": {"delta": {"text": text[at : at + 3]}}}


def _paused_then_approved(
    rt: Runtime, caller: Caller, chat: str, seen: list[ProgressEvent]
) -> tuple[TurnResult, TurnResult]:
    """A turn that pauses for approval, and its resume, approved."""
    paused = run_turn(rt, caller, chat, "go", progress=seen.append)
    assert paused.offer is not None
    done = resume_turn(
        rt,
        caller,
        chat,
        interrupt_id=paused.offer.request.interrupt_id,
        secret=paused.offer.secret,
        status="resolved",
        payload={"decision": "approve"},
        progress=seen.append,
    )
    return paused, done


def _leaked(text: str) -> list[str]:
    return [marker for marker in MARKERS if marker.lower() in text.lower()]


def test_secrets_in_the_models_text_and_tool_input_reach_nothing(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    # Given a model whose text and tool input carry credentials in many spellings
    script = scenario(
        [
            {"text": LEAKY_TEXT},
            {"tool": "request_approval", "input": {"reason": LEAKY_TEXT, "urls": [URL]}},
        ],
        [{"text": "Done. " + LEAKY_TEXT}],
    )
    rt = Runtime(
        stores,
        lambda: ChoppyModel([script]),
        clock=clock,
        fetch=Transport(),
        limits=TurnLimits(heartbeat_s=60),
    )
    alice = Caller("alice")
    seen: list[ProgressEvent] = []

    # When the run pauses for approval, and resumes approved
    paused, done = _paused_then_approved(rt, alice, "c-all", seen)

    # Then no credential reached a streamed event, an answer, a record or an object
    streamed = encode(run_events("c-all", "r1", paused)) + encode(run_events("c-all", "r2", done))
    assert _leaked(streamed) == []
    assert _leaked(repr(seen)) == []
    assert _leaked(json.dumps(paused.offer.request.card)) == []
    assert _leaked(everything_stored(aws)) == []
    # And the text around them was kept, streamed in more than one piece
    assert "The token budget is 5." in (done.text or "")
    assert done.text == "Done. " + scrub_text(LEAKY_TEXT)
    assert sum(type(event).__name__ == "TextDelta" for event in seen) > 3


THINKING = "I will fetch https://x.example.org/a?token=Zr0thinks first."


class ThinkingModel(ScriptedModel):
    """The scripted model, signing a line of thinking before each answer, as Claude with
    extended thinking does; it keeps every conversation it is sent."""

    def __init__(self, scenarios: list[Scenario]) -> None:
        super().__init__(scenarios)
        self.sent: list[Messages] = []

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        self.sent.append(json.loads(json.dumps(messages)))
        async for event in super().stream(messages, tool_specs, system_prompt, **kwargs):
            yield event
            if "messageStart" in event:
                signature = f"sig-{len(self.sent)}"
                yield {"contentBlockDelta": {"delta": {"reasoningContent": {"text": THINKING}}}}
                yield {
                    "contentBlockDelta": {"delta": {"reasoningContent": {"signature": signature}}}
                }
                yield {"contentBlockStop": {}}


def test_signed_reasoning_is_sent_back_as_written_and_shown_nowhere(
    stores: Stores, clock: ManualClock
) -> None:
    # Given a model that signs its thinking, which carries a URL with a token
    ask = {"reason": "I need the table.", "urls": ["https://data.example.org/table.csv"]}
    model = ThinkingModel(
        [scenario([{"tool": "request_approval", "input": ask}], [{"text": "Done."}])]
    )
    rt = Runtime(
        stores, lambda: model, clock=clock, fetch=Transport(), limits=TurnLimits(heartbeat_s=60)
    )
    alice = Caller("alice")
    seen: list[ProgressEvent] = []

    # When the run pauses for approval, and resumes approved
    paused, done = _paused_then_approved(rt, alice, "c-think", seen)

    # Then the model is sent its thinking back unedited, with its signature
    thought = {"reasoningContent": {"reasoningText": {"text": THINKING, "signature": "sig-1"}}}
    assert thought in model.sent[-1][-2]["content"]
    # And no surface shows it: not the streamed events, the progress or the answer
    streamed = encode(run_events("c-think", "r1", paused))
    streamed += encode(run_events("c-think", "r2", done))
    for shown in (streamed, repr(seen), done.text or "", json.dumps(paused.offer.request.card)):
        assert "Zr0thinks" not in shown


class _Events:
    """A model that streams the given events."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterable[dict[str, Any]]:
        for event in self.events:
            yield event


def _pieces(text: str, wrap: Any) -> list[dict[str, Any]]:
    return [{"contentBlockDelta": {"delta": wrap(text[i : i + 4])}} for i in range(0, len(text), 4)]


def _deltas(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if kind in e.get("contentBlockDelta", {}).get("delta", {})]


def test_text_and_tool_input_are_scrubbed_as_they_stream_and_reasoning_is_not() -> None:
    # Given a model that reasons (signing its thinking), writes and calls a tool, each
    # carrying credentials
    events = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"start": {}}},
        *_pieces(LEAKY_TEXT, lambda t: {"reasoningContent": {"text": t}}),
        {"contentBlockDelta": {"delta": {"reasoningContent": {"signature": "sig-1"}}}},
        {"contentBlockStop": {}},
        {"contentBlockStart": {"start": {}}},
        *_pieces(LEAKY_TEXT, lambda t: {"text": t}),
        {"contentBlockStop": {}},
        {"contentBlockStart": {"start": {}}},
        *_pieces("then " + URL, lambda t: {"reasoningContent": {"text": t}}),
        {"contentBlockDelta": {"delta": {"reasoningContent": {"signature": "sig-2"}}}},
        {"contentBlockStop": {}},
        {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "t1", "name": "fetch_url"}}}},
        *_pieces(json.dumps({"url": URL, "note": LEAKY_TEXT}), lambda t: {"toolUse": {"input": t}}),
        {"contentBlockStop": {}},
        {"messageStop": {"stopReason": "tool_use"}},
    ]
    sent = json.dumps(_deltas(events, "reasoningContent"))
    model = UrlScrubbedModel(_Events(events))  # type: ignore[arg-type]

    # When it streams through the wrapper
    async def collect() -> list[Any]:
        return [event async for event in model.stream([], None, None)]

    out = asyncio.run(collect())

    # Then its reasoning passes byte for byte, each signature after the thinking it signs
    assert json.dumps(_deltas(out, "reasoningContent")) == sent
    # And nothing of the credentials is left in its text or its tool input
    shown = [e for e in out if e not in _deltas(out, "reasoningContent")]
    assert _leaked(json.dumps(shown)) == []
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in _deltas(out, "text"))
    assert text == scrub_text(LEAKY_TEXT)
    tool_input = "".join(
        e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in _deltas(out, "toolUse")
    )
    assert json.loads(tool_input)["url"] == "https://data.example.org/table.csv"
    # And every block keeps its place: the text between the two reasoning blocks
    kinds = [next(iter(e)) for e in out]
    assert kinds[0] == "messageStart" and kinds[-1] == "messageStop"
    assert kinds.count("contentBlockStop") == 4
    first_sig, second_sig = (
        i for i, e in enumerate(out) if "signature" in json.dumps(e.get("contentBlockDelta", {}))
    )
    text_at = [i for i, e in enumerate(out) if e in _deltas(out, "text")]
    assert first_sig < min(text_at) and max(text_at) < second_sig


KEY = "local-endpoint-credential-7Hq2"
ENDPOINT = "https://llm.example.org/v1/chat/completions"


def _echoing_the_key(with_header: bool) -> openai.APIError:
    said = f"Incorrect API key provided: {KEY}. You can find your key at /account."
    headers = {"Authorization": f"Bearer {KEY}"} if with_header else {}
    request = httpx.Request("POST", ENDPOINT, headers=headers)
    if with_header:
        response = httpx.Response(401, request=request)
        return openai.AuthenticationError(said, response=response, body={"message": said})
    return openai.APIError(said, request, body={"error": {"message": said}})


class RefusingModel(ScriptedModel):
    """A model built with a key whose endpoint refuses it, echoing it back."""

    def __init__(self, with_header: bool) -> None:
        super().__init__([scenario([{"text": "never"}])])
        self.client_args = {"api_key": KEY, "base_url": "https://llm.example.org/v1"}
        self._with_header = with_header

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        raise _echoing_the_key(self._with_header)
        yield {}  # pragma: no cover - makes this an async generator


@pytest.mark.parametrize(
    "with_header",
    [
        pytest.param(True, id="key-in-the-request-headers"),
        pytest.param(False, id="key-only-in-the-configuration"),
    ],
)
def test_a_provider_error_echoing_the_key_never_shows_it(
    stores: Stores,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    with_header: bool,
) -> None:
    # Given a model whose endpoint refuses its key and says it back
    caplog.set_level(logging.DEBUG)
    rt = Runtime(stores, lambda: RefusingModel(with_header), clock=clock)

    # When a turn runs
    with pytest.raises(ModelFailed) as failed:
        run_turn(rt, Caller("alice"), "c-key", "go")

    # Then the run's error names the refusal, not the key
    message = str(failed.value)
    assert "Incorrect API key provided" in message and KEY not in message
    assert KEY not in json.dumps(error_body(failed.value)[1])
    # And neither its traceback (with the provider's error it was raised from) nor any
    # log or output shows it
    assert KEY not in "".join(traceback.format_exception(failed.value))
    assert KEY not in caplog.text
    printed = capsys.readouterr()
    assert KEY not in printed.out + printed.err


def test_the_configured_key_is_known_where_the_model_is_built() -> None:
    spec = ModelSpec("openai", "local/llama", base_url="https://llm.example.org/v1")
    model = build_model(ModelConfig(spec, api_key=lambda: KEY))
    assert configured_secrets(UrlScrubbedModel(model)) == (KEY,)
    assert KEY in failure_secrets(_echoing_the_key(with_header=True))


def test_an_error_of_structured_output_is_scrubbed_too() -> None:
    class Refusing:
        def __init__(self) -> None:
            self.client_args = {"api_key": KEY}

        async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncIterable[Any]:
            raise _echoing_the_key(with_header=False)
            yield {}  # pragma: no cover - makes this an async generator

    model = UrlScrubbedModel(Refusing())  # type: ignore[arg-type]

    async def ask() -> None:
        async for _ in model.structured_output(BaseModel, []):
            pass

    with pytest.raises(openai.APIError) as failed:
        asyncio.run(ask())
    assert KEY not in "".join(traceback.format_exception(failed.value))
    assert KEY not in json.dumps(failed.value.body)
