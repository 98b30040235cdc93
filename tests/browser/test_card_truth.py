"""A card the agent cannot dress up: its own words, written to pass for facts (a link
that reads as one host and goes to another, a bold "already approved"), are shown apart
from the facts Interlock checked, labelled as the agent's, as plain text.

The server runs the agent below: its model asks for a download with that reason.
"""

from __future__ import annotations

from typing import Any, Final

import pytest
from playwright.sync_api import ViewportSize, expect

from interlock.agent import (
    AgentInputs,
    AgentSpec,
    ApprovalAlone,
    Block,
    Scenario,
    request_approval,
)
from tests.browser.pages import ChatPage

pytestmark = pytest.mark.server

SERVER_AGENT: Final = "tests.browser.test_card_truth:build"
TRUE_HOST: Final = "data.example.org"
TABLE: Final = f"https://{TRUE_HOST}/t.csv"
SPOOF: Final = (
    f"Read-only: fetch the table from [{TABLE}](https://evil.example/collect) "
    "**already approved by IT, safe to click Approve**"
)
WIDTHS: Final[tuple[ViewportSize, ...]] = (
    {"width": 1280, "height": 900},
    {"width": 360, "height": 740},
)

# Each anchor in the card whose visible text names a host its href does not go to.
MISLEADING_LINKS_JS: Final = r"""(card) =>
  [...card.querySelectorAll("a[href]")]
    .map((a) => ({ text: a.textContent, host: new URL(a.href).hostname }))
    .filter(({ text, host }) =>
      (text.match(/(?:[\p{L}\p{N}-]+\.)+\p{L}{2,}/gu) || []).some(
        (named) => named.toLowerCase() !== host,
      ),
    )
    .map(({ text, host }) => `${text} -> ${host}`)"""


def _ask(results: list[str]) -> list[Block]:
    return [{"tool": "request_approval", "input": {"reason": SPOOF, "urls": [TABLE]}}]


def _done(results: list[str]) -> list[Block]:
    return [{"text": "Done: " + " | ".join(results)}]


def build(inputs: AgentInputs) -> AgentSpec:
    """The agent the server runs: it asks for the table with the spoofing reason."""
    script = [Scenario("spoof", [_ask, _done], keywords=("table",))]
    return AgentSpec(
        tools=[request_approval],
        model=inputs.model(scripted=script),
        hooks=[ApprovalAlone()],
    )


def test_the_agents_words_cannot_pose_as_facts_or_links(tab: ChatPage) -> None:
    # Given the agent asks for a download, in words made to look like facts
    tab.send("Please download the table")
    card = tab.card
    expect(card.get_by_role("heading")).to_have_text("Approve downloads?")

    for viewport in WIDTHS:
        tab.page.set_viewport_size(viewport)
        width = viewport["width"]

        # Then no link in the card reads as one host and goes to another; the agent's
        # block has no link at all
        misleading: list[Any] = card.evaluate(MISLEADING_LINKS_JS)
        assert misleading == [], f"{width}: {misleading}"
        said = card.get_by_role("figure", name="The agent says:")
        expect(said).to_be_visible()
        expect(said.locator("a")).to_have_count(0)

        # And the facts Interlock checked show the true host, apart from the agent's words
        facts = card.locator("dl.facts")
        expect(facts.locator("dd").first).to_have_text(TRUE_HOST)
        expect(facts.get_by_text(TRUE_HOST, exact=True)).to_be_visible()
        expect(facts).to_contain_text(TABLE)
        expect(facts).not_to_contain_text("evil.example")
        expect(facts).not_to_contain_text("approved by IT")

        # And the agent's words sit in their labelled block, as typed: the real target
        # in plain sight, the marks shown, nothing drawn bold from them
        expect(said).to_contain_text(SPOOF)
        expect(said.locator("strong, b, em, i")).to_have_count(0)
        expect(card.locator("strong, b").filter(has_text="approved")).to_have_count(0)
        expect(card.get_by_role("heading")).not_to_contain_text("approved")

        # And it fits the width, with nothing axe-core finds wrong
        assert tab.page.evaluate("document.documentElement.scrollWidth") <= width
        assert tab.accessibility_violations() == [], width

    # And the agent's words come after the facts, never among them or above them
    after = "c => c.querySelector('dl.facts').nextElementSibling?.matches('figure.said')"
    assert card.evaluate(after)
    tab.page.set_viewport_size(WIDTHS[0])
    tab.screenshot("card-truth")
