"""The audit trail: one place that stamps events with the trace id and config version."""

from __future__ import annotations

from typing import Any

from interlock.caller import Caller
from interlock.deps import Runtime
from interlock.ports import Entry
from interlock.records import Fence


def audit(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    event: str,
    *,
    fence: Fence | None = None,
    **detail: Any,
) -> None:
    """Append an audit event carrying the trace id and the configuration's version.

    With `fence` (what a run's tools report), the event is written only while that claim
    or turn is held: a worker that lost its claim reports no tool activity. Without it,
    an event is an observation that any worker may make (that it stopped, say).
    """
    rt.stores.chats.record(
        chat_id,
        event,
        caller.user_id,
        rt.clock.now_ms(),
        fence=fence,
        **_stamped(rt, caller, detail),
    )


def audit_entry(rt: Runtime, caller: Caller, chat_id: str, event: str, **detail: Any) -> Entry:
    """The same event as a write that rides in the transaction of the change it
    describes: it is stored exactly when that change is, at no call of its own."""
    return rt.stores.chats.event_entry(
        chat_id, event, caller.user_id, rt.clock.now_ms(), **_stamped(rt, caller, detail)
    )


def _stamped(rt: Runtime, caller: Caller, detail: dict[str, Any]) -> dict[str, Any]:
    return {"trace_id": caller.trace_id, "config_version": rt.config.version, **detail}
