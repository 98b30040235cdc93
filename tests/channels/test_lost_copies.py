"""A Telegram copy of a card whose record was lost (its post's process killed just as
Telegram took it; the Bot API cannot find it again, so the card was posted once more):
every tap on it goes through the same respond path, answers the card at most once, and
is told the truth once the card is answered or has ended."""

from __future__ import annotations

import pytest

from interlock.adapters.telegram import TelegramChannel
from interlock.adapters.webclient import JsonHttp
from interlock.channels import Link, button_data
from interlock.records import RequestState
from tests.api.support import auth
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import TG_ALICE, link, pause, settled, tap_telegram
from tests.e2e.support import wait_for


@pytest.mark.parametrize("ended_by", ["a tap on the lost copy", "a cancel on the page"])
def test_a_tap_on_a_lost_telegram_copy_is_told_the_truth(channels: Setup, ended_by: str) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    request = pause(channels, "c1")
    (kept,) = channels.stores.channels.notices("c1")
    assert kept.ref is not None
    # The copy Telegram took whose record was lost: the same card, the same buttons
    lost = TelegramChannel(JsonHttp(channels.telegram.url), fakes.TELEGRAM_TOKEN).post(
        Link("telegram", str(TG_ALICE), "alice"), request, None
    )
    assert lost["message_id"] != kept.ref["message_id"]
    approve = button_data("c1", request.interrupt_id, "a")

    def told() -> list[str]:
        return [a["text"] for a in channels.telegram.recorded.of("answerCallbackQuery")]

    if ended_by == "a tap on the lost copy":
        # A tap on the lost copy answers the open card, as a tap on any copy would
        tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, approve))
        wait_for(lambda: settled(channels, "c1"), "the tap to be applied")
        wait_for(lambda: len(told()) == 1, "the tapper to be thanked")
        assert told()[0].startswith("Thanks: Approved")
        wait_for(lambda: channels.telegram.recorded.of("editMessageText") != [], "the copy's edit")
        truth = "Already answered: Approved"
    else:
        response = channels.client.delete("/chats/c1/request", headers=auth(channels.key))
        assert response.status_code == 200
        truth = "This card can no longer be answered: cancelled"

    # The copy Interlock knows of says how it ended; the lost one keeps its buttons
    (edit,) = channels.telegram.recorded.of("editMessageText")
    assert edit["message_id"] == kept.ref["message_id"]
    # And a tap on the lost copy now is told the truth, and changes nothing
    before = channels.stores.requests.get("c1", 0)
    tap_telegram(channels, fakes.telegram_tap(2, TG_ALICE, approve, chat=TG_ALICE))
    wait_for(lambda: any(t.startswith(truth) for t in told()), "the late tapper to be told")
    after = channels.stores.requests.get("c1", 0)
    assert after is not None and before is not None
    assert (after.state, after.claim_count) == (before.state, before.claim_count)
    assert after.state in (RequestState.DONE, RequestState.CANCELLED)
