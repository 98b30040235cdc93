"""Request bodies: AG-UI inputs parsed with the protocol's own models, answers checked.

Every parse either returns a typed value or raises a domain error the error map turns
into a stable 4xx; nothing is written before a body has been fully validated.
"""

from __future__ import annotations

from dataclasses import dataclass

from ag_ui.core import RunAgentInput
from pydantic import ValidationError

from interlock import keys
from interlock.answers import Reply
from interlock.api.bodies import bounded_json
from interlock.api.errors import BadRequest, IncompleteResume
from interlock.errors import InterlockError, InvalidInput, validation_message


@dataclass(frozen=True, slots=True)
class RunRequest:
    """A new turn: the chat, the prompt (last user message) and the AG-UI input."""

    chat_id: str
    run_id: str
    prompt: str | None  # None: no user message, the client resyncs the thread
    input: RunAgentInput


@dataclass(frozen=True, slots=True)
class ResumeRequest:
    """An answer to the open request of a chat: one entry per interrupt it holds."""

    chat_id: str
    run_id: str
    replies: tuple[Reply, ...]
    secret: str | None  # None: the resume carries no one secret (`secret_of` refuses it)
    input: RunAgentInput

    def secret_of(self) -> str:
        """The request's secret the resume carries.

        Raises:
            InvalidInput: none, or several: refused by the interrupt rules, so a client
                reading the stream hears it in the stream, `RUN_ERROR` (one that
                dropped the `STATE_SNAPSHOT` carrying it, say), any other as HTTP 422.
        """
        if self.secret is None:
            raise InvalidInput(
                "the resume must carry the request's one secret: in the run's state "
                "(state.interlock.secret) or in the entries' metadata.secret"
            )
        return self.secret


def carries_resume(body: str | None) -> bool:
    """Whether a valid `RunAgentInput` answers interrupts (a malformed body is left to
    the parse that follows, which names its problem)."""
    try:
        return bool(_run_input(body).resume)
    except InterlockError:
        return False


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


MAX_ENTRIES = 16


def parse_resume(body: str | None) -> ResumeRequest:
    """Parse a `RunAgentInput` that answers the open interrupts of a chat.

    Every entry answers one interrupt of the same request, so they carry the same
    secret: in `metadata.secret` (entries after the first may leave it out), or, as an
    unmodified AG-UI client sends it back by itself, in the run's state
    (`state.interlock.secret`, from the `STATE_SNAPSHOT` before the interrupt). Whether
    the entries cover every open interrupt is checked against the stored request.
    """
    run_input = _run_input(body)
    entries = run_input.resume or []
    if not entries:
        raise IncompleteResume("a resume must answer the open interrupts; it has no entries")
    if len(entries) > MAX_ENTRIES:
        raise InvalidInput(f"a resume answers at most {MAX_ENTRIES} interrupts")
    secrets = {(e.metadata or {}).get("secret") for e in entries} - {None}
    secret = (entries[0].metadata or {}).get("secret") or state_secret(run_input.state)
    if not isinstance(secret, str) or not secret or not secrets <= {secret}:
        secret = None  # refused once the response is a stream (`ResumeRequest.secret_of`)
    # Each answer is checked against its stored card's rules by the service, before
    # the claim: the cards are not known until the pointer is read.
    replies = tuple(Reply(_interrupt_id(e.interrupt_id), e.status, e.payload) for e in entries)
    return ResumeRequest(
        chat_id=keys.checked_id(run_input.thread_id, "threadId"),
        run_id=keys.checked_id(run_input.run_id, "runId"),
        replies=replies,
        secret=secret,
        input=run_input,
    )


STATE_KEY = "interlock"
"""Where in an AG-UI run's state Interlock keeps what a client carries for it."""


def state_secret(state: object) -> str | None:
    """The secret a run's state carries back (`state.interlock.secret`), if any."""
    mine = state.get(STATE_KEY) if isinstance(state, dict) else None
    secret = mine.get("secret") if isinstance(mine, dict) else None
    return secret if isinstance(secret, str) and secret else None


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
        raise InvalidInput(f"not an AG-UI RunAgentInput: {validation_message(exc)}") from None


def _prompt(run_input: RunAgentInput) -> str | None:
    """The last message when it is the user's (a new turn); None when the input ends on
    anything else or has no message at all (the client resyncs the thread)."""
    if not run_input.messages or run_input.messages[-1].role != "user":
        return None
    content = run_input.messages[-1].content
    if isinstance(content, str):
        return content
    texts = [getattr(part, "text", "") for part in content]
    return "\n".join(t for t in texts if t)
