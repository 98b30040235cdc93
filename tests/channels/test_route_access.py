"""Every route of the route table, called by every kind of caller: only those its rule
(`interlock.access`) admits get anything, and a refusal changes no stored record.

The cases are derived from `ROUTES`: a route with no case here fails
`test_every_route_has_a_case`, so a route cannot be added without its rule being held.
Alice owns chat c1 and its open approval card; bob is another user, root an
administrator; each platform account is linked by an administrator.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import pytest

from interlock.api.routes import ROUTES
from interlock.channels import button_data
from interlock.records import RequestState
from tests.api.support import EVENTS, auth, resume_body, run_body
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import link, pause, settled, tap_slack, tap_telegram
from tests.e2e.support import wait_for

CHAT: Final = "c1"
PROMPT: Final = "send the report"
TG_ALICE, TG_BOB = 1001, 1002
CALLERS: Final = {
    "owner": ("alice", ("reporter",)),
    "other": ("bob", ("reporter",)),
    "admin": ("root", ("admin",)),
}


@dataclass
class World:
    """The state every case starts from."""

    setup: Setup
    request: Any
    secret: str

    def headers(self, caller: str) -> dict[str, str]:
        if caller == "none":
            return {}
        user, groups = CALLERS[caller]
        return auth(self.setup.key, user, groups)


Call = Callable[[World, str], Any]


def _get(path: str) -> Call:
    return lambda w, caller: w.setup.client.get(path, headers=w.headers(caller))


def _delete(path: str) -> Call:
    return lambda w, caller: w.setup.client.delete(path, headers=w.headers(caller))


def _put(path: str, body: dict[str, Any]) -> Call:
    return lambda w, caller: w.setup.client.put(
        path, data=json.dumps(body), headers=w.headers(caller)
    )


def _stream_post(path: str, body: Callable[[World], str]) -> Call:
    def call(w: World, caller: str) -> Any:
        headers = {**w.headers(caller), "Accept": "text/event-stream"}
        return w.setup.client.post(path, data=body(w), headers=headers)

    return call


def _answer(w: World) -> str:
    request = w.request
    interrupt = type("I", (), {"id": request.interrupt_id, "metadata": {"secret": w.secret}})
    return resume_body(CHAT, interrupt, {"decision": "approve"})


def _resync(w: World) -> str:
    return json.dumps({"threadId": CHAT, "runId": "r9", "messages": [], "state": {}})


# Each delivery its own id: a platform's id is what a replay is recognised by.
DELIVERY: Final = {"none": 1, "other": 2, "admin": 3, "owner": 4}


def _telegram(user: int) -> Call:
    def call(w: World, caller: str) -> Any:
        data = button_data(CHAT, w.request.interrupt_id, "a")
        secret = fakes.TELEGRAM_WEBHOOK_SECRET if caller != "none" else "not-the-secret"
        update = fakes.telegram_tap(DELIVERY[caller], user, data)
        return tap_telegram(w.setup, update, secret=secret)

    return call


def _slack(user: str) -> Call:
    def call(w: World, caller: str) -> Any:
        value = button_data(CHAT, w.request.interrupt_id, "a")
        payload = fakes.slack_tap(user, value, w.setup.slack.url, str(DELIVERY[caller]))
        if caller == "none":
            return tap_slack(w.setup, payload, secret="not-the-signing-secret")
        return tap_slack(w.setup, payload)

    return call


@dataclass(frozen=True)
class Case:
    """How one route is called: by a caller kind, and (for the webhooks) as whose
    linked account."""

    call: Call
    linked: Call | None = None  # the webhooks: the owner's account taps; `call` is bob's


CASES: Final[dict[tuple[str, str], list[Case]]] = {
    ("POST", "/runs"): [
        Case(_stream_post("/runs", lambda w: run_body(CHAT, PROMPT))),
        Case(_stream_post("/runs", _resync)),
        Case(_stream_post("/runs", _answer)),
    ],
    ("POST", "/resume"): [Case(_stream_post("/resume", _answer))],
    ("GET", "/chats/{chat_id}/request"): [Case(_get(f"/chats/{CHAT}/request"))],
    ("DELETE", "/chats/{chat_id}/request"): [Case(_delete(f"/chats/{CHAT}/request"))],
    ("GET", "/chats/{chat_id}/turns"): [Case(_get(f"/chats/{CHAT}/turns"))],
    ("GET", "/chats/{chat_id}/approvals"): [Case(_get(f"/chats/{CHAT}/approvals"))],
    ("DELETE", "/chats/{chat_id}/approvals/{kind}/{name}"): [
        Case(_delete(f"/chats/{CHAT}/approvals/site/data.example.org"))
    ],
    ("GET", "/chats/{chat_id}/events"): [Case(_get(f"/chats/{CHAT}/events"))],
    ("GET", "/inbox"): [Case(_get("/inbox"))],
    ("PUT", "/admin/approvals/{kind}/{name}"): [
        Case(_put("/admin/approvals/site/docs.example.org", {}))
    ],
    ("DELETE", "/admin/approvals/{kind}/{name}"): [
        Case(_delete("/admin/approvals/site/docs.example.org"))
    ],
    ("PUT", "/admin/links/{channel}/{external_id}"): [
        Case(_put("/admin/links/slack/U-MALLORY", {"userId": "alice", "roles": ["reporter"]}))
    ],
    ("DELETE", "/admin/links/{channel}/{external_id}"): [
        Case(_delete("/admin/links/slack/U-ALICE"))
    ],
    ("POST", "/channels/slack/interactions"): [Case(_slack("U-BOB"), linked=_slack("U-ALICE"))],
    ("POST", "/channels/telegram/webhook"): [Case(_telegram(TG_BOB), linked=_telegram(TG_ALICE))],
}


def test_every_route_has_a_case() -> None:
    routes = {(r.method, r.path) for r in ROUTES}
    assert routes == set(CASES), f"routes without a case: {sorted(routes - set(CASES))}"


def _world(setup: Setup) -> World:
    link(setup, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(setup, "telegram", str(TG_BOB), "bob", ["reporter"])
    link(setup, "slack", "U-ALICE", "alice", ["reporter"])
    link(setup, "slack", "U-BOB", "bob", ["reporter"])
    pause(setup, CHAT)
    read = setup.client.get(f"/chats/{CHAT}/request", headers=auth(setup.key))
    assert read.status_code == 200
    return World(setup, setup.stores.requests.get(CHAT, 0), read.json["secret"])


def _stored(setup: Setup) -> str:
    """Every item and object, as text: what a refusal must leave as it was."""
    aws = setup.aws
    items = aws["dynamodb"].scan(TableName=aws["table"], ConsistentRead=True)["Items"]
    objects = aws["s3"].list_objects_v2(Bucket=aws["bucket"]).get("Contents", [])
    keyed = sorted(json.dumps(i, sort_keys=True, default=str) for i in items)
    return json.dumps(keyed) + json.dumps(sorted(o["Key"] for o in objects))


def _refusal(response: Any) -> str | None:
    """How a response refused: `unauthorized`, `forbidden`, or None (it did not)."""
    if response.status_code == 401:
        return "unauthorized"
    if response.status_code == 403:
        return "forbidden"
    if response.headers.get("Content-Type", "").startswith("text/event-stream"):
        lines = response.get_data(as_text=True).splitlines()
        events = [EVENTS.validate_json(line[6:]) for line in lines if line.startswith("data: ")]
        errors = [e for e in events if e.type == "RUN_ERROR"]
        if errors and errors[-1].code in ("unauthorized", "forbidden"):
            return str(errors[-1].code)
    return None


def _expected(rule: str, caller: str) -> str | None:
    if caller == "none":
        return "unauthorized"
    if rule == "own":
        return None  # anyone signed in has an inbox of their own
    if rule == "admin":
        return None if caller == "admin" else "forbidden"
    return None if caller == "owner" else "forbidden"


AUTHORIZED: Final = [
    pytest.param(route, i, id=f"{route.method} {route.path} #{i}")
    for route in ROUTES
    if route.authorized
    for i in range(len(CASES.get((route.method, route.path), [])))
]


@pytest.mark.parametrize(("route", "index"), AUTHORIZED)
def test_a_route_admits_only_the_callers_its_rule_names(
    channels: Setup, route: Any, index: int
) -> None:
    world = _world(channels)
    case = CASES[(route.method, route.path)][index]
    # The owner last: an answer or a cancel of theirs changes what the others would meet
    for caller in ("none", "other", "admin", "owner"):
        before = _stored(channels)
        response = case.call(world, caller)
        expected = _expected(route.rule, caller)
        assert _refusal(response) == expected, (caller, response.get_data(as_text=True)[:400])
        body = response.get_data(as_text=True)
        if expected is not None:
            assert _stored(channels) == before, f"{caller}'s refused call changed a record"
            # Not one byte of the chat: no prompt, no answer, no card, no secret
            for private in (PROMPT, world.secret, world.request.interrupt_id, "Recipient"):
                assert private not in body, (caller, private)
        if route.rule == "own" and caller in ("other", "admin"):
            assert json.loads(body)["requests"] == [], "another user's inbox shows alice's card"


SIGNED: Final = [
    pytest.param(route, id=f"{route.method} {route.path}")
    for route in ROUTES
    if not route.authorized
]


@pytest.mark.parametrize("route", SIGNED)
def test_a_webhook_answers_only_for_the_linked_account_the_card_is_for(
    channels: Setup, route: Any
) -> None:
    world = _world(channels)
    (case,) = CASES[(route.method, route.path)]
    assert case.linked is not None

    # An unsigned delivery (no or a wrong signature or secret) is refused outright
    before = _stored(channels)
    unsigned = case.call(world, "none")
    assert unsigned.status_code == 401
    assert _stored(channels) == before
    # bob's linked account is refused, told nothing of the card, and nothing changes
    refused = case.call(world, "other")
    assert refused.status_code == 200  # acknowledged, so the platform does not resend
    platform = channels.slack if "slack" in route.path else channels.telegram
    told = ("answerCallbackQuery", "response_url", "chat.postEphemeral")
    wait_for(lambda: _told(platform, told) != [], "bob to be told")
    assert "not yours" in json.dumps(_told(platform, told)[-1])
    assert channels.stores.requests.get(CHAT, 0).state is RequestState.PENDING
    assert _decisions(channels) == []
    # alice's own account answers it
    assert case.linked(world, "owner").status_code == 200
    wait_for(lambda: settled(channels, CHAT), "alice's tap to be applied")


def test_another_users_resync_of_a_chat_with_no_open_request_gets_nothing(
    channels: Setup,
) -> None:
    # Given alice's chat, whose card she cancelled: no request is open in it
    world = _world(channels)
    assert (
        channels.client.delete(f"/chats/{CHAT}/request", headers=auth(channels.key)).status_code
        == 200
    )
    before = _stored(channels)

    # When bob resyncs it (AG-UI's run with no new message), as a client would
    response = _stream_post("/runs", _resync)(world, "other")

    # Then he is refused, and reads not one byte of it
    assert _refusal(response) == "forbidden"
    body = response.get_data(as_text=True)
    assert PROMPT not in body and "MESSAGES_SNAPSHOT" not in body
    assert _stored(channels) == before
    # While alice's own resync still shows her the chat
    own = _stream_post("/runs", _resync)(world, "owner").get_data(as_text=True)
    assert PROMPT in own and "MESSAGES_SNAPSHOT" in own


def _told(platform: fakes.Platform, methods: tuple[str, ...]) -> list[Any]:
    return [body for method in methods for body in platform.recorded.of(method)]


def _decisions(setup: Setup) -> list[Any]:
    events = setup.client.get(f"/chats/{CHAT}/events", headers=auth(setup.key)).json["events"]
    return [e for e in events if e["type"] == "decision"]
