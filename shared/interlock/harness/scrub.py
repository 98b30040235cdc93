"""One sanitiser for everything the model writes that reaches a surface: credentials,
query strings, fragments and secret values never enter the run.

A model may put a URL carrying `?token=...`, an `api_key=...` or a key it saw into a
tool call or its text. Both are streamed to the client, kept in the agent's messages
(so in its snapshot), recorded in the journal and saved with the answer, so the only
safe place to remove it is where it enters: this wrapper rewrites each tool call's
input, and each text delta, as the model streams them, before Strands assembles the
message. Calls it changed are noted in the request context, so the tool can tell the
model what was removed.

Reasoning passes through as the model wrote it, text and signature alike: a provider
that signs its thinking (Claude's extended thinking) refuses an edited block when the
tool loop sends it back, and no surface of Interlock shows reasoning (the progress
relay and the answer carry text and tool calls only).

A provider's error can echo the configured API key; the wrapper scrubs the error (and
every error it was raised from) before it travels on to a message or a log.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Iterator
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from interlock.context import current_request
from interlock.harness.wrapped import WrappedModel
from interlock.scrubbing import StreamScrubber, scrub_error, scrub_text

T = TypeVar("T", bound=BaseModel)

SCRUBBED_NOTE = (
    "Note: the query string and fragment were removed from the URL, and any credential "
    "from the call; they are never sent, shown or stored."
)

# Where the configured key of a provider's client stands (`client_args` of Strands'
# OpenAI, LiteLLM and Anthropic models) and the headers a request carries it in.
_SECRET_ARGS = ("api_key", "auth_token", "token", "password", "secret", "aws_secret_access_key")
_SECRET_HEADERS = ("authorization", "api-key", "x-api-key", "proxy-authorization")
_CHAIN_LIMIT = 10


def scrub(value: Any) -> tuple[Any, bool]:
    """`value` with every string in it scrubbed (`interlock.scrubbing.scrub_text`: URLs cut
    to scheme, host and path, secret values redacted), and whether any was."""
    if isinstance(value, str):
        return _scrub_string(value)
    if isinstance(value, list):
        items = [scrub(item) for item in value]
        return [item for item, _ in items], any(changed for _, changed in items)
    if isinstance(value, dict):
        fields = {key: scrub(item) for key, item in value.items()}
        return {k: item for k, (item, _) in fields.items()}, any(c for _, c in fields.values())
    return value, False


def _scrub_string(text: str) -> tuple[str, bool]:
    # Every URL in the string, not only a string that is one: a reason or a prompt
    # that repeats a URL in prose carries its token just the same.
    scrubbed = scrub_text(text)
    return scrubbed, scrubbed != text


def configured_secrets(model: Model) -> tuple[str, ...]:
    """The credentials `model` was built with (an OpenAI-compatible endpoint's key in its
    client arguments, an `Authorization` default header), through any wrappers."""
    found: list[str] = []
    seen: Any = model
    for _ in range(_CHAIN_LIMIT):
        args = getattr(seen, "client_args", None)
        if isinstance(args, dict):
            found += [v for k, v in args.items() if k in _SECRET_ARGS and isinstance(v, str)]
            headers = args.get("default_headers")
            if isinstance(headers, dict):
                found += _header_secrets(headers)
        seen = getattr(seen, "inner", None)
        if seen is None:
            break
    return tuple(dict.fromkeys(found))


def failure_secrets(failure: BaseException) -> set[str]:
    """Credentials the request behind `failure` carried (an SDK error keeps the request
    it failed on), through the errors it was raised from."""
    found: set[str] = set()
    for error in _chain(failure):
        requests = (getattr(error, "request", None), _request_of(getattr(error, "response", None)))
        for request in requests:
            headers = getattr(request, "headers", None)
            if headers is not None:
                with contextlib.suppress(Exception):  # not a mapping after all
                    found.update(_header_secrets(headers))
    return found


def scrub_failure(failure: BaseException, secrets: Iterable[str] = ()) -> None:
    """Scrub, in place, the text of `failure` and of every error it was raised from: a
    provider's error may echo the key, and the message, `str()` and traceback of these
    errors reach the run's error message and the logs."""
    values = {*secrets, *failure_secrets(failure)}
    for error in _chain(failure):
        with contextlib.suppress(Exception):  # an error type that refuses new arguments
            error.args = tuple(
                scrub_error(arg, values) if isinstance(arg, str) else arg for arg in error.args
            )
        for name in ("message", "body"):
            value = getattr(error, name, None)
            if isinstance(value, str | dict | list):
                with contextlib.suppress(Exception):  # a read-only property
                    setattr(error, name, _scrubbed_value(value, values))
        response = getattr(error, "response", None)
        if isinstance(response, dict) and isinstance(response.get("Error"), dict):
            # botocore's ClientError words its message from here.
            response["Error"] = _scrubbed_value(response["Error"], values)


def _scrubbed_value(value: Any, secrets: set[str]) -> Any:
    if isinstance(value, str):
        return scrub_error(value, secrets)
    if isinstance(value, list):
        return [_scrubbed_value(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: _scrubbed_value(item, secrets) for key, item in value.items()}
    return value


def _chain(failure: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = failure
    met: set[int] = set()
    while seen is not None and id(seen) not in met and len(met) < _CHAIN_LIMIT:
        met.add(id(seen))
        yield seen
        seen = seen.__cause__ or seen.__context__


def _request_of(response: Any) -> Any:
    # httpx raises when a response was built without its request.
    with contextlib.suppress(Exception):
        return getattr(response, "request", None)
    return None


def _header_secrets(headers: Any) -> list[str]:
    found = []
    for name in _SECRET_HEADERS:
        value = headers.get(name) or headers.get(name.title())
        if isinstance(value, str) and value:
            scheme, _, credential = value.partition(" ")
            found.append(credential if credential and scheme.isalpha() else value)
    return found


class UrlScrubbedModel(WrappedModel):
    """Wraps a model: every tool call and text it streams reaches Strands scrubbed (its
    reasoning untouched), and every error it raises is scrubbed of its configured key."""

    def __init__(self, inner: Model) -> None:
        super().__init__(inner)
        self.secrets = configured_secrets(inner)

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        """The wrapped model's stream, its text and tool inputs scrubbed."""
        try:
            async for event in self._scrubbed(
                self.inner.stream(messages, tool_specs, system_prompt, **kwargs)
            ):
                yield event
        except Exception as failure:
            scrub_failure(failure, self.secrets)
            raise

    async def structured_output(
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        """The wrapped model's structured output; an error it raises is scrubbed."""
        try:
            async for event in self.inner.structured_output(
                output_model, prompt, system_prompt, **kwargs
            ):
                yield event
        except Exception as failure:
            scrub_failure(failure, self.secrets)
            raise

    async def _scrubbed(self, events: AsyncIterable[StreamEvent]) -> AsyncIterable[StreamEvent]:
        tool_use_id: str | None = None
        buffered: list[str] = []
        text = _HeldText()
        async for event in events:
            raw: Any = event
            start = raw.get("contentBlockStart", {}).get("start", {}).get("toolUse")
            delta = raw.get("contentBlockDelta", {}).get("delta", {})
            if isinstance(delta.get("text"), str):
                if released := text.push(raw):
                    yield released
                continue  # held back until a word boundary makes it safe
            if released := text.flush():
                yield released  # before any other event, so the order is kept
            if start is not None:
                tool_use_id, buffered = start.get("toolUseId"), []
            elif "toolUse" in delta and tool_use_id is not None:
                buffered.append(delta["toolUse"].get("input", ""))
                continue  # held back until the whole input is known
            elif "contentBlockStop" in raw and tool_use_id is not None:
                yield self._whole_input(tool_use_id, "".join(buffered))
                tool_use_id = None
            yield event
        if released := text.flush():
            yield released

    def _whole_input(self, tool_use_id: str, text: str) -> StreamEvent:
        try:
            cleaned, changed = scrub(json.loads(text)) if text else ({}, False)
        except json.JSONDecodeError:
            # Strands will not parse it either, but it logs and keeps what it got.
            cleaned, changed = _scrub_string(text)
        if changed:
            _noted(tool_use_id)
        body = json.dumps(cleaned) if not isinstance(cleaned, str) else cleaned
        return {"contentBlockDelta": {"delta": {"toolUse": {"input": body}}}}


class _HeldText:
    """Text deltas held until they can be released scrubbed, and the last event that
    carried one (so a released piece keeps that event's shape, its block index among
    it)."""

    def __init__(self) -> None:
        self._scrubber = StreamScrubber()
        self._template: dict[str, Any] = {}

    def push(self, event: dict[str, Any]) -> StreamEvent | None:
        """The scrubbed text `event`'s delta lets out, as an event (None for none)."""
        self._template = event
        return self._event(self._scrubber.push(event["contentBlockDelta"]["delta"]["text"]))

    def flush(self) -> StreamEvent | None:
        """Everything still held, scrubbed, as an event (None for nothing)."""
        return self._event(self._scrubber.flush())

    def _event(self, text: str) -> StreamEvent | None:
        if not text:
            return None
        block = dict(self._template.get("contentBlockDelta", {}))
        block["delta"] = {**block.get("delta", {}), "text": text}
        released: Any = {**self._template, "contentBlockDelta": block}
        return released  # type: ignore[no-any-return]


def _noted(tool_use_id: str) -> None:
    # Without a request context (a bare agent in a test) there is nobody to tell.
    with contextlib.suppress(RuntimeError):
        current_request().scrubbed.add(tool_use_id)
