"""Deployed-mode sign-in, in headless chromium: the hosted UI's code flow with PKCE.

The page is served with a `config.json` as the deployment writes it, pointing at two
stand-ins on 127.0.0.1: a fake *authorization server* playing Cognito's hosted UI (it
redirects back with a code, and exchanges the code for tokens only for the verifier
whose S256 challenge came with it) and a fake API recording the `Authorization` header.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright.sync_api import BrowserContext, Page, expect

pytestmark = pytest.mark.server

WEB_DIR: Final = Path(__file__).resolve().parents[2] / "web"
CLIENT_ID: Final = "card-page-client"
EMAIL: Final = "alice@example.com"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _id_token() -> str:
    """A JWT-shaped ID token: the page reads its claims, only the API checks signatures."""
    claims = {"sub": "alice-sub", "email": EMAIL, "exp": int(time.time()) + 3600}
    parts = [{"alg": "none"}, claims]
    return ".".join([*(_b64url(json.dumps(p).encode()) for p in parts), "signature"])


@dataclass
class FakeAuthorizationServer:
    """A stand-in for the hosted UI's authorize and token endpoints.

    Attributes:
        authorize_requests: The query of each authorize request.
        token_requests: The form of each token request.
        issued: code -> the authorize request it answers (challenge, client, redirect).
        id_token: What a valid exchange returns.
        tamper_state: Answer with a state the page never sent.
    """

    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    issued: dict[str, dict[str, str]] = field(default_factory=dict)
    id_token: str = field(default_factory=_id_token)
    tamper_state: bool = False

    def authorize(self, query: dict[str, str]) -> str:
        """Sign the visitor in at once; the URL to send them back to, with a code."""
        self.authorize_requests.append(query)
        code = secrets.token_urlsafe(16)
        self.issued[code] = query
        state = "forged-state" if self.tamper_state else query["state"]
        return f"{query['redirect_uri']}?{urlencode({'code': code, 'state': state})}"

    def token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """Exchange a code once, for the client, callback and verifier it was issued to."""
        self.token_requests.append(form)
        asked = self.issued.pop(form.get("code", ""), None)
        verifier = form.get("code_verifier", "")
        if (
            asked is None
            or form.get("grant_type") != "authorization_code"
            or form.get("client_id") != asked["client_id"]
            or form.get("redirect_uri") != asked["redirect_uri"]
            or asked.get("code_challenge_method") != "S256"
            or _b64url(hashlib.sha256(verifier.encode()).digest()) != asked["code_challenge"]
        ):
            return 400, {"error": "invalid_grant"}
        return 200, {
            "id_token": self.id_token,
            "access_token": "access-token",
            "token_type": "Bearer",
            "expires_in": 3600,
        }


class _AuthorizationHandler(BaseHTTPRequestHandler):
    fake: FakeAuthorizationServer

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path != "/oauth2/authorize":
            self._reply(404, {"error": "not_found"})
            return
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.send_response(302)
        self.send_header("Location", self.fake.authorize(query))
        self.end_headers()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        if urlsplit(self.path).path != "/oauth2/token":
            self._reply(404, {"error": "not_found"})
            return
        self._reply(*self.fake.token({k: v[0] for k, v in parse_qs(body).items()}))

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        # Cognito's token endpoint answers browsers cross-origin, and so does this one
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _PageHandler(SimpleHTTPRequestHandler):
    """`web/`, a deployment's `config.json`, and a fake API under `/v1/` (same origin)."""

    config: dict[str, str]
    api_calls: list[tuple[str, str | None]]
    id_token: str

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/config.json":
            self._json(200, self.config)
        elif path.startswith("/v1/"):
            self._api(path)
        else:
            super().do_GET()

    def _api(self, path: str) -> None:
        authorization = self.headers.get("Authorization")
        self.api_calls.append((path, authorization))
        if authorization != self.id_token:
            self._json(401, {"error": {"code": "unauthorized", "message": "Unauthorized"}})
        elif path.endswith("/turns"):
            self._json(200, {"turns": []})
        elif path.endswith("/approvals"):
            self._json(200, {"approvals": [], "preapproved": []})
        elif path.endswith("/events"):
            self._json(200, {"events": []})
        elif path.endswith("/inbox"):
            self._json(200, {"requests": []})
        else:
            self._json(404, {"error": {"code": "unknown", "message": "No open request."}})

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(handler: Any) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def fake_auth() -> FakeAuthorizationServer:
    return FakeAuthorizationServer()


@pytest.fixture
def auth_url(fake_auth: FakeAuthorizationServer) -> Iterator[str]:
    handler = type("Handler", (_AuthorizationHandler,), {"fake": fake_auth})
    yield from _serve(handler)


@pytest.fixture
def api_calls() -> list[tuple[str, str | None]]:
    return []


@pytest.fixture
def site(
    auth_url: str, fake_auth: FakeAuthorizationServer, api_calls: list[tuple[str, str | None]]
) -> Iterator[str]:
    """The page's URL, served as deployed: with a config.json naming the hosted UI."""
    config = {
        "region": "us-east-1",
        "userPoolId": "us-east-1_example",
        "clientId": CLIENT_ID,
        "authUrl": auth_url,
    }
    attributes = {"config": config, "api_calls": api_calls, "id_token": fake_auth.id_token}
    handler = partial(type("Handler", (_PageHandler,), attributes), directory=str(WEB_DIR))
    for url in _serve(handler):
        config["apiUrl"] = f"{url}/v1/"  # the fake API, beside the page
        yield f"{url}/"


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    assert errors == []


def test_sign_in_redirects_with_pkce_exchanges_the_code_and_calls_the_api_with_the_id_token(
    page: Page,
    site: str,
    auth_url: str,
    fake_auth: FakeAuthorizationServer,
    api_calls: list[tuple[str, str | None]],
) -> None:
    # Given a visitor who is not signed in, opening a chat
    page.goto(f"{site}?chat=chat-signin")

    # When the page has sent them to the hosted UI and back
    expect(page.locator("body")).to_have_attribute("data-ready", "true")

    # Then it asked for a code with an S256 challenge, its state, client and callback
    (asked,) = fake_auth.authorize_requests
    assert asked["response_type"] == "code"
    assert asked["code_challenge_method"] == "S256"
    assert len(asked["code_challenge"]) == 43  # base64url of a SHA-256 digest
    assert len(asked["state"]) >= 16
    assert asked["client_id"] == CLIENT_ID
    assert asked["redirect_uri"] == site
    assert asked["scope"].split() == ["openid", "email", "profile"]

    # And exchanged the code once, with the verifier matching that challenge
    (exchange,) = fake_auth.token_requests
    assert exchange["grant_type"] == "authorization_code"
    assert exchange["code_verifier"] and not fake_auth.issued  # the one code was redeemed

    # And it is back on the chat it was opened on, calling the API with the ID token
    assert page.url == f"{site}?chat=chat-signin"
    assert api_calls
    assert {authorization for _, authorization in api_calls} == {fake_auth.id_token}
    expect(page.locator("#user")).to_have_text(f"Signed in as {EMAIL}")
    sign_out = page.get_by_role("link", name="Sign out")
    expect(sign_out).to_have_attribute(
        "href",
        f"{auth_url}/logout?{urlencode({'client_id': CLIENT_ID, 'logout_uri': site})}",
    )


def test_a_reply_with_a_state_the_tab_never_sent_is_refused(
    page: Page,
    site: str,
    fake_auth: FakeAuthorizationServer,
    api_calls: list[tuple[str, str | None]],
) -> None:
    # Given a hosted UI reply carrying a state that is not the one the page sent
    fake_auth.tamper_state = True

    # When the page is opened and sent to sign in
    page.goto(f"{site}?chat=chat-forged")

    # Then it refuses the reply: the code is never exchanged and the API never called
    expect(page.locator("#status")).to_contain_text("Sign-in refused")
    assert len(fake_auth.authorize_requests) == 1
    assert fake_auth.token_requests == []
    assert api_calls == []
    expect(page.locator("body")).not_to_have_attribute("data-ready", "true")
