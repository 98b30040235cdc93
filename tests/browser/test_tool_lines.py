"""The chat's tool lines tell the truth about each call: the one that waits on the card,
the ones a hook merged into it or did not run, and what a resumed run did, in the order
it happened and before its final text.

The demo agent's "batch" scenario makes three calls in one step: an approval (it asks,
on a card), a download (not run: an approval must be asked alone) and a second approval
(merged into the first).
"""

from __future__ import annotations

import re
from typing import Final

import pytest
from playwright.sync_api import Locator, expect

from tests.browser.pages import ChatPage
from tests.browser.test_card_page import DOWNLOAD

pytestmark = pytest.mark.server

BATCH: Final = "Please run the batch"
TABLE_URL: Final = "https://data.example.org/reference/table.csv"
WAITING: Final = "waiting for your answer"

# The thread as a person reads it, top to bottom: each entry's kind and its text.
THREAD_JS: Final = """() =>
  [...document.querySelectorAll("#thread > li")].map((li) => ({
    kind: ["user", "agent", "tool", "record"].find((k) => li.classList.contains(k)) || "",
    text: li.textContent.replace(/\\s+/g, " ").trim(),
  }))"""


def tool_lines(tab: ChatPage) -> Locator:
    return tab.page.locator(".msg.tool")


def line_of(tab: ChatPage, text: str) -> Locator:
    return tool_lines(tab).filter(has_text=text)


def thread(tab: ChatPage) -> list[dict[str, str]]:
    return list(tab.page.evaluate(THREAD_JS))


def after_last_user_message(entries: list[dict[str, str]]) -> list[dict[str, str]]:
    last = max(i for i, entry in enumerate(entries) if entry["kind"] == "user")
    return entries[last + 1 :]


def test_a_batch_paused_on_one_card_shows_one_call_waiting_and_what_became_of_the_others(
    tab: ChatPage,
) -> None:
    # When alice asks for the batch: one approval asks, the other calls of its step do not
    tab.send(BATCH)
    expect(tab.card.get_by_role("heading")).to_have_text("Approve downloads?")

    # Then there is one line per call, and only the call the card stands for waits on it
    expect(tool_lines(tab)).to_have_count(3)
    expect(line_of(tab, WAITING)).to_have_count(1)
    expect(line_of(tab, WAITING)).to_contain_text(
        "Request approval (Download the reference table.)"
    )
    # And the download says it was not run, and why
    download = line_of(tab, "Fetch url")
    expect(download).to_contain_text(re.compile(r"not run", re.I))
    expect(download).to_contain_text("request_approval must be called on its own")
    # And the second approval says which request it was merged into
    merged = line_of(tab, "And the mirror.")
    expect(merged).to_contain_text("merged into Request approval (Download the reference table.)")
    tab.screenshot("tool-lines-paused-batch")

    # When she approves
    tab.button("Approve").click()
    expect(tab.agent_says()).to_contain_text("Batch finished")
    expect(tab.page.locator("#thread .msg.record")).to_have_count(1)

    # Then each call still has one line: the paused call's now says it was answered, and
    # the calls that never ran or were merged still say so, not "answered"
    expect(tool_lines(tab)).to_have_count(3)
    expect(line_of(tab, WAITING)).to_have_count(0)
    expect(line_of(tab, "Request approval (Download the reference table.): ")).to_contain_text(
        ": answered"
    )
    expect(download).to_contain_text(re.compile(r"not run", re.I))
    expect(download).not_to_contain_text("answered")
    expect(merged).to_contain_text("merged into")
    expect(merged).not_to_contain_text(": answered")
    # And the agent's final text comes after every tool line
    entries = after_last_user_message(thread(tab))
    kinds = [entry["kind"] for entry in entries]
    assert kinds[-1] == "agent", entries
    assert "tool" not in kinds[kinds.index("agent") :], entries
    tab.screenshot("tool-lines-answered-batch")

    # When she reloads the page
    tab.reload()

    # Then the saved thread tells each call as it ended, before the agent's text
    expect(tool_lines(tab)).to_have_count(3)
    expect(line_of(tab, WAITING)).to_have_count(0)
    expect(line_of(tab, "Fetch url")).to_contain_text("Not run: request_approval must be called")
    expect(line_of(tab, "And the mirror.")).to_contain_text(
        "merged into Request approval (Download the reference table.)"
    )
    expect(line_of(tab, "Request approval (Download the reference table.): ")).to_contain_text(
        "Approved by the user"
    )
    kinds = [entry["kind"] for entry in after_last_user_message(thread(tab))]
    assert kinds == ["tool", "tool", "tool", "agent"], kinds


def test_a_resumed_runs_tool_calls_come_in_order_before_its_final_text(tab: ChatPage) -> None:
    # Given a download that paused on its approval card
    tab.send(DOWNLOAD)
    expect(tab.card.get_by_role("heading")).to_have_text("Approve downloads?")
    expect(line_of(tab, WAITING)).to_have_count(1)

    # When alice approves, and the resumed run downloads the table and answers
    tab.button("Approve").click()
    expect(tab.agent_says()).to_contain_text("id,name,value")
    expect(tab.page.locator("#thread .msg.record")).to_have_count(1)

    # Then the thread reads in the order things happened: the agent's first words, the
    # refused download, the approval (once, answered), the card, the download that ran,
    # then the final text
    entries = after_last_user_message(thread(tab))
    kinds = [entry["kind"] for entry in entries]
    assert kinds == ["agent", "tool", "tool", "record", "tool", "agent"], entries
    _, refused, asked, _, fetched, final = entries
    assert "Fetch url" in refused["text"], entries
    assert "not approved" in refused["text"].lower(), entries
    assert "Request approval" in asked["text"] and ": answered" in asked["text"], entries
    assert "Fetch url" in fetched["text"] and WAITING not in fetched["text"], entries
    assert final["text"].startswith("Agent") and "id,name,value" in final["text"], entries
    expect(line_of(tab, "Request approval")).to_have_count(1)
    tab.screenshot("tool-lines-resumed-download")
