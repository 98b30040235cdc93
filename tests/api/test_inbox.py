"""The inbox: a user's open requests across chats, newest first; and the trail that
says who answered each, from where, with what."""

from __future__ import annotations

from typing import Any

from interlock.manage import INBOX_PAGE
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


def test_the_inbox_comes_in_pages_that_list_each_open_request_once(api: Any) -> None:
    client, key = api
    chats = [f"p{n:02d}" for n in range(INBOX_PAGE + 2)]
    for chat in chats:
        stream(client.post("/runs", data=run_body(chat, "send the report"), headers=auth(key)))

    first = client.get("/inbox", headers=auth(key)).json
    second = client.get(f"/inbox?page={first['next']}", headers=auth(key)).json

    assert len(first["requests"]) == INBOX_PAGE and first["next"]
    assert "next" not in second
    listed = [r["chatId"] for r in first["requests"] + second["requests"]]
    assert sorted(listed) == chats  # every one, none twice


def test_an_inbox_page_that_no_page_gave_is_refused_with_a_clear_error(api: Any) -> None:
    client, key = api
    for page in ("12", "x~c1", "12~", "12~a/b", "1" * 17 + "~c1"):
        refused = client.get(f"/inbox?page={page}", headers=auth(key))
        assert refused.status_code == 422, page
        assert "next of an inbox page" in refused.json["error"]["message"], page
