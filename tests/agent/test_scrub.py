"""Query strings never enter a run: a URL the model writes with `?token=...` reaches no
event, snapshot, journal, stored answer, saved turn or record, and the model is told."""

from __future__ import annotations

import json
from typing import Any

from interlock.api.agui import encode, run_events
from interlock.harness.scrub import SCRUBBED_NOTE, scrub
from interlock.ports import Stores
from interlock.resume import resume_turn
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, TurnLimits, run_turn
from tests.agent.support import Models, Transport, everything_stored, scenario

TOKEN = "tok-7f3a9c"
LEAKY = f"https://data.example.org/table.csv?token={TOKEN}#part-2"


def test_scrub_removes_query_and_fragment_from_every_url_in_a_value() -> None:
    value = {"url": LEAKY, "urls": [LEAKY, "https://a.example.org/x"], "n": 3, "text": "?x"}

    cleaned, changed = scrub(value)

    assert changed
    assert cleaned == {
        "url": "https://data.example.org/table.csv",
        "urls": ["https://data.example.org/table.csv", "https://a.example.org/x"],
        "n": 3,
        "text": "?x",
    }
    assert scrub({"url": "https://a.example.org/x"}) == ({"url": "https://a.example.org/x"}, False)


def test_a_url_with_a_token_is_scrubbed_before_anything_sees_it(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    # Given a model that asks for approval of, then fetches, a URL carrying a token
    script = scenario(
        [{"tool": "request_approval", "input": {"reason": "needed", "urls": [LEAKY]}}],
        [{"tool": "fetch_url", "input": {"url": LEAKY}}],
        lambda results: [{"text": "Read: " + results[0][:200]}],
    )
    transport = Transport()
    rt = Runtime(
        stores, Models([script]), clock=clock, fetch=transport, limits=TurnLimits(heartbeat_s=60)
    )
    alice = Caller("alice")

    # When the run pauses for approval, and resumes approved
    paused = run_turn(rt, alice, "c-scrub", "go")
    assert paused.offer is not None
    done = resume_turn(
        rt,
        alice,
        "c-scrub",
        interrupt_id=paused.offer.request.interrupt_id,
        secret=paused.offer.secret,
        status="resolved",
        payload={"decision": "approve"},
    )

    # Then the token reached no event, record, object, nor the transport
    streamed = encode(run_events("c-scrub", "r1", paused)) + encode(
        run_events("c-scrub", "r2", done)
    )
    assert TOKEN not in streamed and "part-2" not in streamed
    assert TOKEN not in everything_stored(aws)
    assert transport.urls == ["https://data.example.org/table.csv"]
    # And the model was told what was removed
    assert SCRUBBED_NOTE in (done.text or "")


def test_urls_written_in_prose_are_scrubbed_too_in_every_spelling() -> None:
    prose = (
        f"Please fetch {LEAKY} for me, then \u200bhttps://user:pw@data.example.org/x?token="
        f"{TOKEN} and \u2039https://data.example.org/y?token={TOKEN}> too"
    )
    cleaned, changed = scrub({"reason": prose})
    assert changed
    assert cleaned["reason"] == (
        "Please fetch https://data.example.org/table.csv for me, then "
        "\u200bhttps://data.example.org/x and \u2039https://data.example.org/y> too"
    )


def test_a_token_in_a_reason_written_in_prose_reaches_no_card_or_record(
    stores: Stores, clock: ManualClock, aws: dict[str, Any]
) -> None:
    from interlock.egress import safe_url, shown
    from interlock.errors import InvalidInput

    reason = f"I need {LEAKY} (the table) and https://user:pw@data.example.org/t?token={TOKEN}"
    script = scenario(
        [{"tool": "request_approval", "input": {"reason": reason, "urls": [LEAKY]}}],
        lambda results: [{"text": "ok"}],
    )
    rt = Runtime(
        stores, Models([script]), clock=clock, fetch=Transport(), limits=TurnLimits(heartbeat_s=60)
    )
    paused = run_turn(rt, Caller("alice"), "c-prose", "go")
    assert paused.offer is not None
    card = paused.offer.request.card
    assert TOKEN not in json.dumps(card) and "pw@" not in json.dumps(card)
    assert "https://data.example.org/table.csv" in card["reason"]
    streamed = encode(run_events("c-prose", "r1", paused))
    assert TOKEN not in streamed and TOKEN not in everything_stored(aws)
    # And a URL refused for its form is echoed back only scrubbed
    try:
        safe_url(f"ftp://user:pw@data.example.org/x?token={TOKEN}")
    except InvalidInput as refused:
        assert TOKEN not in str(refused) and "pw@" not in str(refused), refused
    assert shown(f"gopher://a.example/?token={TOKEN}") == "gopher://a.example/"
