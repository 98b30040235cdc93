"""`./dev serve` finishes what it starts: its sweeper runs on a schedule, so a card nobody
answered in time is settled and the agent ends its turn, as the deployed schedule does."""

from __future__ import annotations

import time

from werkzeug.test import Client

from interlock.records import RequestState
from interlock.timing import SystemClock
from local.server import Sweeping
from tests.api.support import auth, run_body, stream
from tests.conftest import _clients
from tests.e2e.support import wait_for

CHAT = "c-overdue"


def test_the_local_sweeper_settles_an_expired_card_and_the_agent_goes_on(
    moto_api: tuple[Client, bytes],
) -> None:
    from interlock.api import wiring

    client, key = moto_api
    events = stream(
        client.post(
            "/runs", data=run_body(CHAT, "please send the weekly report"), headers=auth(key)
        )
    )
    assert events[-1].outcome.type == "interrupt"
    stores = wiring.stores()
    # Its expiry passes with nobody answering (the stored expiry moved into the past)
    _clients(endpoint=None)["dynamodb"].update_item(
        TableName="api-table",
        Key={"pk": {"S": f"CHAT#{CHAT}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )
    assert client.get(f"/chats/{CHAT}/request", headers=auth(key)).json["state"] == "expired"

    # When the local server's sweeper runs on its schedule
    sweeping = Sweeping(every_s=0.1).start()
    try:
        wait_for(
            lambda: (
                stores.requests.get(CHAT, SystemClock().now_ms()).state  # type: ignore[union-attr]
                is RequestState.DONE
            ),
            "the sweeper's pass",
        )
    finally:
        sweeping.stop()

    # Then the card was settled as timed out, nothing was sent, and the agent ended its turn
    request = stores.requests.get(CHAT, SystemClock().now_ms())
    assert request is not None and request.decision == "timed_out"
    assert stores.outbox.get(f"{CHAT}#{request.card['tool_use_id']}") is None
    turns = stores.chats.turns(CHAT)
    assert [t["role"] for t in turns] == ["user", "assistant"]
    events_ = [e.type for e in stores.chats.events(CHAT)]
    assert "timed_out" in events_
