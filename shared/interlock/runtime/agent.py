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

from interlock.runtime.hooks import (
    AdmissionGate,
    AdmissionRule,
    ApprovalAlone,
    ModelCallLimit,
    RunMeter,
)
from interlock.runtime.model import ScriptedModel
from interlock.runtime.scenarios import DEMO_SCENARIOS
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
DEFAULT_RULES: Final = {
    "send_report": AdmissionRule(
        tool="send_report",
        needs_approval=lambda args: str(args.get("risk", "high")).lower() != "low",
        risk="high",
        impact="A message leaves this chat for the named recipient.",
    )
}


def allowed_tools(roles: frozenset[str]) -> list[str]:
    """The tool names a user with `roles` may have the agent call."""
    return [name for name in TOOLS if TOOL_ROLES.get(name) in (None, *roles)]


def lost_tools(roles: frozenset[str], batch: Sequence[str]) -> list[str]:
    """Tools of a paused batch the user may no longer use."""
    permitted = set(allowed_tools(roles))
    return sorted(name for name in batch if name in TOOLS and name not in permitted)


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


def build_agent(
    model: Model,
    *,
    roles: frozenset[str],
    messages: list[Any] | None = None,
    max_model_calls: int = 12,
    rules: Mapping[str, AdmissionRule] = DEFAULT_RULES,
) -> BuiltAgent:
    """Build the agent with the tools `roles` allow and every enforcing hook."""
    names = allowed_tools(roles)
    limit = ModelCallLimit(max_model_calls)
    meter = RunMeter()
    agent = Agent(
        model=model,
        tools=[TOOLS[name] for name in names],
        # Order matters: the batch rule cancels siblings before the gate would ask.
        hooks=[ApprovalAlone(), AdmissionGate(rules), limit, meter],
        system_prompt=SYSTEM_PROMPT,
        messages=messages or [],
        callback_handler=None,
    )
    return BuiltAgent(agent, limit, meter, names)
