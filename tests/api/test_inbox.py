"""The inbox: a user's open requests across chats, newest first; and the trail that
says who answered each, from where, with what."""

from __future__ import annotations

from typing import Any

from tests.api.support import auth, resume_body, run_body, stream


def test_the_inbox_lists_the_callers_open_requests_newest_first(api: Any) -> None:
    client, key = api
    paused = {}
    for chat, prompt in (("c1", "send the report"), ("c2", "write a summary"), ("c3", "hello")):
        paused[chat] = stream(client.post("/runs", data=run_body(chat, prompt), headers=auth(key)))
    # Someone else's request is not in alice's inbox
    stream(client.post("/runs", data=run_body("b1", "send the report"), headers=auth(key, "bob")))

    rows = client.get("/inbox", headers=auth(key)).json["requests"]

    assert [r["chatId"] for r in rows] == ["c2", "c1"]  # c3 only said hello: nothing asked
    question, approval = rows
    assert (question["kind"], question["type"]) == ("question", "question")
    assert question["title"] == "Which format should the summary use?"
    assert (approval["kind"], approval["risk"], approval["state"]) == (
        "approval",
        "high",
        "pending",
    )
    assert approval["expiresAt"].endswith("Z") and approval["questions"] == 1

    # Once answered, a request leaves the inbox
    interrupt = paused["c2"][-1].outcome.interrupts[0]
    stream(
        client.post(
            "/resume", headers=auth(key), data=resume_body("c2", interrupt, {"answer": "A table"})
        )
    )
    assert [r["chatId"] for r in client.get("/inbox", headers=auth(key)).json["requests"]] == ["c1"]
    # The trail says who answered, from where, and what
    events = client.get("/chats/c2/events", headers=auth(key)).json["events"]
    decision = next(e for e in events if e["type"] == "decision")
    assert decision["actor"] == "alice"
    assert decision["detail"]["source"] == "api"
    assert decision["detail"]["answer"] == {"answer": "A table"}


def test_the_inbox_needs_a_signed_in_user(api: Any) -> None:
    client, _ = api
    assert client.get("/inbox").status_code == 401
