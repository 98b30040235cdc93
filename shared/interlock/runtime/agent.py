"""Building the agent: model by configuration, tools by role, hooks by policy.

The same code builds the agent that pauses and the one that resumes it in another
process; only the snapshot carries state between them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from strands import Agent
from strands.models.model import Model

from interlock.config import InterlockConfig
from interlock.runtime.hooks import (
    AdmissionGate,
    AdmissionRule,
    ApprovalAlone,
    ModelCallLimit,
    RunMeter,
    UnavailableTools,
)
from interlock.runtime.journal import Journal, JournaledModel, JournalHook
from interlock.runtime.model import ScriptedModel
from interlock.runtime.scenarios import DEMO_SCENARIOS
from interlock.runtime.scrub import UrlScrubbedModel
from interlock.runtime.tools import ask_user, fetch_url, request_approval, request_info, send_report

SYSTEM_PROMPT: Final = (
    "You are a careful analyst. Downloads are allowed only from approved sites: when one is "
    "refused, call request_approval on its own with a one-sentence reason, then retry. "
    "If something is declined, continue without it and say so."
)
TOOLS: Final = {
    "request_approval": request_approval,
    "fetch_url": fetch_url,
    "send_report": send_report,
    "ask_user": ask_user,
    "request_info": request_info,
}
# The role a user needs for each tool; tools not listed need none.
TOOL_ROLES: Final[Mapping[str, str]] = {"send_report": "reporter"}


def allowed_tools(roles: frozenset[str], enabled: tuple[str, ...] = tuple(TOOLS)) -> list[str]:
    """The enabled tool names a user with `roles` may have the agent call."""
    return [n for n in TOOLS if n in enabled and TOOL_ROLES.get(n) in (None, *roles)]


def gate_for(config: InterlockConfig) -> AdmissionGate:
    """The admission gate the configuration's tool policies describe."""
    rules = {
        name: AdmissionRule(name, policy.risk, policy.impact)
        for name, policy in config.tool_policies.items()
    }
    return AdmissionGate(rules, config.sample_rate)


def lost_tools(
    roles: frozenset[str], batch: Sequence[str], roles_then: frozenset[str]
) -> list[str]:
    """Tools of a paused batch the user could use when it paused and may not use now.

    A tool the user never had was refused before any card was offered (it was never in
    their agent), so losing it is not a reason to expire the request.
    """
    permitted = set(allowed_tools(roles))
    had = set(allowed_tools(roles_then))
    return sorted(name for name in batch if name in had and name not in permitted)


@dataclass(frozen=True)
class ModelConfig:
    """Which model the agent uses: `scripted`, or `bedrock` with a model id.

    Attributes:
        provider: "scripted" (the demo stand-in) or "bedrock".
        model_id: The Bedrock model id.
        region: The Bedrock region; None uses the SDK's default chain.
    """

    provider: str = "bedrock"
    model_id: str = "us.anthropic.claude-sonnet-4-20250514-v1:0"
    region: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ModelConfig:
        """Read `INTERLOCK_MODEL` (`scripted` or `bedrock:<model id>`) and `AWS_REGION`."""
        spec = env.get("INTERLOCK_MODEL", "bedrock")
        provider, _, model_id = spec.partition(":")
        if provider not in ("scripted", "bedrock"):
            raise ValueError(f"INTERLOCK_MODEL must be 'scripted' or 'bedrock[:id]', not {spec!r}")
        return cls(provider, model_id or cls.model_id, env.get("AWS_REGION"))


def build_model(config: ModelConfig) -> Model:
    """The configured model; Bedrock is imported only when chosen."""
    if config.provider == "scripted":
        return ScriptedModel(DEMO_SCENARIOS)
    from strands.models.bedrock import BedrockModel

    return BedrockModel(model_id=config.model_id, region_name=config.region)


@dataclass
class BuiltAgent:
    """An agent and the hooks whose outcome the caller reads after a run."""

    agent: Agent
    limit: ModelCallLimit
    meter: RunMeter
    tools: list[str] = field(default_factory=list)
    journal: Journal | None = None

    @property
    def replayed_model_calls(self) -> int:
        """Model calls answered from the journal instead of the model."""
        return self.journal.replayed_model_calls if self.journal else 0


def build_agent(
    model: Model,
    *,
    roles: frozenset[str],
    messages: list[Any] | None = None,
    max_model_calls: int = 12,
    config: InterlockConfig | None = None,
    journal: Journal | None = None,
) -> BuiltAgent:
    """Build the agent with the tools `roles` allow and every enforcing hook.

    With `journal` (a resumed run), recorded steps are replayed and new ones recorded.
    """
    config = config or InterlockConfig()
    names = allowed_tools(roles, config.tools)
    limit = ModelCallLimit(max_model_calls)
    meter = RunMeter()
    # Order matters: a tool the caller may not use is refused before anything could ask
    # about it, the batch rule cancels siblings before the gate would ask, and the journal
    # replays a body only once all of them decided the same way they did before.
    hooks: list[Any] = [UnavailableTools(), ApprovalAlone(), gate_for(config), limit, meter]
    # Query strings and fragments leave every tool call before anything records it.
    model = UrlScrubbedModel(model)
    if journal is not None:
        model = JournaledModel(model, journal)
        hooks.append(JournalHook(journal))
    agent = Agent(
        model=model,
        tools=[TOOLS[name] for name in names],
        hooks=hooks,
        system_prompt=SYSTEM_PROMPT,
        messages=messages or [],
        callback_handler=None,
    )
    return BuiltAgent(agent, limit, meter, names, journal)
