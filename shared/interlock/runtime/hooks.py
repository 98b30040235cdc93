"""Hooks that enforce what prompts only advise.

- `ApprovalAlone`: the approval tool runs alone in its batch.
- `AdmissionGate`: tools with outside side effects wait for a person, chosen by policy.
- `ModelCallLimit`: one invocation makes at most N model calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from strands.hooks import (
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    HookProvider,
    HookRegistry,
)

from interlock.cards import ACTION, action_card, outcome_text, parse_decision, unattended_denial
from interlock.context import current_request
from interlock.runtime.tools import own_resume_card

logger = logging.getLogger(__name__)

APPROVAL_TOOL: Final = "request_approval"
GATE_INTERRUPT: Final = "interlock.admission"
MERGED: Final = "Merged into the first approval request in this step; nothing else to do."
ONE_AT_A_TIME: Final = (
    "Not run: only one action needing approval can wait at a time. Call it again after "
    "the first one is answered."
)
RUN_ALONE: Final = (
    "Not run: request_approval must be called on its own. Wait for its answer, then "
    "call this tool again in a new step."
)


def decide_batch(message: Mapping[str, Any]) -> dict[str, str]:
    """Which calls of an assistant message to cancel, and with what text.

    Keeps the first approval call; merges later approval calls into it; cancels every
    other sibling. Decided from the message alone, so the answer is the same before a
    pause and after the resume, in any process.
    """
    uses = [block["toolUse"] for block in message.get("content", []) if "toolUse" in block]
    first = next((use for use in uses if use["name"] == APPROVAL_TOOL), None)
    if first is None:
        return {}
    return {
        use["toolUseId"]: MERGED if use["name"] == APPROVAL_TOOL else RUN_ALONE
        for use in uses
        if use is not first
    }


def batch_of(messages: list[Any], tool_use_id: str) -> Mapping[str, Any]:
    """The assistant message holding `tool_use_id` (searched from the newest)."""
    for message in reversed(messages):
        if message["role"] == "assistant" and any(
            block.get("toolUse", {}).get("toolUseId") == tool_use_id for block in message["content"]
        ):
            return message  # type: ignore[no-any-return]
    return {}


class ApprovalAlone(HookProvider):
    """Cancels every call that shares a batch with an approval request."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self._before_tool)

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        tool_use_id = event.tool_use["toolUseId"]
        cancel = decide_batch(batch_of(event.agent.messages, tool_use_id))
        if tool_use_id in cancel:
            event.cancel_tool = cancel[tool_use_id]


@dataclass(frozen=True)
class AdmissionRule:
    """When a tool call needs a person's approval before it runs.

    Attributes:
        tool: The tool's name.
        needs_approval: Decides from the call's input (e.g. its declared risk).
        risk: Shown on the card.
        impact: Shown on the card: what happens if approved.
    """

    tool: str
    needs_approval: Callable[[Mapping[str, Any]], bool]
    risk: str
    impact: str


class AdmissionGate(HookProvider):
    """Pauses before a gated tool runs; on resume runs it once, or never after a deny."""

    def __init__(self, rules: Mapping[str, AdmissionRule]) -> None:
        self._rules = dict(rules)

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self._before_tool)

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        rule = self._rules.get(event.tool_use["name"])
        if rule is None or event.cancel_tool or not rule.needs_approval(event.tool_use["input"]):
            return
        tool_use_id = event.tool_use["toolUseId"]
        # One open question per chat: only the first gated call of a batch may ask.
        if self._first_gated(batch_of(event.agent.messages, tool_use_id)) != tool_use_id:
            event.cancel_tool = ONE_AT_A_TIME
            return
        card = own_resume_card(ACTION, tool_use_id) or action_card(
            tool=rule.tool,
            params=event.tool_use["input"],
            risk=rule.risk,
            impact=rule.impact,
            tool_use_id=tool_use_id,
        )
        if not current_request().can_ask_a_human:
            event.cancel_tool = unattended_denial(card)
            return
        answer = event.interrupt(GATE_INTERRUPT, reason=card)
        decision = parse_decision(answer, card)
        if not decision.approved:
            event.cancel_tool = outcome_text(card, decision)

    def _first_gated(self, message: Mapping[str, Any]) -> str | None:
        for block in message.get("content", []):
            use = block.get("toolUse")
            rule = self._rules.get(use["name"]) if use else None
            if use and rule and rule.needs_approval(use["input"]):
                return str(use["toolUseId"])
        return None


class RunMeter(HookProvider):
    """Counts tool bodies that ran to completion (cancelled and paused calls excluded)."""

    def __init__(self) -> None:
        self.tool_executions = 0

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        if event.cancel_message is None and event.duration is not None:
            self.tool_executions += 1


class ModelCallLimit(HookProvider):
    """Stops an invocation after `max_calls` model calls; `tripped` tells the caller."""

    def __init__(self, max_calls: int) -> None:
        self.max_calls = max_calls
        self.calls = 0
        self.tripped = False

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeInvocationEvent, self._reset)
        registry.add_callback(BeforeModelCallEvent, self._count)

    def _reset(self, event: BeforeInvocationEvent) -> None:
        self.calls = 0

    def _count(self, event: BeforeModelCallEvent) -> None:
        self.calls += 1
        if self.calls > self.max_calls:
            self.tripped = True
            event.cancel = f"Stopped after {self.max_calls} model calls in one invocation."
            logger.warning("max_calls=<%d> | model call limit reached", self.max_calls)
