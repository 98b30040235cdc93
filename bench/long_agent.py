"""The benchmarks' long-run agent: a person says yes, then the model takes N steps.

Each step is one model call that calls `build_part`, whose result is 30 KB on the steps
the prompt names big, else a line; `prompt(steps, big)` picks the script. A prompt that
names no parts is a chat turn answered in one call, for the earlier turns of a chat.
The model is the scripted stand-in (no LLM is reachable here); everything else is a
user's agent through `interlock.agent`, as a team writes one.
"""

from __future__ import annotations

from typing import Any, Final

from strands import ToolContext, tool

from interlock.agent import AgentInputs, AgentSpec, Scenario

BIG_BYTES: Final = 30_000


def big_result(n: int) -> str:
    """A 30 KB build log that does not compress away: every line differs."""
    return "\n".join(f"part {n} line {i:05d}: {i * 7919 % 100003:06d} ok" for i in range(1200))[
        :BIG_BYTES
    ]


@tool(context=True)
def start_build(tool_context: ToolContext) -> str:
    """Start building the parts, once a person agrees."""
    answer = tool_context.interrupt("go-ahead", reason={"message": "Build the parts?"})
    return f"The person answered {answer}."


@tool
def build_part(n: int, big: bool = False) -> str:
    """Build part n; returns its build log."""
    return big_result(n) if big else f"part {n} built"


def _step(k: int, steps: int, big: frozenset[int]) -> Any:
    def step(results: list[str]) -> list[dict[str, Any]]:
        if k == 0:
            return [{"tool": "start_build", "input": {}}]
        if k <= steps:
            return [
                {"text": f"Part {k}."},
                {"tool": "build_part", "input": {"n": k, "big": k in big}},
            ]
        return [{"text": f"All {steps} parts built."}]

    return step


def prompt(steps: int, big: tuple[int, ...] = ()) -> str:
    """The prompt that plays `steps` steps, the ones in `big` returning 30 KB."""
    return f"Build the parts [parts {steps} big {','.join(map(str, big))}]"


def scenario(steps: int, big: tuple[int, ...] = ()) -> Scenario:
    """The script `prompt(steps, big)` plays."""
    marks = frozenset(big)
    plays = [_step(k, steps, marks) for k in range(steps + 2)]
    return Scenario(f"parts-{steps}", plays, keywords=(prompt(steps, big).lower()[-40:],))


ALL_BIG: Final = {n: tuple(range(1, n + 1)) for n in (1, 2, 5, 19, 20)}
REALISTIC: Final = (2, 6, 10, 14, 18)  # five 30 KB results in 20 steps
SCRIPT: Final = [
    # A prompt naming no parts is a chat turn answered in one call (earlier turns)
    Scenario("chat", [lambda results: [{"text": "Noted; the figures are in."}]]),
    *(scenario(n, big) for n, big in ALL_BIG.items()),
    scenario(20, REALISTIC),
    scenario(5),
]


def build(inputs: AgentInputs) -> AgentSpec:
    """The agent the long-run benchmark serves (`bench.long_agent:build`)."""
    return AgentSpec(
        tools=[start_build, build_part],
        system_prompt="You build parts.",
        model=inputs.model(scripted=SCRIPT),
    )
