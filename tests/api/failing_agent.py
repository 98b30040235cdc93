"""An agent whose model fails (after the turn was admitted, or after a resume claimed
its request): what a broken model, a throttled Bedrock or an expired credential looks
like to Interlock. "ask" first asks a question, and fails once it is answered."""

from __future__ import annotations

from interlock.agent import AgentInputs, AgentSpec, Block, Scenario, ask_user


def _fail(results: list[str]) -> list[Block]:
    raise RuntimeError("the model is unavailable")


def _ask(results: list[str]) -> list[Block]:
    question = {"type": "free_text", "prompt": "Which region?"}
    return [{"tool": "ask_user", "input": question}]


def build(inputs: AgentInputs) -> AgentSpec:
    """Any prompt reaches the model, which fails (after one question, for "ask")."""
    scenarios = [Scenario("fails", [_fail]), Scenario("asks", [_ask, _fail], keywords=("ask",))]
    return AgentSpec(tools=[ask_user], model=inputs.model(scripted=scenarios))
