"""A refused answer, to a client that reads the event stream: a run that finishes where
the thread stands, so that an AG-UI client lets go of the interrupt it answered.

The request still open is offered again: with the secret the client sent while that
still opens it (nothing written), else with a fresh one for the stream, as a resync
would hand out (the card page's secret keeps working). A request that ended is offered
no more. A client that could act on neither (it sent no secret) hears `RUN_ERROR`, and
so does anyone the chat is not theirs to answer, who learns nothing of its card.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import RunAgentInput, RunFinishedEvent, StateSnapshotEvent, TextMessageContentEvent
from ag_ui.core.types import ResumeEntry

from tests.api.conftest import _clients
from tests.api.support import auth, resume_body, run_body, stream

CHAT = "c-refused"
EVENT_STREAM = {"Accept": "text/event-stream"}


def _pause(client: Any, key: bytes) -> Any:
    paused = stream(
        client.post("/runs", data=run_body(CHAT, "download the table"), headers=auth(key))
    )
    assert paused[-1].outcome.type == "interrupt"
    return paused[-1].outcome.interrupts[0]


def _answer(
    client: Any, key: bytes, interrupt: Any, payload: Any, secret: str, user: str = "alice"
) -> Any:
    return client.post(
        "/resume",
        headers=auth(key, user=user) | EVENT_STREAM,
        data=resume_body(CHAT, interrupt, payload, secret=secret),
    )


def _request_item() -> dict[str, Any]:
    item: dict[str, Any] = _clients(endpoint=None)["dynamodb"].get_item(
        TableName="api-table",
        Key={"pk": {"S": f"CHAT#{CHAT}"}, "sk": {"S": "REQUEST"}},
        ConsistentRead=True,
    )["Item"]
    return item


def _told(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent))


def test_a_refused_answer_is_offered_again_with_its_own_secret_and_nothing_is_written(
    moto_api: tuple[Any, bytes],
) -> None:
    client, key = moto_api
    interrupt = _pause(client, key)
    secret = interrupt.metadata["secret"]
    before = _request_item()

    # An answer outside the card's schema, from the client holding the card
    events = stream(_answer(client, key, interrupt, {"decision": "maybe"}, secret))

    # The run finishes: why, for the person; the refusal, for a program; the same card
    end = events[-1]
    assert isinstance(end, RunFinishedEvent) and end.outcome is not None
    assert end.result["outcome"] == "refused" and end.result["code"] == "invalid_payload"
    assert end.outcome.type == "interrupt"
    assert [i.id for i in end.outcome.interrupts] == [interrupt.id]
    assert "answer it here" in _told(events)
    # offered with the secret the client holds, which still answers: nothing was written
    (state,) = [e for e in events if isinstance(e, StateSnapshotEvent)]
    assert state.snapshot["interlock"]["secret"] == secret
    assert _request_item() == before
    done = stream(_answer(client, key, interrupt, {"decision": "approve"}, secret))
    assert done[-1].result["decision"] == "approved"


def test_a_stale_stream_secret_is_offered_a_fresh_one_and_the_pages_keeps_working(
    moto_api: tuple[Any, bytes],
) -> None:
    client, key = moto_api
    interrupt = _pause(client, key)
    stale = interrupt.metadata["secret"]
    # The card page reads the request (its own secret), and another AG-UI tab resyncs
    # (retiring the stream's secret the first tab holds)
    page = client.get(f"/chats/{CHAT}/request", headers=auth(key)).json["secret"]
    resync = RunAgentInput(thread_id=CHAT, run_id="r3", messages=[]).model_dump_json(by_alias=True)
    resynced = stream(client.post("/runs", data=resync, headers=auth(key)))
    other_tab = resynced[-1].outcome.interrupts[0].metadata["secret"]

    # The first tab answers with its old copy: refused, and offered a fresh secret
    events = stream(_answer(client, key, interrupt, {"decision": "approve"}, stale))
    end = events[-1]
    assert end.result["code"] == "refused" and end.outcome.type == "interrupt"
    fresh = end.outcome.interrupts[0].metadata["secret"]
    assert fresh not in (stale, page, other_tab)
    assert "opened elsewhere" in _told(events)

    # The stream's older copy is retired by that read, the page's is not
    retired = client.post(
        "/resume",
        headers=auth(key),
        data=resume_body(CHAT, interrupt, {"decision": "approve"}, secret=other_tab),
    )
    assert (retired.status_code, retired.json["error"]["code"]) == (403, "refused")
    done = client.post(
        "/resume",
        headers=auth(key),
        data=resume_body(CHAT, interrupt, {"decision": "approve"}, secret=page),
    )
    assert stream(done)[-1].result["decision"] == "approved"


def test_an_answer_to_an_ended_request_finishes_with_nothing_offered(
    moto_api: tuple[Any, bytes],
) -> None:
    client, key = moto_api
    interrupt = _pause(client, key)
    assert client.delete(f"/chats/{CHAT}/request", headers=auth(key)).status_code == 200
    before = _request_item()

    events = stream(
        _answer(client, key, interrupt, {"decision": "approve"}, interrupt.metadata["secret"])
    )

    end = events[-1]
    assert end.result["code"] == "cancelled" and end.outcome.type == "success"
    assert not [e for e in events if isinstance(e, StateSnapshotEvent)]
    assert _told(events).endswith("Nothing was done on this answer.")
    assert _request_item() == before


def test_an_answer_with_no_secret_or_from_a_stranger_is_a_run_error_offering_nothing(
    moto_api: tuple[Any, bytes],
) -> None:
    client, key = moto_api
    interrupt = _pause(client, key)
    secret = interrupt.metadata["secret"]
    before = _request_item()

    # A client that sent no secret could not answer a card offered again either
    entry = ResumeEntry(
        interrupt_id=interrupt.id, status="resolved", payload={"decision": "approve"}
    )
    no_secret = RunAgentInput(
        thread_id=CHAT, run_id="r4", messages=[], resume=[entry]
    ).model_dump_json(by_alias=True)
    events = stream(client.post("/resume", headers=auth(key) | EVENT_STREAM, data=no_secret))
    assert [e.type for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1].code == "invalid_payload"

    # Someone else, holding the secret itself: refused, and told nothing of the card
    stranger = _answer(client, key, interrupt, {"decision": "approve"}, secret, user="mallory")
    body = stranger.get_data(as_text=True)
    assert secret not in body and "reference" not in body and interrupt.id not in body
    assert stranger.status_code == 403 or '"RUN_ERROR"' in body
    assert _request_item() == before
