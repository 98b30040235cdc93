"""The Lambda handlers in-process, fed API Gateway proxy events by the local API."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import pytest
from werkzeug.test import Client

from interlock import errors
from interlock.api.errors import STATUS, error_body
from interlock.api.http import bind, caller_from
from interlock.api.routes import ROUTES
from local import devtokens
from tests.api.support import auth, resume_body, run_body, stream


def test_every_route_reaches_its_handler(api: tuple[Client, bytes]) -> None:
    client, key = api
    for route in ROUTES:
        path = route.path.format(
            chat_id="c1", kind="site", name="example.org", channel="slack", external_id="U1"
        )
        response = client.open(path, method=route.method, headers=auth(key), data="{}")
        # Whatever the handler answers (here mostly 4xx for an empty chat or body), it is
        # the handler's own answer, not a missing route.
        assert response.status_code not in (404, 405) or response.json["error"]["code"] not in (
            "not_found",
            "method_not_allowed",
        ), (route, response.get_data(as_text=True))


def test_a_handler_must_bind_exactly_its_routes() -> None:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

    with pytest.raises(ValueError, match="requests"):
        bind(APIGatewayRestResolver(), "requests", {("GET", "/chats/{chat_id}/request"): print})


def test_an_ag_ui_client_drives_a_pause_and_a_resume(api: tuple[Client, bytes]) -> None:
    client, key = api

    paused = stream(
        client.post("/runs", data=run_body("c1", "download the table"), headers=auth(key))
    )

    assert paused[0].type == "RUN_STARTED"
    finished = paused[-1]
    assert finished.type == "RUN_FINISHED" and finished.outcome.type == "interrupt"
    interrupt = finished.outcome.interrupts[0]
    assert interrupt.response_schema["required"] == ["decision"]
    assert interrupt.tool_call_id in {e.tool_call_id for e in paused if e.type == "TOOL_CALL_START"}

    resumed = stream(
        client.post(
            "/resume", data=resume_body("c1", interrupt, {"decision": "approve"}), headers=auth(key)
        )
    )

    assert resumed[-1].outcome.type == "success"
    text = "".join(e.delta for e in resumed if e.type == "TEXT_MESSAGE_CONTENT")
    assert "reference table begins" in text


def test_reading_the_request_retires_the_pages_older_secret_not_the_streams(
    api: tuple[Client, bytes],
) -> None:
    client, key = api
    interrupt = stream(
        client.post("/runs", data=run_body("c1", "download the table"), headers=auth(key))
    )[-1].outcome.interrupts[0]

    first = client.get("/chats/c1/request", headers=auth(key)).json
    second = client.get("/chats/c1/request", headers=auth(key)).json

    assert second["state"] == "pending"
    assert len({first["secret"], second["secret"], interrupt.metadata["secret"]}) == 3
    # The page's own older copy (another tab) is refused ...
    refused = client.post(
        "/resume",
        headers=auth(key),
        data=resume_body("c1", interrupt, {"decision": "approve"}, secret=first["secret"]),
    )
    assert (refused.status_code, refused.json["error"]["code"]) == (403, "refused")
    # ... while the AG-UI stream's copy still answers.
    accepted = client.post(
        "/resume", data=resume_body("c1", interrupt, {"decision": "approve"}), headers=auth(key)
    )
    assert stream(accepted)[-1].outcome.type == "success"


def test_cancelling_the_open_request(api: tuple[Client, bytes]) -> None:
    client, key = api
    interrupt = stream(
        client.post("/runs", data=run_body("c1", "download the table"), headers=auth(key))
    )[-1].outcome.interrupts[0]

    cancelled = client.delete("/chats/c1/request", headers=auth(key))

    assert cancelled.status_code == 200 and cancelled.json["state"] == "cancelled"
    late = client.post(
        "/resume", data=resume_body("c1", interrupt, {"decision": "approve"}), headers=auth(key)
    )
    assert (late.status_code, late.json["error"]["code"]) == (410, "cancelled")
    assert client.post("/runs", data=run_body("c1", "hello"), headers=auth(key)).status_code == 200


def test_json_routes_and_their_errors(api: tuple[Client, bytes]) -> None:
    client, key = api
    assert client.get("/chats/c1/request", headers=auth(key)).status_code == 404
    assert client.get("/chats/c1/approvals", headers=auth(key)).json == {
        "approvals": [],
        "preapproved": [],
    }
    revoke = client.delete("/chats/c1/approvals/site/example.org", headers=auth(key))
    assert (revoke.status_code, revoke.json["error"]["code"]) == (404, "unknown")
    bad_kind = client.delete("/chats/c1/approvals/host/example.org", headers=auth(key))
    assert (bad_kind.status_code, bad_kind.json["error"]["code"]) == (422, "invalid_payload")
    assert client.get("/chats/c1/request").status_code == 401
    forged = {"Authorization": "Bearer " + devtokens.issue(b"another key", "alice")}
    assert client.get("/chats/c1/request", headers=forged).status_code == 401

    client.post("/runs", data=run_body("c1", "hello"), headers=auth(key))
    client.post("/runs", data=run_body("c1", "hello again"), headers=auth(key))
    every = client.get("/chats/c1/events", headers=auth(key)).json["events"]
    assert [(e["type"], e["detail"]["turn"]) for e in every] == [
        ("turn_completed", 1),
        ("turn_completed", 3),
    ]
    first, last = every[0]["seq"], every[-1]["seq"]
    events = client.get(f"/chats/c1/events?after={first}", headers=auth(key)).json["events"]
    assert [e["seq"] for e in events] == [last]
    turns = client.get("/chats/c1/turns", headers=auth(key)).json["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    other = client.get("/chats/c1/turns", headers=auth(key, "mallory"))
    assert (other.status_code, other.json["error"]["code"]) == (403, "forbidden")


def test_identity_comes_only_from_the_authorizer_claims() -> None:
    event = {
        "requestContext": {
            "requestId": "r",
            "authorizer": {"claims": {"sub": "u1", "cognito:groups": "[admin reporter]"}},
        },
        "body": json.dumps({"user": "root", "roles": ["admin"]}),
    }
    caller = caller_from(event)
    assert (caller.user_id, caller.roles, caller.trace_id) == (
        "u1",
        frozenset({"admin", "reporter"}),
        "r",
    )

    with pytest.raises(Exception, match="no authenticated user"):
        caller_from({"requestContext": {}, "body": json.dumps({"sub": "root"})})


def groups_of(raw: Any) -> frozenset[str]:
    claims = {"sub": "u", "cognito:groups": raw}
    return caller_from({"requestContext": {"authorizer": {"claims": claims}}}).roles


@pytest.mark.parametrize(
    ("raw", "roles"),
    [
        (["admin", "reporter"], {"admin", "reporter"}),  # a list (direct or local invocation)
        ("reporter", {"reporter"}),  # one group, as REST passes it: bare
        ("[admin reporter]", {"admin", "reporter"}),  # two or more: bracketed, spaced
        ("[a.b c_d e-f g@h i:j]", {"a.b", "c_d", "e-f", "g@h", "i:j"}),
        ("admin,reporter", {"admin", "reporter"}),  # two and more from REST: commas
        ("[admin]", {"admin"}),  # one, from an HTTP API's JWT authorizer
        (None, set()),
        ("", set()),
        ([], set()),
    ],
)
def test_groups_are_read_in_the_forms_api_gateway_passes(raw: Any, roles: set[str]) -> None:
    assert groups_of(raw) == roles


@pytest.mark.parametrize(
    "raw",
    [
        "admin ",
        "[admin  reporter]",  # an empty name between two spaces
        "[admin, reporter]",
        ["x,admin"],
        ["admin", "[admin]"],
        [1],
        {"admin": True},
    ],
)
def test_a_group_name_that_could_read_two_ways_is_refused_outright(raw: Any) -> None:
    with pytest.raises(errors.Forbidden, match="cannot be read unambiguously"):
        groups_of(raw)


def test_every_error_code_has_a_status_and_unexpected_errors_stay_opaque() -> None:
    codes = {cls.code for cls in _subclasses(errors.InterlockError)}
    assert codes <= set(STATUS)
    status, body = error_body(RuntimeError("secret detail"))
    assert status == 500 and "secret detail" not in json.dumps(body)


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_no_response_is_cached_and_the_secret_is_never_stored_by_a_cache(
    api: tuple[Client, bytes],
) -> None:
    client, key = api
    stream(client.post("/runs", data=run_body("c1", "download the table"), headers=auth(key)))

    view = client.get("/chats/c1/request", headers=auth(key))
    refused = client.get("/chats/c1/events?after=x", headers=auth(key))

    assert view.json["secret"] and view.headers["Cache-Control"] == "no-store"
    assert refused.status_code == 422 and refused.headers["Cache-Control"] == "no-store"


def test_the_local_server_serves_the_generated_openapi_document(api: tuple[Client, bytes]) -> None:
    from interlock.api.openapi import document

    client, _ = api
    served = client.get("/openapi.json")

    assert served.status_code == 200 and served.json == document()
    assert served.json["openapi"].startswith("3.1")
    assert {(m.upper(), p) for p, ops in served.json["paths"].items() for m in ops} == {
        (r.method, r.path) for r in ROUTES
    }


def test_reads_sent_at_once_are_each_answered_by_their_own_route(
    api: tuple[Client, bytes],
) -> None:
    # The card page reads its inbox, the trail and the turns at once; the local server
    # answers each on a thread of its own, switching between them as often as it can
    client, key = api
    client.post("/runs", data=run_body("c1", "hello"), headers=auth(key))
    wanted = {"/inbox": "requests", "/chats/c1/events": "events", "/chats/c1/turns": "turns"}
    wrong: list[str] = []

    def read(path: str) -> None:
        for _ in range(30):
            body = client.get(path, headers=auth(key)).json
            if wanted[path] not in body:
                wrong.append(f"{path} answered with {sorted(body)}")

    readers = [threading.Thread(target=read, args=(p,)) for p in wanted for _ in range(4)]
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout=120)
    finally:
        sys.setswitchinterval(switching)
    assert wrong == []


SESSION = "/local/session"


@pytest.mark.parametrize(
    "host",
    [
        pytest.param("localhost", id="localhost"),
        pytest.param("localhost:8765", id="localhost-port"),
        pytest.param("LocalHost:8765", id="localhost-any-case"),
        pytest.param("127.0.0.1:8765", id="ipv4-loopback"),
        pytest.param("127.1.2.3", id="ipv4-loopback-block"),
        pytest.param("[::1]:8765", id="ipv6-loopback"),
        pytest.param("[::1]", id="ipv6-loopback-no-port"),
    ],
)
def test_the_local_session_is_handed_out_on_a_loopback_host(
    api: tuple[Client, bytes], host: str
) -> None:
    client, key = api
    served = client.get(SESSION, headers={"Host": host})

    assert served.status_code == 200, served.get_data(as_text=True)
    assert devtokens.claims(key, served.json["token"])["sub"] == "alice"
    assert served.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    "host",
    [
        pytest.param("evil.example", id="other-name"),
        pytest.param("evil.example:8765", id="other-name-port"),
        pytest.param("localhost.evil.example:8765", id="loopback-prefix"),
        pytest.param("127.0.0.1.nip.io:8765", id="name-resolving-to-loopback"),
        pytest.param("localhost.:8765", id="trailing-dot"),
        pytest.param("192.168.1.10:8765", id="lan-address"),
        pytest.param("0.0.0.0:8765", id="unspecified"),
        pytest.param("[::]:8765", id="ipv6-unspecified"),
        pytest.param("[::ffff:127.0.0.1]:8765", id="ipv4-mapped"),
        pytest.param("::1", id="ipv6-without-brackets"),
        pytest.param("[::1", id="unclosed-bracket"),
        pytest.param("[::1]x", id="junk-after-bracket"),
        pytest.param("localhost:", id="empty-port"),
        pytest.param("localhost:99999", id="port-out-of-range"),
        pytest.param("localhost:80:80", id="two-ports"),
        pytest.param("user@localhost", id="userinfo"),
        pytest.param("2130706433", id="ipv4-as-number"),
        pytest.param("127.1", id="ipv4-short-form"),
    ],
)
def test_the_local_session_is_refused_on_any_other_host(
    api: tuple[Client, bytes], host: str
) -> None:
    client, _ = api
    refused = client.get(SESSION, headers={"Host": host})

    assert refused.status_code == 403
    assert refused.json["error"]["code"] == "forbidden"
    assert "only handed out on the loopback address" in refused.json["error"]["message"]
    assert "token" not in refused.json


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        pytest.param("http://localhost:8765", 200, id="localhost"),
        pytest.param("http://127.0.0.1:8765", 200, id="ipv4-loopback"),
        pytest.param("http://[::1]:8765", 200, id="ipv6-loopback"),
        pytest.param("https://localhost", 200, id="https-no-port"),
        pytest.param("http://evil.example", 403, id="other-site"),
        pytest.param("http://evil.example:8765", 403, id="other-site-same-port"),
        pytest.param("null", 403, id="opaque"),
        pytest.param("file://", 403, id="file"),
        pytest.param("ftp://localhost", 403, id="other-scheme"),
        pytest.param("http://localhost:8765/page", 403, id="with-path"),
        pytest.param("http://user@localhost:8765", 403, id="userinfo"),
        pytest.param("localhost:8765", 403, id="no-scheme"),
    ],
)
def test_the_local_session_checks_the_origin_a_browser_sends(
    api: tuple[Client, bytes], origin: str, status: int
) -> None:
    client, _ = api
    # The Host names loopback (a rebinding page's would not), and the Origin too, or not
    served = client.get(SESSION, headers={"Host": "127.0.0.1:8765", "Origin": origin})

    assert served.status_code == status, served.get_data(as_text=True)
    if status == 403:
        assert "only handed out on the loopback address" in served.json["error"]["message"]


def test_a_rebinding_page_cannot_take_a_session(api: tuple[Client, bytes]) -> None:
    """The request a page on a rebound name makes: its own name in Host and Origin, over
    a connection that does reach 127.0.0.1."""
    client, _ = api
    page = "rebind.evil.example:8765"
    refused = client.get(
        SESSION,
        headers=[("Host", page), ("Origin", f"http://{page}")],
        environ_base={"REMOTE_ADDR": "127.0.0.1", "SERVER_NAME": "127.0.0.1"},
    )

    assert refused.status_code == 403
    assert "loopback" in refused.json["error"]["message"]
    assert "token" not in refused.get_data(as_text=True)


def test_a_session_is_never_handed_to_another_machine(api: tuple[Client, bytes]) -> None:
    """A server bound to every address (`--host 0.0.0.0`) is reached from elsewhere: a
    peer that writes `Host: localhost` is still not on this machine."""
    client, _ = api
    refused = client.get(
        SESSION, headers={"Host": "localhost:8765"}, environ_base={"REMOTE_ADDR": "203.0.113.9"}
    )

    assert refused.status_code == 403
    assert "token" not in refused.get_data(as_text=True)
