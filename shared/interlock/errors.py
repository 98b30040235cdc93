"""Domain errors. Each carries a stable `code`; one module at the edge maps codes to HTTP.

The store raises these and nothing from botocore, so callers never handle AWS errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from interlock.records import RequestRecord


class InterlockError(Exception):
    """Base of every error Interlock raises on purpose."""

    code = "system_error"


class InvalidInput(InterlockError):
    """The caller sent something malformed; nothing was changed."""

    code = "invalid_payload"


class IncompleteResume(InvalidInput):
    """A resume must answer every interrupt the run paused on (AG-UI 1.0), each once."""

    code = "incomplete_resume"


class UnknownRequest(InterlockError):
    """No open request matches: absent, or another interrupt id."""

    code = "unknown"


class RequestExpired(InterlockError):
    """The request can no longer be answered (past its expiry, or expired by a check)."""

    code = "expired"


class RequestTimedOut(RequestExpired):
    """Nobody answered before the request's expiry."""

    code = "timed_out"


class RequestCancelled(InterlockError):
    """The request was cancelled by its user before it was answered."""

    code = "cancelled"


class SecretRefused(InterlockError):
    """The resume secret does not match the one last issued for the request."""

    code = "refused"


class ChatBusy(InterlockError):
    """The chat already has an open request; a new one cannot be opened."""

    code = "pending_interrupt"

    def __init__(self, message: str, current: RequestRecord | None = None) -> None:
        super().__init__(message)
        self.current = current


class ResumeInProgress(InterlockError):
    """Another worker holds a live claim on the request."""

    code = "in_progress"

    def __init__(self, message: str, current: RequestRecord | None = None) -> None:
        super().__init__(message)
        self.current = current

    @property
    def holder(self) -> str | None:
        """The worker holding the claim, when known."""
        return self.current.worker if self.current else None


class DecisionBinding(InterlockError):
    """A different answer to a request whose recorded answer was already acted on: the
    recorded one stands (`current` carries it), and this one is refused."""

    code = "decision_binding"

    def __init__(self, message: str, current: RequestRecord) -> None:
        super().__init__(message)
        self.current = current


class LeaseLost(InterlockError):
    """This worker's lease was taken over or ended; its writes are refused."""

    code = "in_progress"


class LimitExceeded(InterlockError):
    """A concurrency slot or budget is exhausted."""

    code = "limit_exceeded"


class IncompatibleSnapshot(InterlockError):
    """The stored snapshot was written by an incompatible schema version."""

    code = "incompatible_snapshot"


class SnapshotLost(IncompatibleSnapshot):
    """The paused run's snapshot is missing, corrupt or not the one the pointer names."""

    code = "snapshot_lost"


class RunFailed(InterlockError):
    """The resumed run failed after its claim; the request was released, not stranded."""

    code = "run_failed"


class ModelFailed(InterlockError):
    """The model could not answer (throttled past its retries, the input too long, a
    refusal): the turn ended without a change, and the chat is free again."""

    code = "model_failed"


class TurnRunning(InterlockError):
    """Another turn of this chat is running; one turn runs at a time."""

    code = "turn_running"


class StoreError(InterlockError):
    """Storage failed for a reason the caller cannot fix (throttling, outage, bad state)."""

    code = "system_error"


class JournalLost(StoreError):
    """A recorded journal step cannot be read back (its object is gone or not the one
    recorded): no retry will find it, so the run cannot be continued from its journal."""


class CallChanged(InterlockError):
    """The call about to run is not the one the person approved (its arguments, or the
    card and answer it was approved on, differ from what the answer's fingerprint
    binds): nothing ran, and no retry would run anything else."""

    code = "call_changed"


class AlreadyAnswered(InterlockError):
    """The request is done; the caller should replay the stored answer, not re-run."""

    code = "already_answered"

    def __init__(self, message: str, current: RequestRecord) -> None:
        super().__init__(message)
        self.current = current


class TooLarge(InterlockError):
    """A record or object would exceed its size budget."""

    code = "too_large"


class SnapshotTooLarge(TooLarge):
    """The paused agent's snapshot is over the configured size limit."""

    code = "snapshot_too_large"


class Unauthorized(InterlockError):
    """No verified identity: no token, or one that does not verify."""

    code = "unauthorized"


class Forbidden(InterlockError):
    """The caller may not act on this chat (it belongs to another user)."""

    code = "forbidden"


def validation_message(exc: Any) -> str:
    """The first problem of a pydantic `ValidationError`, as `where: what`: the one
    formatter every refusal of a validated body, spec or setting uses."""
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ()))
    return f"{where}: {error.get('msg')}" if where else str(error.get("msg"))
