"""Who is calling: established by the API's authorizer, never by a request body."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    """The authenticated user of a request.

    Attributes:
        user_id: The user's stable id (the Cognito `sub`).
        roles: The user's roles (Cognito groups).
        can_ask_a_human: False for unattended runs (schedules, background jobs).
        trace_id: Correlates logs and audit events of this request.
    """

    user_id: str
    roles: frozenset[str] = frozenset()
    can_ask_a_human: bool = True
    trace_id: str | None = None
