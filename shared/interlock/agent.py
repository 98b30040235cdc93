"""Bring your own Strands agent: Interlock's public surface.

Write one module with a factory that builds your agent from what Interlock gives it,
and name it in configuration (`INTERLOCK_AGENT=package.module:factory` locally, the
`agent` prop of the CDK construct when deployed)::

    from strands import tool
    from strands.vended_interventions.hitl import HumanInTheLoop
    from interlock.agent import AgentInputs, AgentSpec, send_once

    @tool(context=True)
    def close_ticket(ticket: str, tool_context) -> str:
        '''Close a support ticket.'''
        send_once(tool_context, {"close": ticket})
        return f"Closed {ticket}."

    def build(inputs: AgentInputs) -> AgentSpec:
        return AgentSpec(
            tools=[close_ticket],
            system_prompt="You keep the queue tidy.",
            interventions=[HumanInTheLoop()],
        )

Interlock adds what it must own: the chat's history and the paused run's snapshot,
the model-call cap, the journal that makes a takeover repeat nothing, URL scrubbing
and metering. Every interrupt your tools, hooks or interventions raise becomes a
durable card, answered once. The factory is called for every run and every resume
(in any process), so it must build the same agent for the same inputs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from interlock.config import Risk
from interlock.context import RequestContext, current_request
from interlock.harness.hooks import AdmissionGate, AdmissionRule, ApprovalAlone
from interlock.harness.model import Block, Scenario, ScriptedModel
from interlock.harness.tools import ask_user, fetch_url, request_approval, request_info

if TYPE_CHECKING:
    from strands.hooks import HookProvider
    from strands.interventions import InterventionHandler
    from strands.models.model import Model
    from strands.types.content import Messages
    from strands.types.tools import ToolContext

    from interlock.config import InterlockConfig

__all__ = [
    "AdmissionGate",
    "AdmissionRule",
    "AgentFactory",
    "AgentInputs",
    "AgentSpec",
    "ApprovalAlone",
    "Block",
    "RequestContext",
    "Scenario",
    "ScriptedModel",
    "admission_gate",
    "ask_user",
    "current_request",
    "durable_mcp_tools",
    "fetch_url",
    "load_factory",
    "request_approval",
    "request_info",
    "send_once",
]


@dataclass(frozen=True)
class AgentInputs:
    """What Interlock gives your factory. Identity and roles come from the API's
    authorizer, never from anything the model or the request body said.

    Attributes:
        user_id: The user whose chat this is.
        roles: Their roles: give them only the tools these allow.
        chat_id: The chat (AG-UI thread).
        can_ask_a_human: False for unattended runs (nobody can answer a card).
        max_model_calls: The cap Interlock enforces on one invocation.
        settings: The deployment's validated settings.
    """

    user_id: str
    roles: frozenset[str]
    chat_id: str
    can_ask_a_human: bool
    max_model_calls: int
    settings: InterlockConfig
    _history: Callable[[], Messages] = field(repr=False)
    _model: Callable[[Sequence[Scenario]], Model] = field(repr=False)

    def history(self) -> Messages:
        """The chat's stored history before this turn (a copy; read on demand)."""
        return self._history()

    def model(self, scripted: Sequence[Scenario] = ()) -> Model:
        """The deployment's configured model (`INTERLOCK_MODEL`): Bedrock, or, where
        no LLM is reachable, the scripted stand-in playing `scripted`."""
        return self._model(scripted)


@dataclass(frozen=True)
class AgentSpec:
    """Your agent, as your factory returns it.

    Attributes:
        tools: Strands tools (decorated functions or `AgentTool`s) this user may call.
        system_prompt: The system prompt.
        model: The model; None uses `inputs.model()`.
        hooks: Your Strands hook providers (they may raise `event.interrupt`).
        interventions: Strands intervention handlers (`Confirm` becomes a card).
        one_card_at_a_time: Run a batch's tool calls one after another, so parallel
            calls that each need a person are asked one card at a time. Otherwise a
            batch may pause on several interrupts at once, answered in one resume.
        editable: Per tool, the arguments a person may change on a confirm card (an
            intervention's `Confirm`) before approving; none unless named. Typed by the
            tool's input schema; the call runs with the approved arguments.
    """

    tools: Sequence[Any]
    system_prompt: str | None = None
    model: Model | None = None
    hooks: Sequence[HookProvider] = ()
    interventions: Sequence[InterventionHandler] = ()
    one_card_at_a_time: bool = False
    editable: Mapping[str, Sequence[str]] = field(default_factory=dict)


AgentFactory = Callable[[AgentInputs], AgentSpec]
"""Builds the agent for one run or resume."""


def load_factory(reference: str) -> AgentFactory:
    """The factory named `package.module:attribute`.

    Raises:
        ValueError: the reference is malformed, or names nothing callable.
    """
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"an agent is named 'package.module:factory', not {reference!r}")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"agent {reference!r} cannot be loaded: {exc}") from exc
    if not callable(factory):
        raise ValueError(f"agent {reference!r} is not callable")
    return factory  # type: ignore[no-any-return]


def admission_gate(
    policies: Mapping[str, tuple[Risk, str] | tuple[Risk, str, Sequence[str]]],
    sample_rate: float = 1.0,
) -> AdmissionGate:
    """A hook that asks a person before tools with outside effects run.

    `policies` maps a tool name to `(risk, impact)` or `(risk, impact, editable)`: risk
    "low" runs and is audited, "medium" is asked at `sample_rate` (deterministically per
    call), "high" always asks. `editable` names the arguments a person may change
    before approving (typed by the tool's input schema; none by default). The tool's
    body runs once after an approval, with the approved arguments, never after a
    rejection, and never when the call about to run differs from the one approved.

    Raises:
        ValueError: a risk that is none of the three (a typo fails here, at build), or
            `risk` named editable.
    """
    return AdmissionGate(
        {name: _rule(name, policy) for name, policy in policies.items()}, sample_rate
    )


def _rule(name: str, policy: tuple[Any, ...]) -> AdmissionRule:
    risk, impact, *editable = policy
    return AdmissionRule(name, risk, impact, tuple(editable[0]) if editable else ())


def durable_mcp_tools(client: Any) -> list[Any]:
    """The tools of an MCP server (a Strands `MCPClient`, streamable HTTP or stdio) whose
    questions become durable cards: a server's `input_required` pauses the run, and the
    answer retries the call exactly once, in any process. Imported on first use, so an
    agent without MCP never loads `mcp`; see `interlock.harness.mcp`."""
    from interlock.harness.mcp import durable_mcp_tools as tools

    return tools(client)


def send_once(tool_context: ToolContext, payload: dict[str, Any], *, part: str = "") -> bool:
    """Record an outside effect of this tool call in the fenced outbox, once.

    The key is the chat and the call's toolUseId (plus `part` for a call with several
    effects), stable across a crash and a takeover; the write lands only while this run
    still holds its turn or claim. Returns False when the effect was already recorded:
    do not perform it again.
    """
    context = current_request()
    if context.outbox is None or context.now_ms is None:
        raise RuntimeError("no outbox in this run: run the agent through Interlock")
    key = f"{context.chat_id}#{tool_context.tool_use['toolUseId']}"
    return context.outbox.put_once(f"{key}#{part}" if part else key, payload, context.now_ms())
