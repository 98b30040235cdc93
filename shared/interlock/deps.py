"""What the service functions need: stores, a model factory, a clock, limits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from strands.models.model import Model

from interlock.agent import AgentFactory, load_factory
from interlock.config import DEFAULT_AGENT, MAX_MODEL_CALLS, InterlockConfig
from interlock.context import FetchPort
from interlock.notify import Notifier
from interlock.ports import Stores
from interlock.timing import Clock, SystemClock
from interlock.tokens import new_token


@dataclass(frozen=True)
class TurnLimits:
    """Per-user limits and run bounds a turn and a resume both respect.

    Attributes:
        run_lease_ms: How long admission holds a chat for one running turn; longer than
            the function timeout, so only a dead turn's lease lapses.
    """

    max_concurrent: int = 4
    slot_hold_ms: int = 15 * 60_000
    daily_turns: int = 500
    max_model_calls: int = MAX_MODEL_CALLS
    heartbeat_s: float = 10.0
    max_prompt_chars: int = 8000
    run_lease_ms: int = 6 * 60_000


def default_agent() -> AgentFactory:
    """The demo analyst, for local mode and tests that bring no agent of their own."""
    return load_factory(DEFAULT_AGENT)


@dataclass(frozen=True)
class Runtime:
    """What the service functions need: stores, the agent, a clock, limits.

    Attributes:
        model_factory: The deployment's configured model (see `AgentInputs.model`).
        agent: The user's factory (`interlock.agent`); the demo analyst by default.
    """

    stores: Stores
    model_factory: Callable[[], Model]
    clock: Clock = field(default_factory=SystemClock)
    fetch: FetchPort | None = None
    limits: TurnLimits = field(default_factory=TurnLimits)
    worker_id: str = field(default_factory=new_token)
    config: InterlockConfig = field(default_factory=InterlockConfig)
    agent: AgentFactory = field(default_factory=default_agent)
    notifier: Notifier | None = None
