"""Interlock's CDK construct: `build(app, agent=AgentChoice.of(...))` adds Interlock's
stacks to an app, checked by cdk-nag (its own stacks only). Installed from the wheel,
this package is `interlock_cdk`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .settings import AgentChoice
    from .wiring import Stacks, build

__all__ = ["AgentChoice", "Stacks", "build"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: importing one module (`infra.regions`) stays cheap.
    if name == "AgentChoice":
        from .settings import AgentChoice

        return AgentChoice
    if name in ("Stacks", "build"):
        from . import wiring

        return getattr(wiring, name)
    raise AttributeError(name)
