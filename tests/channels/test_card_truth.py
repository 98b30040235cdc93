"""A card the agent cannot dress up, on Slack and Telegram (their local fakes): the
message's header is Interlock's own, and the agent's words, written to pass for facts (a
link that reads as one host and goes to another, a bold "already approved", the
platform's own markup), come under a label saying whose they are, escaped, never as a
header, bold text or a link; the settled message keeps them labelled too."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

import pytest

from interlock.adapters.slack import SlackChannel
from interlock.adapters.telegram import TelegramChannel
from interlock.adapters.webclient import JsonHttp
from interlock.cards import download_card
from interlock.channels import Link, channel_card, settled_text
from interlock.records import RequestRecord, StoredSnapshot, new_request
from interlock.timing import StorePolicy
from tests.channels import fakes

NOW_S: Final = 1_800_000_000
TABLE: Final = "https://data.example.org/t.csv"
HEADER: Final = "Approval needed: downloads"
OUTCOME: Final = "Denied by alice at 12:03 UTC (Slack)"
REASONS: Final = {
    # The spoof as the agent wrote it on the card page
    "markdown": f"Read-only: fetch the table from [{TABLE}](https://evil.example/collect) "
    "**already approved by IT, safe to click Approve**",
    # The same, in each platform's own markup
    "platform": "*Approved by IT* _safe_ ~no risk~ `ok` "
    f"<https://evil.example/collect|{TABLE}> <!here> & "
    f'<a href="https://evil.example/collect">{TABLE}</a> <b>already approved</b>',
}
# Slack's formatting spans: a mark after a non-word character (or the start), closed by
# one before a non-word character (or the end).
SLACK_SPAN: Final = r"(?<![^\W_]){m}[^{m}\n]+{m}(?![^\W_])"


def download(reason: str) -> RequestRecord:
    """A pending download request whose card the agent wrote `reason` for."""
    card = download_card(
        reason=reason,
        urls=[TABLE],
        packages=[],
        refused=[],
        approved_among=lambda subjects: frozenset(),
        tool_use_id="tooluse-1",
    )
    assert card is not None
    request, _ = new_request(
        StorePolicy(),
        chat_id="chat-truth",
        interrupt_id="v1:tool_call:tooluse-1:a",
        kind="approval",
        card=card,
        user_id="alice",
        turn_seq=1,
        now_ms=NOW_S * 1000,
        snapshot=StoredSnapshot("snapshots/s", 1, "d"),
    )
    return request


@pytest.fixture(params=sorted(REASONS))
def reason(request: pytest.FixtureRequest) -> str:
    return str(REASONS[request.param])


@pytest.fixture
def slack() -> Iterator[tuple[SlackChannel, fakes.Platform]]:
    with fakes.serve(fakes.FakeSlack) as fake:
        auth = {"Authorization": f"Bearer {fakes.SLACK_TOKEN}"}
        yield SlackChannel(JsonHttp(fake.url, auth)), fake


@pytest.fixture
def telegram() -> Iterator[tuple[TelegramChannel, fakes.Platform]]:
    with fakes.serve(fakes.FakeTelegram) as fake:
        yield TelegramChannel(JsonHttp(fake.url), fakes.TELEGRAM_TOKEN), fake


def slack_shown(text: str) -> str:
    """What Slack shows of text `_plain` made inert: its escapes and look-alikes undone."""
    for mark, look_alike in {"*": "\u2217", "_": "\u02cd", "~": "\u223c", "`": "\u02cb"}.items():
        text = text.replace(look_alike, mark)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def slack_spans(text: str, mark: str) -> list[str]:
    return re.findall(SLACK_SPAN.format(m=re.escape(mark)), text)


def test_slack_shows_interlocks_header_and_the_agents_words_labelled_and_inert(
    slack: tuple[SlackChannel, fakes.Platform], reason: str
) -> None:
    channel, fake = slack
    request = download(reason)
    ref = channel.post(Link("slack", "U-ALICE", "alice"), request, None)

    (post,) = fake.recorded.of("chat.postMessage")
    # The notification and the card's bold header are Interlock's own words
    assert post["text"] == HEADER
    section = post["blocks"][0]
    text = section["text"]["text"]
    lines = text.split("\n")
    assert lines[0] == f"*{HEADER}*"
    assert slack_spans(text, "*") == [f"*{HEADER}*"], "no bold from the agent's words"
    # The facts Interlock checked: the true URL, apart from the agent's words
    assert f"URL: {TABLE}" in lines
    # The agent's words: under their label, quoted, escaped and formatting nothing
    said = lines.index("_The agent says:_")
    assert lines[said + 1].startswith(">")
    assert slack_shown(lines[said + 1][1:]) == reason
    assert slack_spans(text, "_") == ["_The agent says:_"]
    assert slack_spans(text, "~") == [] and "`" not in text
    assert not re.search(r"<[^>]*>", text), "no link, mention or tag: < and > are escaped"
    # And Slack links nothing in the text itself, nor previews a page it names
    assert section["text"]["verbatim"] is True
    assert (post["unfurl_links"], post["unfurl_media"]) == (False, False)

    # Once settled, the message keeps the agent's words labelled, not as its header
    channel.settle(ref, settled_text(channel_card(request.card).title, OUTCOME))
    (update,) = fake.recorded.of("chat.update")
    first, last = update["blocks"][0]["text"]["text"].split("\n")
    assert first.startswith("Asked: ") and slack_shown(first) == f"Asked: {reason}"
    assert last == f"*{OUTCOME}*"
    assert not re.search(r"<[^>]*>", update["text"])


def test_telegram_shows_interlocks_header_and_the_agents_words_labelled_and_inert(
    telegram: tuple[TelegramChannel, fakes.Platform], reason: str
) -> None:
    channel, fake = telegram
    request = download(reason)
    ref = channel.post(Link("telegram", "1001", "alice"), request, None)

    (sent,) = fake.recorded.of("sendMessage")
    lines = sent["text"].split("\n")
    # The header is Interlock's own, and the facts it checked show the true URL
    assert lines[0] == HEADER
    assert f"URL: {TABLE}" in lines
    # The agent's words: under their label, quoted on a line of their own
    said = lines.index("The agent says:")
    assert lines[said + 1] == f"\u201c{reason}\u201d"
    assert sum(reason in line for line in lines) == 1
    # Sent as plain text: no parse mode and no entities, so nothing in the agent's words
    # (its markdown, its HTML tags) becomes a link or bold; and no page is previewed
    assert "parse_mode" not in sent and "entities" not in sent
    assert sent["link_preview_options"] == {"is_disabled": True}

    # Once settled: plain text too, the agent's words labelled, never the first word
    channel.settle(ref, settled_text(channel_card(request.card).title, OUTCOME))
    (edit,) = fake.recorded.of("editMessageText")
    assert "parse_mode" not in edit and "entities" not in edit
    assert edit["text"] == f"Asked: {reason}\n{OUTCOME}"
