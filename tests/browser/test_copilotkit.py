"""CopilotKit's React client, unmodified, in chromium, answering Interlock's interrupt.

The page is a CopilotKit app as its users write one (`copilotkit/app.jsx`): the
provider pointed at CopilotKit's runtime, CopilotKit's own chat, and CopilotKit's
`useInterrupt` rendering the AG-UI interrupt as a card whose buttons resolve it with the
payload the interrupt's `responseSchema` asks for. The runtime (`copilotkit/server.mjs`)
serves Interlock's endpoint as a stock `HttpAgent` with a Bearer token, and the page,
on one 127.0.0.1 origin. The bundle is built from node_modules for each module run.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, Request, expect

from interlock.adapters.factory import Stores
from interlock.records import RequestRecord, RequestState
from tests.browser.conftest import ROOT
from tests.browser.pages import ChatPage
from tests.browser.test_card_page import now_ms, pointer

pytestmark = pytest.mark.server

HERE: Final = Path(__file__).with_name("copilotkit")
DOWNLOAD: Final = "Please download the reference table"
# Nothing leaves the machine: CopilotKit's telemetry and its packages' analytics are off.
QUIET: Final = {
    "COPILOTKIT_TELEMETRY_DISABLED": "true",
    "SCARF_ANALYTICS": "false",
    "DO_NOT_TRACK": "1",
}
START_TIMEOUT_S: Final = 30.0


def _node() -> str:
    node = shutil.which("node")
    assert node, "Node.js runs CopilotKit's runtime and bundles its React client"
    return node


@pytest.fixture(scope="module")
def page_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app bundled with esbuild from node_modules, beside its index.html."""
    out = tmp_path_factory.mktemp("copilotkit-page")
    subprocess.run(
        [_node(), str(HERE / "bundle.mjs"), str(out)],
        cwd=ROOT,
        env={**os.environ, **QUIET},
        check=True,
        timeout=120,
        capture_output=True,
    )
    assert (out / "app.js").is_file()
    return out


def session_token(server: str, user: str) -> str:
    """A development token for `user`, as the local server hands one to its own page."""
    url = f"{server}/local/session?user={user}&groups=reporter"
    with urllib.request.urlopen(url, timeout=10) as reply:
        token = json.loads(reply.read())["token"]
    assert isinstance(token, str)
    return token


@dataclass
class Runtime:
    """CopilotKit's runtime serving one user's token, and the page, in a Node process."""

    url: str
    process: subprocess.Popen[str]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@contextmanager
def copilotkit_runtime(
    server: str, token: str, page_dir: Path, log: Path, *, resync: bool = False, port: int = 0
) -> Iterator[Runtime]:
    argv = [_node(), str(HERE / "server.mjs"), f"{server}/runs", token, str(page_dir)]
    argv += ["--port", str(port)] + (["--resync"] if resync else [])
    with log.open("a") as err:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, **QUIET},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    runtime = None
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
        line = process.stdout.readline() if ready else ""
        assert line.startswith("READY "), f"the runtime did not start:\n{log.read_text()}"
        runtime = Runtime(f"http://127.0.0.1:{line.split()[1]}", process, log)
        yield runtime
    finally:
        if runtime is not None:
            runtime.stop()
        elif process.poll() is None:
            process.kill()
            process.wait(timeout=10)


@dataclass
class Person:
    """Someone using the CopilotKit app: their token (for the same API the card page
    uses) and their runtime's log."""

    user: str
    token: str
    log: Path


@pytest.fixture
def person(server: str, tmp_path: Path) -> Person:
    user = f"ck-{uuid.uuid4().hex[:8]}"
    return Person(user, session_token(server, user), tmp_path / "runtime.log")


@pytest.fixture
def runtime(server: str, page_dir: Path, person: Person) -> Iterator[Runtime]:
    with copilotkit_runtime(server, person.token, page_dir, person.log) as running:
        yield running


class CopilotKitTab(ChatPage):
    """The CopilotKit app in a tab, on one thread (Interlock's chat), with every request
    the page made anywhere but its own origin recorded (there must be none)."""

    def __init__(self, page: Page, url: str, chat: str) -> None:
        super().__init__(page, url, chat)
        self.elsewhere: list[str] = []
        page.on("request", self._elsewhere)

    def _elsewhere(self, request: Request) -> None:
        if not request.url.startswith((f"{self.url}/", "data:", "blob:")):
            self.elsewhere.append(request.url)

    @classmethod
    def open_app(cls, context: BrowserContext, runtime: Runtime, chat: str) -> CopilotKitTab:
        tab = cls(context.new_page(), runtime.url, chat)
        tab.goto()
        return tab

    def goto(self) -> None:
        self.page.goto(f"{self.url}/?thread={self.chat}")
        expect(self.prompt).to_be_visible()

    @property
    def prompt(self) -> Locator:
        return self.page.get_by_placeholder("Message to the agent")

    def send(self, text: str) -> None:
        """Type and press Enter once the chat is idle. While CopilotChat connects to the
        thread its agent counts as running and Enter sends nothing; a person presses it
        again, and so does this."""
        self.prompt.fill(text)
        for _ in range(10):
            self.wait_idle()
            self.prompt.press("Enter")
            try:
                expect(self.prompt).to_have_value("", timeout=2_000)
                return
            except AssertionError:
                continue
        raise AssertionError(f"the chat did not take the message {text!r}")

    @property
    def card(self) -> Locator:
        return self.page.locator(".interlock-card")

    def button(self, name: str) -> Locator:
        return self.card.get_by_role("button", name=name, exact=True)

    def copilotkit_errors(self) -> list[str]:
        return list(self.page.evaluate("() => window.__copilotkitErrors"))

    def wait_idle(self) -> None:
        """Wait until the chat's agent runs nothing (an answer's run has ended)."""
        self.page.wait_for_timeout(300)
        running = "() => window.__copilotkitAgent?.isRunning ?? false"
        self.wait_for(lambda: not self.page.evaluate(running), "the agent to be idle")

    def wait_for(self, done: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
        """Wait for `done` while the page runs; on timeout, say what CopilotKit reported."""
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}; CopilotKit reported {self.copilotkit_errors()}"
                )
            self.page.wait_for_timeout(100)


@pytest.fixture
def open_app(context: BrowserContext, runtime: Runtime) -> Iterator[Callable[[str], CopilotKitTab]]:
    """Opens the app on a chat; each tab it opened must end with no script error."""
    opened: list[CopilotKitTab] = []

    def open_(chat: str) -> CopilotKitTab:
        tab = CopilotKitTab.open_app(context, runtime, chat)
        opened.append(tab)
        return tab

    yield open_
    for tab in opened:
        assert tab.errors == [], tab.errors
        assert tab.elsewhere == [], tab.elsewhere


def settled(tab: CopilotKitTab, stores: Stores, chat: str) -> RequestRecord:
    """The chat's request once the answer's run has settled it."""
    tab.wait_for(lambda: pointer(stores, chat).state is RequestState.DONE, "the request settled")
    return pointer(stores, chat)


def api(server: str, token: str, method: str, path: str) -> Any:
    """The same person calling Interlock's JSON API, as the card page does."""
    request = urllib.request.Request(
        f"{server}{path}", method=method, headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def test_approving_in_copilotkit_runs_the_tool_and_the_agent_answers(
    open_app: Callable[[str], CopilotKitTab], chat: str, stores: Stores
) -> None:
    # Given the CopilotKit app on a new chat
    tab = open_app(chat)

    # When the person asks for a download
    tab.send(DOWNLOAD)

    # Then CopilotKit's interrupt hook shows Interlock's card: the tool and its arguments
    expect(tab.card).to_be_visible()
    expect(tab.card.get_by_role("heading")).to_have_text("The agent wants to run request_approval")
    expect(tab.card).to_contain_text("Download the reference table the analysis needs.")
    expect(tab.button("Approve")).to_be_enabled()
    expect(tab.button("Deny")).to_be_enabled()
    tab.screenshot("copilotkit-card")
    assert pointer(stores, chat).state is RequestState.PENDING

    # When they approve
    tab.button("Approve").click()

    # Then the tool ran, the agent's answer is on the page and the card is gone
    expect(tab.page.get_by_text("reference table begins", exact=False).last).to_be_visible()
    expect(tab.card).to_have_count(0)
    stored = settled(tab, stores, chat)
    assert (stored.decision, stored.claim_count) == ("approved", 1)
    # The approval went through and the download it allowed ran
    ran = [(t["name"], t["status"]) for t in _tools(stores, chat)]
    assert ran == [("request_approval", "success"), ("fetch_url", "success")]
    assert tab.copilotkit_errors() == []
    tab.screenshot("copilotkit-approved")


def test_denying_in_copilotkit_runs_nothing_and_the_page_says_it_was_denied(
    open_app: Callable[[str], CopilotKitTab], chat: str, stores: Stores
) -> None:
    tab = open_app(chat)
    tab.send(DOWNLOAD)
    expect(tab.card).to_be_visible()

    tab.button("Deny").click()

    # The card is gone and the agent says it went without
    expect(tab.card).to_have_count(0)
    expect(tab.page.get_by_text("could not download the reference table").last).to_be_visible()
    stored = settled(tab, stores, chat)
    assert (stored.decision, stored.claim_count) == ("rejected", 1)
    # The agent's turn records the approval call refused and nothing else called
    assert [(t["name"], t["status"]) for t in _tools(stores, chat)] == [
        ("request_approval", "error")
    ]
    assert tab.copilotkit_errors() == []
    tab.screenshot("copilotkit-denied")


def test_a_question_card_shows_the_question_and_its_choice_is_the_answer(
    open_app: Callable[[str], CopilotKitTab], chat: str, stores: Stores
) -> None:
    tab = open_app(chat)
    tab.send("Please write a summary")

    # The card asks the question, with its options as the buttons
    expect(tab.card.get_by_role("heading")).to_have_text("The agent asks")
    question = tab.card.locator(".question")
    expect(question).not_to_be_empty()
    choice = tab.card.get_by_role("button").first.inner_text()
    assert choice not in ("Approve", "Deny")

    tab.button(choice).click()

    expect(tab.card).to_have_count(0)
    expect(tab.page.get_by_text(choice, exact=False).last).to_be_visible()
    settled(tab, stores, chat)
    assert tab.copilotkit_errors() == []


def _tools(stores: Stores, chat: str) -> list[dict[str, Any]]:
    """The tool calls the chat's saved turns record: name, input, result, status."""
    return [tool for turn in stores.chats.latest_turns(chat, 50) for tool in turn.get("tools", [])]


def test_a_card_read_on_the_card_page_can_still_be_answered_in_copilotkit(
    open_app: Callable[[str], CopilotKitTab],
    chat: str,
    stores: Stores,
    server: str,
    person: Person,
) -> None:
    # Given the card open in CopilotKit
    tab = open_app(chat)
    tab.send(DOWNLOAD)
    expect(tab.card).to_be_visible()

    # When the same person opens the card page on it too (which reads the open request)
    opened = api(server, person.token, "GET", f"/chats/{chat}/request")
    assert opened["state"] == "pending", opened

    # Then the answer given in CopilotKit still counts
    tab.button("Approve").click()
    expect(tab.page.get_by_text("reference table begins", exact=False).last).to_be_visible()
    assert settled(tab, stores, chat).decision == "approved"
    assert tab.copilotkit_errors() == []


# CopilotKit's client keeps an interrupt in `agent.pendingInterrupts` until a RUN_FINISHED
# replaces it (@ag-ui/client 0.0.59, apply/default.ts); a RUN_ERROR would leave it there,
# and every later run without a resume for it would be refused in the page before it is
# sent. So Interlock finishes a refused answer's run where the thread stands.


def test_a_refused_answer_then_a_new_message_goes_on_without_reload(
    open_app: Callable[[str], CopilotKitTab],
    chat: str,
    stores: Stores,
    server: str,
    person: Person,
) -> None:
    # Given a card in CopilotKit that the same person cancels on the card page
    tab = open_app(chat)
    tab.send(DOWNLOAD)
    expect(tab.card).to_be_visible()
    api(server, person.token, "DELETE", f"/chats/{chat}/request")

    # When they answer it in CopilotKit, after it ended
    tab.button("Approve").click()

    # Then the card goes, the chat says why, and nothing ran
    expect(tab.card).to_have_count(0)
    told = tab.page.get_by_text("Your answer came after this request ended", exact=False)
    expect(told).to_contain_text("Nothing was done on this answer.")
    tab.wait_idle()
    assert "fetch_url" not in [t["name"] for t in _tools(stores, chat)]
    assert pointer(stores, chat).decision != "approved"
    assert tab.copilotkit_errors() == []

    # And a new message still goes through, without reloading the page
    before = _turns(stores, chat)
    tab.send("hello")
    tab.wait_for(lambda: _turns(stores, chat) > before, "the new message's turn")
    assert tab.copilotkit_errors() == []
    tab.screenshot("copilotkit-refused")


def test_an_answer_refused_as_stale_is_offered_again_and_the_next_answer_runs(
    open_app: Callable[[str], CopilotKitTab],
    chat: str,
    stores: Stores,
    server: str,
    person: Person,
) -> None:
    # Given a card in CopilotKit, and another AG-UI client of the same person's that
    # resyncs the thread since (its read retires the secret CopilotKit holds)
    tab = open_app(chat)
    tab.send(DOWNLOAD)
    expect(tab.card).to_be_visible()
    resync = {"threadId": chat, "runId": uuid.uuid4().hex, "messages": [], "state": {}}
    resync |= {"tools": [], "context": [], "forwardedProps": {}}
    _stream(server, person.token, "/runs", resync)

    # When they approve in CopilotKit: the answer is not taken
    tab.button("Approve").click()

    # Then the chat says why and the card is offered again, answerable
    told = tab.page.get_by_text("this card was opened elsewhere since", exact=False)
    expect(told).to_contain_text("The request open now is offered again")
    expect(tab.button("Approve")).to_be_enabled()
    assert pointer(stores, chat).state is RequestState.PENDING
    assert "fetch_url" not in [t["name"] for t in _tools(stores, chat)]
    tab.screenshot("copilotkit-offered-again")

    # And approving again runs the download, once
    tab.button("Approve").click()
    expect(tab.page.get_by_text("reference table begins", exact=False).last).to_be_visible()
    stored = settled(tab, stores, chat)
    assert (stored.decision, stored.claim_count) == ("approved", 1)
    assert tab.copilotkit_errors() == []


def _stream(server: str, token: str, path: str, body: dict[str, Any]) -> str:
    """A run posted as an AG-UI client posts one; the whole event stream it answered."""
    request = urllib.request.Request(
        f"{server}{path}",
        method="POST",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        text: str = reply.read().decode()
    assert '"RUN_FINISHED"' in text, text
    return text


def _turns(stores: Stores, chat: str) -> int:
    return len(stores.chats.latest_turns(chat, 50))


def test_an_expiry_then_a_new_message_goes_on(
    open_app: Callable[[str], CopilotKitTab],
    chat: str,
    stores: Stores,
    storage: dict[str, Any],
) -> None:
    # Given a card in CopilotKit whose request expires, on the server and on the page's
    # clock
    tab = open_app(chat)
    tab.send(DOWNLOAD)
    expect(tab.card).to_be_visible()
    expire_everywhere(tab, storage, chat)

    # When the person answers it late: the answer is sent, the card goes, the chat says
    # it came too late, and nothing runs
    tab.button("Approve").click()
    expect(tab.card).to_have_count(0)
    told = tab.page.get_by_text("Your answer came too late", exact=False)
    expect(told).to_contain_text("Nothing was done on this answer.")
    tab.wait_idle()
    assert "fetch_url" not in [t["name"] for t in _tools(stores, chat)]
    assert pointer(stores, chat).decision != "approved"

    # Then a new message still goes through
    before = _turns(stores, chat)
    tab.send("hello")
    tab.wait_for(lambda: _turns(stores, chat) > before, "the new message's turn")
    assert tab.copilotkit_errors() == []
    tab.screenshot("copilotkit-after-expiry")


def expire_everywhere(tab: CopilotKitTab, storage: dict[str, Any], chat: str) -> None:
    """The request's expiry passes: on the server, and on the page's clock (a client
    that compared an interrupt's `expiresAt` with it would send nothing, and hold the
    interrupt for good: Interlock keeps the deadline in the interrupt's metadata)."""
    storage["dynamodb"].update_item(
        TableName=storage["table"],
        Key={"pk": {"S": f"CHAT#{chat}"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(now_ms() // 1000 - 60)}},
    )
    tab.page.clock.install()
    tab.page.clock.fast_forward("25:00:00")


def test_a_reload_after_the_runtime_restarts_shows_the_card_and_it_can_be_answered(
    context: BrowserContext, server: str, page_dir: Path, person: Person, chat: str, stores: Stores
) -> None:
    # Given the card open in CopilotKit, served by a runtime whose runner resyncs from
    # Interlock on connect
    with copilotkit_runtime(server, person.token, page_dir, person.log, resync=True) as first:
        tab = CopilotKitTab.open_app(context, first, chat)
        tab.send(DOWNLOAD)
        expect(tab.card).to_be_visible()
        port = int(first.url.rsplit(":", 1)[1])

    # When the runtime restarts (it kept nothing) and the page is reloaded
    with copilotkit_runtime(
        server, person.token, page_dir, person.log, resync=True, port=port
    ) as second:
        assert second.url == tab.url
        tab.goto()

        # Then the card is back, from Interlock, and approving it runs the tool
        expect(tab.card).to_be_visible()
        expect(tab.page.get_by_text(DOWNLOAD)).to_be_visible()
        tab.button("Approve").click()
        expect(tab.page.get_by_text("reference table begins", exact=False).last).to_be_visible()
        stored = settled(tab, stores, chat)
        assert (stored.decision, stored.claim_count) == ("approved", 1)
        assert tab.copilotkit_errors() == []
        assert (tab.errors, tab.elsewhere) == ([], [])


@pytest.mark.parametrize("ended", ["cancelled on the card page", "expired"])
def test_a_card_answered_after_it_ended_is_cleared_by_a_reload_through_the_resync_runner(
    context: BrowserContext,
    server: str,
    page_dir: Path,
    person: Person,
    chat: str,
    stores: Stores,
    storage: dict[str, Any],
    ended: str,
) -> None:
    # CopilotKit's default runner replays the thread it kept, the interrupt included, so
    # a reload leaves the page as stuck as before; the resync runner asks Interlock.
    with copilotkit_runtime(server, person.token, page_dir, person.log, resync=True) as running:
        # Given a card that ended before it was answered, answered in CopilotKit anyway
        tab = CopilotKitTab.open_app(context, running, chat)
        tab.send(DOWNLOAD)
        expect(tab.card).to_be_visible()
        if ended == "expired":
            expire_everywhere(tab, storage, chat)
        else:
            api(server, person.token, "DELETE", f"/chats/{chat}/request")
        tab.button("Approve").click()
        expect(tab.card).to_have_count(0)
        tab.wait_idle()

        # When the page is reloaded
        tab.goto()

        # Then the card is not offered again, nothing ran, and a new message goes on
        tab.wait_idle()
        expect(tab.card).to_have_count(0)
        assert "fetch_url" not in [t["name"] for t in _tools(stores, chat)]
        before = _turns(stores, chat)
        tab.send("hello")
        tab.wait_for(lambda: _turns(stores, chat) > before, "the new message's turn")
        assert (tab.errors, tab.elsewhere) == ([], [])
