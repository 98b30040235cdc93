"""Hooks that enforce what prompts only advise.

- `ApprovalAlone`: the approval tool runs alone in its batch.
- `AdmissionGate`: tools with outside side effects wait for a person, chosen by policy.
- `ModelCallLimit`: one invocation makes at most N model calls.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
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

from interlock.cards import (
    ACTION,
    Decision,
    action_card,
    call_digest,
    changes_text,
    edited_call,
    fingerprint,
    outcome_text,
    parse_decision,
    unattended_denial,
)
from interlock.config import Risk
from interlock.context import current_request
from interlock.errors import CallChanged
from interlock.harness.journal import ReplayedTool
from interlock.harness.tools import own_resume_card
from interlock.interrupts import CONFIRM

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


class UnavailableTools(HookProvider):
    """Refuses, with a clear message and no card, a call to a tool this caller's agent
    does not have (their roles do not allow it): nobody is asked about what they could
    never be allowed to run."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self._before_tool)

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        if event.selected_tool is None and not event.cancel_tool:
            event.cancel_tool = (
                f"Refused: {event.tool_use['name']} is not available to this user. "
                "Continue without it and say so."
            )


class ApprovalAlone(HookProvider):
    """Cancels every call that shares a batch with an approval request."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self._before_tool)

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        tool_use_id = event.tool_use["toolUseId"]
        cancel = decide_batch(batch_of(event.agent.messages, tool_use_id))
        if tool_use_id in cancel:
            event.cancel_tool = cancel[tool_use_id]


_RANK: Final = {"low": 0, "medium": 1, "high": 2}


@dataclass(frozen=True)
class AdmissionRule:
    """How a tool with outside effects is admitted.

    Attributes:
        tool: The tool's name.
        risk: The floor: a call may declare a higher `risk` in its input, never lower.
        impact: Shown on the card: what happens if approved.
        editable: The arguments a person may change before approving (none unless the
            policy names them), typed by the tool's input schema. `risk` is never one:
            an edit cannot lower the floor a call declared.
    """

    tool: str
    risk: Risk
    impact: str
    editable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A typo ("hgih") fails where the agent is built, not at the first gated call.
        if self.risk not in _RANK:
            raise ValueError(
                f"{self.tool}: risk must be one of {', '.join(_RANK)}, not {self.risk!r}"
            )
        if "risk" in self.editable:
            raise ValueError(f"{self.tool}: risk cannot be editable (it sets the floor)")

    def schemas(self, spec: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
        """The JSON Schema of each editable argument (`argument_schemas`)."""
        return argument_schemas(spec, self.editable)

    def risk_of(self, tool_input: Mapping[str, Any]) -> str:
        declared = str(tool_input.get("risk", "")).lower()
        if _RANK.get(declared, -1) > _RANK[self.risk]:
            return declared
        return self.risk


def argument_schemas(
    spec: Mapping[str, Any] | None, names: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """The JSON Schema of each of `names` from a tool's spec (its input schema); an
    argument the tool does not declare is left out: it cannot be edited."""
    properties = (input_schema(spec) or {}).get("properties", {})
    return {name: dict(properties[name]) for name in names if name in properties}


def input_schema(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A tool spec's input JSON Schema, if it declares one."""
    schema = ((spec or {}).get("inputSchema", {}) or {}).get("json")
    return dict(schema) if schema else None


def sampled(tool: str, tool_use_id: str, rate: float) -> bool:
    """Whether a medium-risk call is asked: deterministic per call, so the decision is
    the same before the pause and after the resume, in any process."""
    digest = int(hashlib.sha256(f"{tool}:{tool_use_id}".encode()).hexdigest()[:8], 16)
    return digest / 0xFFFFFFFF < rate


class AdmissionGate(HookProvider):
    """Pauses before a gated tool runs; on resume runs it once, or never after a deny.

    Low risk is approved automatically (and audited), medium risk is sampled at
    `sample_rate`, high risk always asks.
    """

    def __init__(self, rules: Mapping[str, AdmissionRule], sample_rate: float = 1.0) -> None:
        self._rules = dict(rules)
        self._rate = sample_rate
        self._approved = ApprovedCalls()

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self._before_tool)
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def asks(self, tool_use: Mapping[str, Any]) -> bool:
        """Whether this call must wait for a person."""
        rule = self._rules.get(tool_use["name"])
        if rule is None:
            return False
        risk = rule.risk_of(tool_use["input"])
        if risk == "medium":
            return sampled(rule.tool, tool_use["toolUseId"], self._rate)
        return risk == "high"

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        rule = self._rules.get(event.tool_use["name"])
        if rule is None or event.cancel_tool:
            return
        tool_use_id = event.tool_use["toolUseId"]
        if not self.asks(event.tool_use):
            _audit(
                "auto_approved",
                tool=rule.tool,
                tool_use_id=tool_use_id,
                risk=rule.risk_of(event.tool_use["input"]),
            )
            return
        # One open question per chat: only the first gated call of a batch may ask.
        if self._first_gated(batch_of(event.agent.messages, tool_use_id)) != tool_use_id:
            event.cancel_tool = ONE_AT_A_TIME
            return
        spec = event.selected_tool.tool_spec if event.selected_tool is not None else None
        card = own_resume_card(ACTION, tool_use_id) or action_card(
            tool=rule.tool,
            params=event.tool_use["input"],
            risk=rule.risk_of(event.tool_use["input"]),
            impact=rule.impact,
            tool_use_id=tool_use_id,
            editable=rule.schemas(spec),
        )
        if not current_request().can_ask_a_human:
            event.cancel_tool = unattended_denial(card)
            return
        answer = event.interrupt(GATE_INTERRUPT, reason=card)
        decision = parse_decision(answer, card)
        if not decision.approved:
            event.cancel_tool = outcome_text(card, decision)
            return
        self._approved.run_as_approved(event, card, decision, answer)

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        self._approved.tell(event)

    def _first_gated(self, message: Mapping[str, Any]) -> str | None:
        for block in message.get("content", []):
            use = block.get("toolUse")
            if use and self.asks(use):
                return str(use["toolUseId"])
        return None


class ApprovedCalls:
    """Runs calls a person approved as they approved them (`bind`), and tells the model
    beside each one's result what the person changed."""

    def __init__(self) -> None:
        self._changed: dict[str, str] = {}

    def run_as_approved(
        self, event: BeforeToolCallEvent, card: Mapping[str, Any], decision: Decision, answer: Any
    ) -> None:
        """Bind `event`'s call to the approval (raises `CallChanged`), run it with the
        approved arguments, and hold the journal's fenced start to them."""
        spec = event.selected_tool.tool_spec if event.selected_tool is not None else None
        approved = bind(card, decision, answer, event.tool_use, spec)
        event.tool_use = {**event.tool_use, "input": approved}
        tool_use_id = event.tool_use["toolUseId"]
        current_request().bound[tool_use_id] = call_digest(event.tool_use["name"], approved)
        if decision.edits:
            self._changed[tool_use_id] = changes_text(card, decision).strip()
            _record_as_run(event.agent.messages, tool_use_id, approved)

    def tell(self, event: AfterToolCallEvent) -> None:
        """The model reads what the person changed beside the result of the call."""
        note = self._changed.pop(event.tool_use["toolUseId"], None)
        if note and event.cancel_message is None:
            event.result = {
                **event.result,
                "content": [*event.result.get("content", []), {"text": note}],
            }


def _record_as_run(messages: list[Any], tool_use_id: str, approved: dict[str, Any]) -> None:
    """The history holds the call as it ran: the model and every transcript read the
    edited arguments (beside the result, the note says what the person changed)."""
    for message in reversed(messages):
        for block in message.get("content", []):
            use = block.get("toolUse")
            if use is not None and use.get("toolUseId") == tool_use_id:
                use["input"] = dict(approved)
                return


class ConfirmedCalls(HookProvider):
    """Holds a call a confirm card admitted (an intervention's `Confirm`, such as
    Strands' `HumanInTheLoop`) to what the person approved, with their edits, as the
    admission gate does its own. Registered after every intervention: they decide
    first, from the yes or no they are given."""

    def __init__(self) -> None:
        self._approved = ApprovedCalls()

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self._before_tool)
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        if event.cancel_tool:
            return
        card = own_resume_card(CONFIRM, event.tool_use["toolUseId"])
        if card is None or "call_digest" not in card:
            return  # not a confirmed call (or a card from before calls were bound)
        answer = current_request().resume_answers.get(card.get("card_id", ""))
        decision = parse_decision(answer, card)
        if not decision.approved:
            # The intervention let a call through that its card did not approve.
            event.cancel_tool = outcome_text(card, decision)
            return
        self._approved.run_as_approved(event, card, decision, answer)

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        self._approved.tell(event)


def bind(
    card: Mapping[str, Any],
    decision: Decision,
    answer: Any,
    tool_use: Mapping[str, Any],
    spec: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The arguments an approved call runs with, once it is shown to be the call the
    person approved: the card was raised for exactly this call (`call_digest`), the
    answer's fingerprint is the one this card and decision make, and the edited call
    still meets the tool's own input schema. Raises `CallChanged` otherwise: fail closed.
    """
    if card.get("call_digest") != call_digest(tool_use["name"], tool_use["input"]):
        raise CallChanged(f"the {tool_use['name']} call about to run is not the one shown")
    recorded = answer.get("fingerprint") if isinstance(answer, Mapping) else None
    if recorded != fingerprint(card, decision):
        raise CallChanged(f"the approval of {tool_use['name']} is not the one recorded")
    approved = edited_call(tool_use["input"], decision)
    if decision.edits:
        _meets_schema(tool_use["name"], approved, spec)
    return approved


def _meets_schema(tool: str, params: Mapping[str, Any], spec: Mapping[str, Any] | None) -> None:
    from jsonschema import Draft202012Validator  # imported where an edit is checked

    schema = input_schema(spec)
    if not schema:
        return
    problem = next(iter(Draft202012Validator(schema).iter_errors(dict(params))), None)
    if problem is not None:
        raise CallChanged(f"the edited {tool} call does not meet its schema: {problem.message}")


def _audit(event: str, **detail: Any) -> None:
    record = current_request().audit
    if record is not None:
        record(event, detail)


class RunMeter(HookProvider):
    """Counts tool bodies that ran to completion (cancelled, paused and replayed calls
    excluded)."""

    def __init__(self) -> None:
        self.tool_executions = 0

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        if isinstance(event.selected_tool, ReplayedTool):
            return
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
