"""When a refusal is an HTTP error and when it is `RUN_ERROR` (AG-UI 1.0).

Until a run holds the chat (a turn admitted, a request claimed) nothing was stored and
no event was sent: a refusal is an HTTP status with the JSON error body. From then on
the 200 and `RUN_STARTED` are on the wire, so a failure ends the run with `RUN_ERROR`,
carrying the same error code, and leaves the chat usable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.support import auth, resume_body, run_body, stream


def test_a_refused_run_is_an_http_error_with_no_events(api: Any) -> None:
    client, key = api
    paused = stream(
        client.post("/runs", data=run_body("c1", "download the table"), headers=auth(key))
    )
    assert paused[-1].outcome.type == "interrupt"

    # A second turn while the card is open: refused before anything started
    busy = client.post("/runs", data=run_body("c1", "hello"), headers=auth(key))
    assert busy.status_code == 409
    assert busy.headers["Content-Type"].startswith("application/json")
    assert busy.json["error"]["code"] == "pending_interrupt"
    # A malformed body, another user's chat, a wrong secret: all before the run
    assert client.post("/runs", data="{", headers=auth(key)).status_code == 400
    stranger = auth(key, user="mallory")
    assert client.post("/runs", data=run_body("c1", "hi"), headers=stranger).status_code == 403
    interrupt = paused[-1].outcome.interrupts[0]
    wrong = client.post(
        "/resume",
        headers=auth(key),
        data=resume_body("c1", interrupt, {"decision": "approve"}, secret="not-the-secret"),
    )
    assert (wrong.status_code, wrong.json["error"]["code"]) == (403, "refused")
    # and the card is still there to answer
    assert client.get("/chats/c1/request", headers=auth(key)).status_code == 200


@pytest.fixture
def failing_agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("INTERLOCK_AGENT", "tests.api.failing_agent:build")
    yield


def test_a_run_that_fails_after_it_started_ends_with_run_error(
    failing_agent: None, api: Any
) -> None:
    client, key = api
    response = client.post("/runs", data=run_body("c1", "hello"), headers=auth(key))

    assert response.status_code == 200
    events = stream(response)
    assert [e.type for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1].code == "system_error"
    # The internal error is not echoed to the client
    assert "unavailable" not in events[-1].message
    # The turn was abandoned: the chat is free for the next one
    again = client.post("/runs", data=run_body("c1", "hello again"), headers=auth(key))
    retried = [e.type for e in stream(again)]
    assert (retried[0], retried[-1]) == ("RUN_STARTED", "RUN_ERROR")
    turns = client.get("/chats/c1/turns", headers=auth(key)).json["turns"]
    assert [t["role"] for t in turns] == ["user", "user"]  # the prompts; no answer saved


def test_a_resume_that_fails_after_its_claim_ends_with_run_error_and_stays_answerable(
    failing_agent: None, api: Any
) -> None:
    client, key = api
    paused = stream(client.post("/runs", data=run_body("c1", "ask me"), headers=auth(key)))
    interrupt = paused[-1].outcome.interrupts[0]

    answered = client.post(
        "/resume", headers=auth(key), data=resume_body("c1", interrupt, {"answer": "north"})
    )

    assert answered.status_code == 200
    events = stream(answered)
    assert events[0].type == "RUN_STARTED"
    assert (events[-1].type, events[-1].code) == ("RUN_ERROR", "run_failed")
    # The claim was released, not stranded: nothing was acted on (the question's own
    # answer is no step: it follows from the card and the answer), so the request is
    # pending again and answerable afresh; the next resume fails the same way
    view = client.get("/chats/c1/request", headers=auth(key))
    assert (view.status_code, view.json["state"]) == (200, "pending")
    again = client.post(
        "/resume",
        headers=auth(key),
        data=resume_body("c1", interrupt, {"answer": "north"}, secret=view.json["secret"]),
    )
    retried = [e.type for e in stream(again)]
    assert (retried[0], retried[-1]) == ("RUN_STARTED", "RUN_ERROR")
