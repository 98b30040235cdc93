"""Interlock's CDK construct: `build(app, agent=AgentChoice.of(...))` adds Interlock's
stacks to an app, checked by cdk-nag (its own stacks only). Installed from the wheel,
this package is `interlock_cdk`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .settings import AgentChoice
    from .tools import ToolAccess
    from .wiring import Stacks, build

__all__ = ["AgentChoice", "Stacks", "ToolAccess", "build"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: importing one module (`infra.regions`) stays cheap.
    if name == "AgentChoice":
        from .settings import AgentChoice

        return AgentChoice
    if name == "ToolAccess":
        from .tools import ToolAccess

        return ToolAccess
    if name in ("Stacks", "build"):
        from . import wiring

        return getattr(wiring, name)
    raise AttributeError(name)
