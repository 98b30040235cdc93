"""The one map from domain errors to HTTP statuses and stable wire codes."""

from __future__ import annotations

import logging
from typing import Any, Final

from interlock import errors
from interlock.errors import IncompleteResume as IncompleteResume  # raised while parsing
from interlock.errors import Unauthorized as Unauthorized  # raised by the identity checks

logger = logging.getLogger(__name__)

STATUS: Final[dict[str, int]] = {
    "bad_request": 400,
    "unauthorized": 401,
    "refused": 403,
    "forbidden": 403,
    "unknown": 404,
    "not_found": 404,
    "in_progress": 409,
    "already_answered": 409,
    "decision_binding": 409,
    "pending_interrupt": 409,
    "turn_running": 409,
    "expired": 410,
    "timed_out": 410,
    "cancelled": 410,
    "incompatible_snapshot": 410,
    "snapshot_lost": 410,
    # Never seen on the wire today (the run ends the request: `expired`); mapped so a
    # path that lets it through still says what it is.
    "call_changed": 410,
    "too_large": 413,
    "snapshot_too_large": 413,
    "invalid_payload": 422,
    "incomplete_resume": 422,
    "limit_exceeded": 429,
    "system_error": 500,
    "run_failed": 503,
    "model_failed": 503,
}


class BadRequest(errors.InterlockError):
    """The body is not JSON, or not an object."""

    code = "bad_request"


class NotFound(errors.InterlockError):
    """No such route or resource."""

    code = "not_found"


def error_body(exc: Exception) -> tuple[int, dict[str, Any]]:
    """Status and JSON body for `exc`; unexpected errors become an opaque 500."""
    # The response models load with the first refusal: the streaming app renders no
    # other JSON body, and defining them costs its cold start several milliseconds.
    from interlock.api.schemas import ErrorBody, ErrorDetail

    if isinstance(exc, errors.InterlockError):
        detail = ErrorDetail(code=exc.code, message=str(exc), holder=getattr(exc, "holder", None))
        return STATUS.get(exc.code, 500), ErrorBody(error=detail).wire()
    logger.exception("unexpected error")
    return 500, ErrorBody(error=ErrorDetail(code="system_error", message="internal error")).wire()
