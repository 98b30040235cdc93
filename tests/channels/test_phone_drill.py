"""The phone drill: twelve taps over eight decisions, from Telegram, Slack and the card
page, one decision tapped five times at once and one tapped after it expired.

Exactly one answer is applied per decision; every other tap is told the answer (or that
someone is answering right now), the late one that the card expired; the report of
each approved decision is sent once and a denied one never.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from interlock.channels import button_data
from interlock.records import RequestState
from tests.api.support import auth, resume_body, run_body, stream
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import TG_ALICE, link, tap_slack, tap_telegram
from tests.e2e.support import wait_for

DECISIONS = 8


def test_twelve_taps_over_eight_decisions_apply_exactly_one_answer_each(channels: Setup) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    chats = [f"drill-{n}" for n in range(DECISIONS)]
    interrupts = {}
    for chat in chats:
        events = stream(
            channels.client.post(
                "/runs", data=run_body(chat, "send the report"), headers=auth(channels.key)
            )
        )
        interrupts[chat] = events[-1].outcome.interrupts[0]
    requests = {chat: channels.stores.requests.get(chat, 0) for chat in chats}
    updates = iter(range(500, 600))

    def telegram(chat: str, choice: str) -> Callable[[], Any]:
        data = button_data(chat, requests[chat].interrupt_id, choice)
        return lambda: tap_telegram(channels, fakes.telegram_tap(next(updates), TG_ALICE, data))

    def slack(chat: str, choice: str, tap_id: str) -> Callable[[], Any]:
        data = button_data(chat, requests[chat].interrupt_id, choice)
        payload = fakes.slack_tap("U-ALICE", data, channels.slack.url, tap_id)
        return lambda: tap_slack(channels, payload)

    def page(chat: str, decision: str) -> Callable[[], Any]:
        body = resume_body(chat, interrupts[chat], {"decision": decision})
        return lambda: channels.client.post("/resume", headers=auth(channels.key), data=body)

    # Six decisions, one tap each, from all three places
    singles = [
        telegram(chats[0], "a"),
        slack(chats[1], "a", "s1"),
        page(chats[2], "approve"),
        telegram(chats[3], "r"),
        slack(chats[4], "r", "s4"),
        page(chats[5], "reject"),
    ]
    for tap in singles:
        tap()
    # One decision tapped five times at once: twice on Telegram, twice on Slack, the page
    storm = [
        telegram(chats[6], "a"),
        telegram(chats[6], "a"),
        slack(chats[6], "a", "s6a"),
        slack(chats[6], "r", "s6b"),
        page(chats[6], "approve"),
    ]
    threads = [threading.Thread(target=tap) for tap in storm]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # One card left unanswered until it expired, then tapped
    channels.aws["dynamodb"].update_item(
        TableName=channels.aws["table"],
        Key={"pk": {"S": f"CHAT#{chats[7]}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": "1"}},
    )
    telegram(chats[7], "a")()
    taps = len(singles) + len(storm) + 1
    assert taps == 12

    def settled_all() -> bool:
        done = [channels.stores.requests.get(c, 0) for c in chats[:7]]
        return all(r is not None and r.state is RequestState.DONE for r in done)

    wait_for(settled_all, "the seven answered decisions to settle")
    # Every channel tap was told something (the page's answers came back on the page)
    wait_for(
        lambda: (
            len(channels.telegram.recorded.of("answerCallbackQuery")) >= 5
            and len(channels.slack.recorded.of("response_url")) >= 4
        ),
        "every tapper to be told",
    )

    violations = []
    for n, chat in enumerate(chats[:7]):
        done = channels.stores.requests.get(chat, 0)
        sent = channels.stores.outbox.get(f"{chat}#{requests[chat].card['tool_use_id']}")
        if done.claim_count != 1:
            violations.append((chat, "claimed", done.claim_count))
        if (sent is not None) != (done.decision == "approved"):
            violations.append((chat, "report", done.decision, sent))
        expected = {3: "rejected", 4: "rejected", 5: "rejected"}.get(n, "approved")
        if n != 6 and done.decision != expected:
            violations.append((chat, "decision", done.decision))
    late = channels.stores.requests.get(chats[7], 0)
    if late.claim_count != 0 or late.state is RequestState.DONE:
        violations.append((chats[7], "late tap applied"))
    assert violations == []

    # What the taps were told: the storm's losers the answer (or that it was being
    # answered), the late tap that the card had expired
    told = [b["text"] for b in channels.telegram.recorded.of("answerCallbackQuery")]
    told += [b["text"] for b in channels.slack.recorded.of("response_url")]
    applied = [t for t in told if t.startswith("Thanks:")]
    lost = [t for t in told if t.startswith("Already answered") or "right now" in t]
    expired = [t for t in told if "can no longer be answered" in t]
    assert len(expired) == 1
    # Four channel taps on single decisions applied; in the storm, at most one channel
    # tap applied (the page may have won instead) and the rest lost
    assert len(applied) in (4, 5) and len(applied) + len(lost) == 8
