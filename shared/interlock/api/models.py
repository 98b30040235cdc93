"""Request bodies: AG-UI inputs parsed with the protocol's own models, answers checked.

Every parse either returns a typed value or raises a domain error the error map turns
into a stable 4xx; nothing is written before a body has been fully validated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ag_ui.core import RunAgentInput
from pydantic import ValidationError

from interlock import keys
from interlock.api.bodies import bounded_json
from interlock.api.errors import BadRequest, IncompleteResume
from interlock.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class RunRequest:
    """A new turn: the chat, the prompt (last user message) and the AG-UI input."""

    chat_id: str
    run_id: str
    prompt: str
    input: RunAgentInput


@dataclass(frozen=True, slots=True)
class ResumeRequest:
    """An answer to the open request of a chat."""

    chat_id: str
    run_id: str
    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any
    secret: str
    input: RunAgentInput


def parse_run(body: str | None) -> RunRequest:
    """Parse a `RunAgentInput` that starts a turn."""
    run_input = _run_input(body)
    if run_input.resume:
        raise InvalidInput("this input carries resume entries: send it to /resume")
    return RunRequest(
        chat_id=keys.checked_id(run_input.thread_id, "threadId"),
        run_id=keys.checked_id(run_input.run_id, "runId"),
        prompt=_prompt(run_input),
        input=run_input,
    )


def parse_resume(body: str | None) -> ResumeRequest:
    """Parse a `RunAgentInput` that answers exactly one interrupt."""
    run_input = _run_input(body)
    entries = run_input.resume or []
    if len(entries) != 1:
        raise IncompleteResume(
            f"a resume must answer exactly one interrupt; this one has {len(entries)} entries"
        )
    entry = entries[0]
    secret = (entry.metadata or {}).get("secret")
    if not isinstance(secret, str) or not secret:
        raise InvalidInput("the resume entry must carry the request's secret in metadata.secret")
    # The answer itself is checked against the stored card's rules by the service,
    # before the claim: the card is not known until the pointer is read.
    payload = entry.payload
    return ResumeRequest(
        chat_id=keys.checked_id(run_input.thread_id, "threadId"),
        run_id=keys.checked_id(run_input.run_id, "runId"),
        interrupt_id=_interrupt_id(entry.interrupt_id),
        status=entry.status,
        payload=payload,
        secret=secret,
        input=run_input,
    )


def _interrupt_id(value: str) -> str:
    # Echoed back in errors and events: printable ASCII of a bounded length only.
    if not (0 < len(value) <= 256 and value.isascii() and value.isprintable()):
        raise InvalidInput("interruptId must be 1-256 printable ASCII characters")
    return value


def _run_input(body: str | None) -> RunAgentInput:
    data = bounded_json(body)
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"not an AG-UI RunAgentInput: {_first(exc)}") from None


def _prompt(run_input: RunAgentInput) -> str:
    for message in reversed(run_input.messages):
        if message.role == "user":
            content = message.content
            if isinstance(content, str):
                return content
            texts = [getattr(part, "text", "") for part in content]
            return "\n".join(t for t in texts if t)
    raise InvalidInput("the input has no user message to answer")


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ()))
    return f"{where}: {error.get('msg')}" if where else str(error.get("msg"))
