"""The analyst: downloads behind an approval, questions, information requests, and a
report that leaves the chat only after a person admits it.

Serve it with `./dev serve --agent examples.analyst:build`. Its scripted stand-in
(`script.py`) plays where no LLM is reachable; set `INTERLOCK_MODEL=bedrock:<id>` for
a real model.
"""

from __future__ import annotations

from typing import Any, Final

from strands import ToolContext, tool
from strands.tools.decorator import DecoratedFunctionTool

from examples.analyst.script import DEMO_SCENARIOS
from interlock.agent import (
    AgentInputs,
    AgentSpec,
    ApprovalAlone,
    admission_gate,
    ask_user,
    current_request,
    fetch_url,
    request_approval,
    request_info,
    send_once,
)

SYSTEM_PROMPT: Final = (
    "You are a careful analyst. Downloads are allowed only from approved sites: when one is "
    "refused, call request_approval on its own with a one-sentence reason, then retry. "
    "If something is declined, continue without it and say so."
)
# Reports leave the chat: only users with this role get the tool.
REPORTER: Final = "reporter"


@tool(context=True)
def send_report(
    recipient: str, summary: str, risk: str = "high", tool_context: ToolContext | None = None
) -> str:
    """Send a short report to a recipient outside this chat.

    Args:
        recipient: Where the report goes.
        summary: The report's text.
        risk: How sensitive the report is: low, medium or high.
    """
    assert tool_context is not None
    # Who sends it comes from the request context the API set, never from an argument.
    by = current_request().user_id
    if send_once(tool_context, {"recipient": recipient, "summary": summary, "by": by}):
        return f"Report sent to {recipient}."
    return f"Report to {recipient} was already sent; not sending it twice."


def build(inputs: AgentInputs) -> AgentSpec:
    """The analyst for one user: `send_report` only for reporters, and admitted first."""
    settings = inputs.settings
    tools: list[DecoratedFunctionTool[..., Any]] = [
        request_approval,
        fetch_url,
        ask_user,
        request_info,
    ]
    if REPORTER in inputs.roles:
        tools.append(send_report)
    policies = {
        name: (policy.risk, policy.impact, policy.editable)
        for name, policy in settings.tool_policies.items()
    }
    enabled = set(settings.tools)
    return AgentSpec(
        tools=[t for t in tools if t.tool_name in enabled],
        system_prompt=SYSTEM_PROMPT,
        model=inputs.model(scripted=DEMO_SCENARIOS),
        # One approval card at a time: request_approval runs alone in its batch, and
        # only the first call needing admission in a batch may ask.
        hooks=[ApprovalAlone(), admission_gate(policies, settings.sample_rate)],
    )
