"""The approval card page, in headless chromium, against the local server on moto.

Each test drives the page the way a person would (labels, roles, the keyboard) and then
reads the store to judge what really happened: one claim, one decision, one answer.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest
from playwright.sync_api import BrowserContext, Route, expect

from interlock.adapters.factory import Stores
from interlock.records import TOO_MANY_CLAIMS, RequestRecord, RequestState, fresh_secret
from tests.browser.pages import ChatPage

pytestmark = pytest.mark.server

DOWNLOAD: Final = "Please download the reference table"
REPORT: Final = "Please send the weekly report"
QUESTION: Final = "Please write a summary"
INFO: Final = "Please run the export"
SITE: Final = "data.example.org"
TABLE_URL: Final = "https://data.example.org/reference/table.csv"
PHONE: Final = {"width": 360, "height": 740}

OpenTab = Callable[[str], ChatPage]


@pytest.fixture
def open_tab(context: BrowserContext, server: str, user: str) -> Iterator[OpenTab]:
    """Open the page on a chat in a new tab; no tab may end with a script error."""
    tabs: list[ChatPage] = []

    def opener(chat: str) -> ChatPage:
        tabs.append(ChatPage.open(context, server, chat, user))
        return tabs[-1]

    yield opener
    assert [e for tab in tabs for e in tab.errors] == []


@pytest.fixture
def user() -> str:
    # One user per test: the per-user limits on open requests never couple two tests.
    return f"alice-{uuid.uuid4().hex[:6]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def pointer(stores: Stores, chat: str) -> RequestRecord:
    request = stores.requests.get(chat, now_ms())
    assert request is not None, f"chat {chat} has no request"
    return request


def decisions(stores: Stores, chat: str) -> list[str]:
    return [e.detail["decision"] for e in stores.chats.events(chat) if e.type == "decision"]


def test_a_paused_run_shows_the_card_and_approving_shows_the_answer(
    open_tab: OpenTab, chat: str, stores: Stores
) -> None:
    # Given the page on a new chat
    tab = open_tab(chat)

    # When alice asks for a download the agent has no approval for
    tab.send(DOWNLOAD)

    # Then the card shows what is asked, with a live countdown, and takes the focus
    card = tab.card
    expect(card.get_by_role("heading")).to_have_text("Approve downloads?")
    expect(card.locator("dd").first).to_have_text(SITE)
    expect(card).to_contain_text(TABLE_URL)
    expect(card).to_contain_text("Download the reference table the analysis needs.")
    expect(card.locator(".risk")).to_have_text("medium")
    expect(card).to_contain_text("for the rest of this chat")
    expect(card.locator(".expiry")).to_have_text(re.compile(r"^Expires in (23 h 59|24 h 0) min$"))
    assert tab.focused() == "card"
    expect(tab.page.locator(".msg.tool").first).to_contain_text("Fetch url")
    waiting = tab.page.locator(".msg.tool").filter(has_text="waiting for your answer")
    expect(waiting).to_have_count(1)
    tab.screenshot("card-pending")

    # When she unfolds the package list (the agent asked for none), adds two packages,
    # removes one, and tries a name the rules forbid
    card.get_by_role("button", name="Allow packages as well…").click()
    add = card.get_by_label("Add a package name")
    for name in ("numpy", "pandas", "numpy; rm -rf /"):
        add.fill(name)
        add.press("Enter")
    card.get_by_role("button", name="Remove package name pandas").click()

    # Then only the valid name she kept is listed, and the bad one is explained at the field
    expect(card.locator(".list-packages .names code")).to_have_text(["numpy"])
    expect(card.locator(".list-packages .error")).to_contain_text("is not a valid package name")
    assert tab.resumes == []

    # When she approves
    tab.button("Approve").click()

    # Then the run resumes to its answer, and the card records the decision
    expect(tab.outcome()).to_have_text(re.compile(r"^Approved at .+\.$"))
    expect(tab.agent_says()).to_contain_text("id,name,value")
    expect(tab.approvals()).to_contain_text(SITE)
    expect(tab.approvals()).to_contain_text("numpy")
    expect(tab.page.get_by_label("Message to the agent")).to_be_enabled()
    # And the tool line that waited on the card says it was answered: no state left hanging
    expect(waiting).to_have_count(0)
    expect(tab.page.locator(".msg.tool").filter(has_text=": answered")).not_to_have_count(0)
    tab.screenshot("card-answered")
    stored = pointer(stores, chat)
    assert (stored.state, stored.claim_count) == (RequestState.DONE, 1)
    assert decisions(stores, chat) == ["approved"]


def test_deny_with_feedback_passes_the_words_on(
    open_tab: OpenTab, chat: str, stores: Stores
) -> None:
    # Given a paused download
    tab = open_tab(chat)
    tab.send(DOWNLOAD)

    # When alice chooses to deny with feedback
    toggle = tab.button("Deny with feedback")
    toggle.click()

    # Then the feedback fields open, labelled, with the focus in the first
    expect(toggle).to_have_attribute("aria-expanded", "true")
    assert tab.focused() == tab.card.get_by_label("Reason (optional)").get_attribute("id")
    tab.card.get_by_label("Reason (optional)").fill("not today")
    tab.card.get_by_label("Suggestion for the agent (optional)").fill("use last week's copy")
    expect(tab.card.locator(".count").first).to_have_text("9 / 1000 characters")

    # When she sends the denial
    tab.button("Send denial").click()

    # Then the agent goes on without it, quoting her suggestion, and nothing is approved
    expect(tab.outcome()).to_have_text(re.compile(r"^Denied with feedback at "))
    expect(tab.agent_says()).to_contain_text("use last week's copy")
    expect(tab.approvals()).to_have_text("Nothing approved yet.")
    tab.screenshot("card-denied-with-feedback")
    assert decisions(stores, chat) == ["rejected_with_feedback"]


def test_a_question_is_answered_from_its_form(open_tab: OpenTab, chat: str, stores: Stores) -> None:
    # Given the agent asks a single-choice question with a default
    tab = open_tab(chat)
    tab.send(QUESTION)
    expect(tab.card.get_by_role("heading")).to_have_text("The agent asks")
    options = tab.card.get_by_role("radio")
    expect(options).to_have_count(3)

    # The default is chosen already
    expect(tab.card.get_by_label("Bullet points")).to_be_checked()
    assert tab.resumes == []

    # When she chooses another option and sends it
    tab.card.get_by_label("A table").check()
    tab.button("Send answer").click()

    # Then the agent receives exactly her answer, and the card shows it
    expect(tab.outcome()).to_have_text(re.compile(r"^Answered at .*Your answer: A table$"))
    expect(tab.agent_says()).to_contain_text("Thanks, I'll go with: A table.")
    tab.screenshot("card-question-answered")
    assert pointer(stores, chat).claim_count == 1
    # And the focus is back where the next message is written
    assert tab.page.evaluate("document.activeElement.id") == "prompt"


def test_an_information_request_gets_one_labelled_field_per_value(
    open_tab: OpenTab, chat: str
) -> None:
    # Given the agent asks for the details of an export
    tab = open_tab(chat)
    tab.send(INFO)
    expect(tab.card.get_by_role("heading")).to_have_text("The agent needs some details")
    bucket = tab.card.get_by_label("Destination bucket")
    days = tab.card.get_by_label("Retention in days")
    expect(tab.card.get_by_label("Email me when done (optional)")).not_to_be_checked()

    # When alice gives a retention outside the allowed range
    bucket.fill("reports-archive")
    days.fill("400")
    tab.button("Send answer").click()

    # Then the page explains the range at that field, and sends nothing
    expect(tab.card.locator(".field:has(input[type=number]) .error")).to_have_text(
        "Enter a number from 1 to 365."
    )
    expect(days).to_be_focused()
    expect(bucket.locator("xpath=following-sibling::p[1]")).to_have_text("15 / 63 characters")
    assert tab.resumes == []
    tab.screenshot("card-info-invalid")

    # When she corrects it and sends
    days.fill("30")
    tab.button("Send answer").click()

    # Then the agent receives the typed values
    expect(tab.outcome()).to_have_text(re.compile(r"^Answered at "))
    expect(tab.agent_says()).to_contain_text("retention days: 30")
    expect(tab.agent_says()).to_contain_text("bucket name: reports-archive")


def test_a_bad_answer_is_refused_by_the_server_and_shown_at_the_field(
    open_tab: OpenTab, chat: str, stores: Stores
) -> None:
    # Given a page whose copy of the rules lost the package name pattern (an outdated
    # client): it will let a bad name through, and only the server can stop it
    tab = open_tab(chat)
    tab.page.route("**/runs", _without_patterns)
    tab.send(DOWNLOAD)
    tab.card.get_by_role("button", name="Allow packages as well…").click()
    add = tab.card.get_by_label("Add a package name")
    add.fill("bad name!")
    add.press("Enter")
    expect(tab.card.locator(".list-packages .names code")).to_have_text(["bad name!"])

    # When alice approves
    tab.button("Approve").click()

    # Then the server's 422 message is shown next to the packages, which take the focus
    error = tab.card.locator(".list-packages .error")
    expect(error).to_contain_text("not a valid package name: 'bad name!'")
    expect(add).to_have_attribute("aria-invalid", "true")
    expect(add).to_be_focused()
    tab.screenshot("card-bad-answer")
    # And the request is still open, untouched
    stored = pointer(stores, chat)
    assert (stored.state, stored.claim_count) == (RequestState.PENDING, 0)

    # When she removes the bad name and approves again
    tab.card.get_by_role("button", name="Remove package name bad name!").click()
    tab.button("Approve").click()

    # Then it goes through
    expect(tab.outcome()).to_have_text(re.compile(r"^Approved at "))
    assert pointer(stores, chat).claim_count == 1


def _without_patterns(route: Route) -> None:
    reply = route.fetch()
    frames = []
    for frame in reply.text().split("\n\n"):
        if frame.startswith("data: "):
            event = json.loads(frame.removeprefix("data: "))
            _drop_key(event, "pattern")
            frame = "data: " + json.dumps(event)
        frames.append(frame)
    route.fulfill(response=reply, body="\n\n".join(frames))


def _drop_key(value: Any, key: str) -> None:
    if isinstance(value, dict):
        value.pop(key, None)
        for inner in value.values():
            _drop_key(inner, key)
    elif isinstance(value, list):
        for inner in value:
            _drop_key(inner, key)


def test_a_double_click_and_a_second_tab_resume_once(
    open_tab: OpenTab, chat: str, stores: Stores
) -> None:
    # Given a paused download open in two tabs (the second read rotated the secret)
    first = open_tab(chat)
    first.send(DOWNLOAD)
    expect(first.button("Approve")).to_be_visible()
    second = open_tab(chat)
    expect(second.button("Approve")).to_be_visible()

    # When alice double-clicks Approve in the first tab
    first.button("Approve").dblclick()

    # Then it is approved once, and the run's answer appears
    expect(first.outcome()).to_have_text(re.compile(r"^Approved at "))
    expect(first.agent_says()).to_contain_text("id,name,value")

    # When she then approves in the second tab too
    second.button("Approve").click()

    # Then that tab shows the stored outcome and the stored answer, not a second run
    expect(second.outcome()).to_have_text(re.compile(r"^Already answered at .+: Approved$"))
    expect(second.agent_says()).to_contain_text("id,name,value")
    # And a reload shows the same
    second.reload()
    expect(second.outcome()).to_have_text(re.compile(r"^Already answered at .+: Approved$"))
    # And the store counts one claim, one decision and one answer
    assert pointer(stores, chat).claim_count == 1
    assert decisions(stores, chat) == ["approved"]
    assert [t["role"] for t in stores.chats.turns(chat)] == ["user", "assistant"]


def test_a_reload_restores_the_thread_and_the_open_card(
    open_tab: OpenTab, chat: str, stores: Stores
) -> None:
    # Given a paused download
    tab = open_tab(chat)
    tab.send(DOWNLOAD)
    expect(tab.button("Approve")).to_be_visible()

    # When the page is reloaded
    tab.reload()

    # Then the thread and the open card come back, with the focus on the card
    expect(tab.page.locator(".msg.user p")).to_have_text([DOWNLOAD])
    expect(tab.card.get_by_role("heading")).to_have_text("Approve downloads?")
    expect(tab.card.locator(".expiry")).to_contain_text("Expires in")
    assert tab.focused() == "card"
    expect(tab.page).to_have_url(re.compile(rf"\?chat={chat}&"))

    # When alice approves (with the secret the reload was given)
    tab.button("Approve").click()

    # Then it resumes once
    expect(tab.outcome()).to_have_text(re.compile(r"^Approved at "))
    assert pointer(stores, chat).claim_count == 1


def test_an_expired_card_says_so_and_offers_nothing(
    open_tab: OpenTab, chat: str, stores: Stores, storage: dict[str, Any]
) -> None:
    # Given a card on screen whose request expires before alice answers
    tab = open_tab(chat)
    tab.send(DOWNLOAD)
    expect(tab.button("Approve")).to_be_visible()
    storage["dynamodb"].update_item(
        TableName=storage["table"],
        Key={"pk": {"S": f"CHAT#{chat}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(now_ms() // 1000 - 60)}},
    )

    # When she approves
    tab.button("Approve").click()

    # Then the card says it expired and offers nothing; a new message is possible again
    expect(tab.outcome()).to_contain_text("This request has expired")
    expect(tab.card.get_by_role("button")).to_have_count(0)
    expect(tab.page.get_by_label("Message to the agent")).to_be_enabled()
    # And after a reload too
    tab.reload()
    expect(tab.outcome()).to_have_text(re.compile(r"^This request has expired \(at .+\)\."))
    expect(tab.card.get_by_role("button")).to_have_count(0)
    tab.screenshot("card-expired")
    assert pointer(stores, chat).claim_count == 0


def test_revoking_an_approval_makes_the_next_turn_ask_again(
    open_tab: OpenTab, chat: str, user: str, stores: Stores
) -> None:
    # Given an approved download
    tab = open_tab(chat)
    tab.send(DOWNLOAD)
    tab.button("Approve").click()
    revoke = tab.approvals().get_by_role("button", name=f"Revoke site {SITE}")
    expect(revoke).to_be_visible()

    # When alice revokes the site
    revoke.click()

    # Then it is gone from the panel and the store, and the next download asks again
    expect(tab.approvals()).to_have_text("Nothing approved yet.")
    expect(tab.page.locator("#status")).to_contain_text(f"Revoked {SITE}")
    assert stores.approvals.for_user(chat, user, now_ms()) == []
    tab.send(DOWNLOAD)
    expect(tab.button("Approve")).to_be_visible()
    expect(tab.page.locator(".card")).to_have_count(2)  # the answered one stays in the thread


def test_a_person_approves_with_the_keyboard_alone(
    open_tab: OpenTab, chat: str, stores: Stores
) -> None:
    # Given the page, used only with the keyboard
    tab = open_tab(chat)
    keyboard = tab.page.keyboard
    _tab_to(tab, "prompt")
    keyboard.type(DOWNLOAD)
    keyboard.press("Enter")

    # When the card appears, it has the focus; Tab reaches Approve and Enter presses it
    expect(tab.button("Approve")).to_be_visible()
    assert tab.focused() == "card"
    assert tab.unlabelled() == []
    _tab_to(tab, "Approve")
    keyboard.press("Enter")

    # Then the request is approved and answered
    expect(tab.outcome()).to_have_text(re.compile(r"^Approved at "))
    expect(tab.agent_says()).to_contain_text("id,name,value")
    assert decisions(stores, chat) == ["approved"]


def _tab_to(tab: ChatPage, name: str, limit: int = 15) -> None:
    seen = []
    for _ in range(limit):
        tab.page.keyboard.press("Tab")
        seen.append(tab.focused())
        if seen[-1] == name:
            return
    raise AssertionError(f"Tab never reached {name!r}; it went through {seen}")


def test_the_card_works_at_phone_width_with_labels_and_contrast(
    open_tab: OpenTab, chat: str
) -> None:
    # Given a phone-sized window
    tab = open_tab(chat)
    tab.page.set_viewport_size(PHONE)

    # When a report waits for admission
    tab.send(REPORT)

    # Then the card fits without sideways scrolling, every control is labelled, and text
    # keeps a contrast of at least 4.5:1
    expect(tab.card.get_by_role("heading")).to_have_text("Allow “Send report”?")
    expect(tab.card.locator(".risk")).to_be_visible()
    expect(tab.card).to_contain_text("team@example.org")
    assert tab.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert tab.unlabelled() == []
    assert tab.low_contrast() == []
    box = tab.button("Approve").bounding_box()
    assert box is not None and box["height"] >= 44  # a comfortable touch target
    # And Approve is in view as the card appears, with nothing (the composer) over it
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"]
    middle = [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2]
    on_top = tab.page.evaluate(
        "([x, y]) => document.elementFromPoint(x, y)?.closest('button')?.textContent", middle
    )
    assert on_top == "Approve"
    # And what waits elsewhere is one tap away, though the inbox comes after the thread
    expect(tab.page.get_by_role("link", name="Waiting for you")).to_be_visible()
    tab.screenshot("card-phone")


def claimed_by_a_dead_worker(stores: Stores, chat: str, user: str, acted: bool) -> None:
    """The request as a worker that died right after claiming alice's approve leaves it
    (and, with `acted`, after it started the report): its lease already ran out."""
    request = pointer(stores, chat)
    long_ago = now_ms() - stores.policy.lease_ms - 60_000
    secret, secret_hash = fresh_secret()
    stores.requests.rotate_secret(request, "stream", secret_hash, now_ms())
    answer = json.dumps({request.interrupt_id: {"decision": "approve"}}, separators=(",", ":"))
    claim = stores.requests.claim(
        pointer(stores, chat), secret, "dead", long_ago, ("approved", answer), by=user
    )
    if acted:
        stores.requests.mark_acted(claim.fence)


def test_an_interrupted_approve_nothing_acted_on_can_still_be_denied(
    open_tab: OpenTab, chat: str, stores: Stores, user: str
) -> None:
    # Given alice's approve, recorded by a worker that died before it did anything
    tab = open_tab(chat)
    tab.send(REPORT)
    expect(tab.button("Approve")).to_be_visible()
    claimed_by_a_dead_worker(stores, chat, user, acted=False)

    # When she looks again, the card says so and still offers its buttons
    tab.reload()
    expect(tab.card).to_contain_text("was interrupted before anything was done with it")
    tab.screenshot("card-interrupted")

    # And when she denies, the Deny is what runs: nothing is sent
    tab.button("Deny").click()
    expect(tab.outcome()).to_contain_text("Denied")
    done = pointer(stores, chat)
    assert (done.state, done.decision) == (RequestState.DONE, "rejected")
    assert stores.outbox.get(f"{chat}#{done.card['tool_use_id']}") is None
    # (the dead worker's claim was written straight to the store, with no event of its own)
    (decided,) = [e.detail for e in stores.chats.events(chat) if e.type == "decision"]
    assert (decided["decision"], decided["replaced"]) == ("rejected", "approved")


def test_an_approve_already_acted_on_shows_as_decided_with_no_buttons(
    open_tab: OpenTab, chat: str, stores: Stores, user: str
) -> None:
    # Given alice's approve, whose worker started the report and then died
    tab = open_tab(chat)
    tab.send(REPORT)
    expect(tab.button("Approve")).to_be_visible()
    claimed_by_a_dead_worker(stores, chat, user, acted=True)

    # When she looks again, it is shown decided and continuing, with nothing to press
    tab.reload()
    expect(tab.outcome()).to_contain_text(f"Approved by {user}")
    expect(tab.outcome()).to_contain_text("continuing after an interruption")
    expect(tab.card.get_by_role("button")).to_have_count(0)
    # And no new message can be sent while the answer is carried out
    expect(tab.page.get_by_label("Message to the agent")).to_be_disabled()
    expect(tab.page.locator("#composer-hint")).to_contain_text("being carried out")
    tab.screenshot("card-decided-continuing")


def test_an_approve_given_up_says_so_never_approved(
    open_tab: OpenTab, chat: str, stores: Stores, user: str
) -> None:
    # Given alice's approve, acted on, whose workers kept dying until it was given up
    tab = open_tab(chat)
    tab.send(REPORT)
    expect(tab.button("Approve")).to_be_visible()
    claimed_by_a_dead_worker(stores, chat, user, acted=True)
    stores.requests.expire(pointer(stores, chat), TOO_MANY_CLAIMS, now_ms())

    # When she looks again, the card says it was given up, with nothing to press
    tab.reload()
    expect(tab.outcome()).to_have_text(
        re.compile(rf"^Given up \(too many attempts .+\): .*\(Approved by {user} at .+\) was")
    )
    expect(tab.outcome()).not_to_contain_text("continuing")
    expect(tab.card.get_by_role("button")).to_have_count(0)
    expect(tab.page.get_by_label("Message to the agent")).to_be_enabled()


def test_an_answer_the_server_never_got_says_so_and_can_be_pressed_again(
    open_tab: OpenTab, chat: str, stores: Stores
) -> None:
    # Given a paused download, and the server gone when alice approves
    tab = open_tab(chat)
    tab.send(DOWNLOAD)
    expect(tab.button("Approve")).to_be_visible()
    tab.page.route("**/resume", lambda route: route.abort("connectionrefused"))
    tab.button("Approve").click()

    # Then the card says what that means for her answer, and she can press it again
    said = tab.card.locator(":scope > .error")
    expect(said).to_contain_text("could not be reached")
    expect(said).to_contain_text("only ever carried out once")
    expect(tab.button("Approve")).to_be_enabled()
    assert pointer(stores, chat).state is RequestState.PENDING
    tab.screenshot("card-server-unreachable")

    # And once the server is back, pressing it again approves, once
    tab.page.unroute("**/resume")
    tab.button("Approve").click()
    expect(tab.outcome()).to_have_text(re.compile(r"^Approved at "))
    assert pointer(stores, chat).claim_count == 1
