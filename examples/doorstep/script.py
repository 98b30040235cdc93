"""Doorstep's scripted stand-in, for machines where no LLM is reachable.

On a heat warning it pages the captain about the resident and, in the same step, asks
to send the nearest volunteer; it then reports what happened. Set
`INTERLOCK_MODEL=bedrock:<id>` for a real model.
"""

from __future__ import annotations

from collections.abc import Callable

from interlock.agent import Block, Scenario


def _page_and_assign(volunteer: str) -> Callable[[list[str]], list[Block]]:
    def step(results: list[str]) -> list[Block]:
        return [
            {"text": "Heat warning: paging the captain and lining up a volunteer for Ada."},
            {"tool": "escalate_to_captain", "input": {"resident_id": "r01"}},
            {
                "tool": "assign_volunteer",
                "input": {"resident_id": "r01", "volunteer_id": volunteer},
            },
        ]

    return step


def _report(results: list[str]) -> list[Block]:
    return [{"text": "Drill step done. " + " ".join(results)}]


HEAT = Scenario("heat", [_page_and_assign("vol-tom"), _report], keywords=("heat",))
FAR = Scenario("far", [_page_and_assign("vol-raj"), _report], keywords=("far",))
SCRIPT = (HEAT, FAR)
