"""Snapshots of a paused agent, wrapped with Interlock's own schema version.

Tools, model and hooks are rebuilt by code; the snapshot carries messages, state and
the interrupt state. A snapshot written by an incompatible version is refused with a
clear error instead of resuming into a run that would misbehave.
"""

from __future__ import annotations

from typing import Any, Final

from strands import Agent
from strands.types._snapshot import Snapshot
from strands.types.exceptions import SnapshotException

from interlock.errors import IncompatibleSnapshot

SCHEMA_VERSION: Final = 1


def take_snapshot(agent: Agent, app_data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Capture a paused agent as JSON-compatible data."""
    snapshot = agent.take_snapshot(preset="session", app_data=app_data)
    return {"interlock_schema": SCHEMA_VERSION, "strands": snapshot.to_dict()}


def load_snapshot(agent: Agent, data: dict[str, Any]) -> dict[str, Any]:
    """Restore `data` into a freshly built agent; returns the snapshot's app data.

    Raises:
        IncompatibleSnapshot: the snapshot's schema version is not this code's.
    """
    version = data.get("interlock_schema")
    if version != SCHEMA_VERSION:
        raise IncompatibleSnapshot(
            f"snapshot schema {version!r} cannot be resumed by schema {SCHEMA_VERSION}; "
            "the request must be asked again"
        )
    try:
        snapshot = Snapshot.from_dict(data["strands"])
        agent.load_snapshot(snapshot)
    except (SnapshotException, KeyError, TypeError) as exc:
        raise IncompatibleSnapshot(f"snapshot cannot be loaded: {exc}") from exc
    return dict(snapshot.app_data)


def paused_batch(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool uses of the paused batch, read from a snapshot."""
    state = data.get("strands", {}).get("data", {}).get("interrupt_state", {})
    message = (state.get("pending_tool_execution") or {}).get("assistant_message") or {}
    return [block["toolUse"] for block in message.get("content", []) if "toolUse" in block]


def paused_batch_tools(data: dict[str, Any]) -> list[str]:
    """Names of the tools in the paused batch, read from a snapshot."""
    return sorted({use["name"] for use in paused_batch(data)})
