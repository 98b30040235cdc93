"""Faithful local fakes of Slack's Web API and Telegram's Bot API on 127.0.0.1.

Each answers as the platform does (the same JSON envelopes, token checks, message ids)
and records every call, so tests drive Interlock's real client code against them and
then read what was posted, edited and said. Bounded: one server thread each, stopped by
the fixture.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

from tests.secret_watch import WATCH

SLACK_TOKEN = "xoxb-test-bot-token-5fd1"
SLACK_SIGNING_SECRET = "slack-signing-secret-8c2e"
TELEGRAM_TOKEN = "123456:telegram-bot-token-9a7b"
TELEGRAM_WEBHOOK_SECRET = "telegram-webhook-secret-3d4f"
# The suite's log watch fails the session if any of them reaches a log record.
for _secret in (SLACK_TOKEN, SLACK_SIGNING_SECRET, TELEGRAM_TOKEN, TELEGRAM_WEBHOOK_SECRET):
    WATCH.issue(_secret)


@dataclass
class Recorded:
    """The calls one fake received, in order: `(method, body)`."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, method: str, body: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append((method, body))

    def of(self, method: str) -> list[dict[str, Any]]:
        with self.lock:
            return [b for m, b in self.calls if m == method]


class _Fake(BaseHTTPRequestHandler):
    recorded: Recorded
    ids: Iterator[int]
    # The platform's clock (epoch seconds): its message timestamps, and what `oldest`
    # is measured against. The test's clock, when it runs on one.
    clock: Callable[[], float]
    # What the platform keeps: Slack's messages by conversation, oldest first.
    history: dict[str, list[dict[str, Any]]]
    lock: threading.Lock

    def _json(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length", "0"))
        return json.loads(self.rfile.read(length) or b"{}")

    def log_message(self, *args: Any) -> None:
        return


class FakeSlack(_Fake):
    """Slack's Web API as Interlock calls it: messages are kept per conversation with
    their metadata (a post to a user lands in the app's direct message with them, `D…`),
    `chat.update` edits them, and `conversations.history` pages through them newest
    first, within `oldest`/`latest` (exclusive unless `inclusive`), `limit` at a time
    (at most 999), with `has_more` and an opaque `next_cursor`; metadata only with
    `include_all_metadata`."""

    def do_POST(self) -> None:
        body = self._body()
        if self.path.startswith("/respond/"):  # a response_url: it needs no token
            self.recorded.add(
                "response_url", {**body, "token_sent": "Authorization" in self.headers}
            )
            return self._json(200, {"ok": True})
        if self.headers.get("Authorization") != f"Bearer {SLACK_TOKEN}":
            return self._json(200, {"ok": False, "error": "invalid_auth"})
        method = self.path.lstrip("/")
        self.recorded.add(method, body)
        if method == "chat.postMessage":
            return self._json(200, self._post_message(body))
        if method == "chat.update":
            return self._json(200, self._update(body))
        if method == "conversations.open":
            users = str(body.get("users", ""))
            if not users.startswith(("U", "W")) or "," in users:
                return self._json(200, {"ok": False, "error": "user_not_found"})
            return self._json(200, {"ok": True, "channel": {"id": _direct(users)}})
        if method == "conversations.history":
            return self._json(200, self._history(body))
        if method in ("chat.postEphemeral", "views.open"):
            return self._json(200, {"ok": True})
        return self._json(200, {"ok": False, "error": "unknown_method"})

    def _post_message(self, body: dict[str, Any]) -> dict[str, Any]:
        target = str(body["channel"])
        channel = _direct(target) if target.startswith(("U", "W")) else target
        metadata = body.get("metadata")
        if metadata is not None and not (
            isinstance(metadata, dict)
            and isinstance(metadata.get("event_type"), str)
            and isinstance(metadata.get("event_payload"), dict)
        ):
            return {"ok": False, "error": "invalid_metadata_format"}
        with self.lock:
            ts = f"{int(self.clock())}.{next(self.ids):06d}"
            message = {"type": "message", "ts": ts, "text": body.get("text", "")}
            if body.get("blocks"):
                message["blocks"] = body["blocks"]
            if metadata is not None:
                message["metadata"] = metadata
            self.history.setdefault(channel, []).append(message)
        return {"ok": True, "channel": channel, "ts": ts, "message": dict(message)}

    def _update(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            kept = self.history.get(str(body.get("channel")), [])
            found = next((m for m in kept if m["ts"] == body.get("ts")), None)
            if found is None:
                return {"ok": False, "error": "message_not_found"}
            found["text"] = body.get("text", found["text"])
            if "blocks" in body:
                found["blocks"] = body["blocks"]
        return {"ok": True, "channel": body["channel"], "ts": body["ts"]}

    def _history(self, body: dict[str, Any]) -> dict[str, Any]:
        channel = str(body.get("channel", ""))
        inclusive = body.get("inclusive") in (True, "true", "1", 1)
        oldest = float(body.get("oldest") or 0)
        latest = float(body["latest"]) if body.get("latest") else float("inf")
        limit = min(max(int(body.get("limit") or 100), 1), 999)
        try:
            start = int(base64.b64decode(str(body.get("cursor") or "")).decode() or 0)
        except ValueError:
            return {"ok": False, "error": "invalid_cursor"}
        with self.lock:
            if channel not in self.history:
                return {"ok": False, "error": "channel_not_found"}
            inside = [
                dict(m)
                for m in reversed(self.history[channel])
                if (oldest <= float(m["ts"]) if inclusive else oldest < float(m["ts"]))
                and (float(m["ts"]) <= latest if inclusive else float(m["ts"]) < latest)
            ]
        page = inside[start : start + limit]
        if not body.get("include_all_metadata"):
            for message in page:
                message.pop("metadata", None)
        more = start + limit < len(inside)
        cursor = base64.b64encode(str(start + limit).encode()).decode() if more else ""
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": cursor},
        }


def _direct(user: str) -> str:
    """The id of the app's direct message with `user`, as Slack would name it."""
    return "D" + user[1:]


class FakeTelegram(_Fake):
    def do_POST(self) -> None:
        prefix = f"/bot{TELEGRAM_TOKEN}/"
        if not self.path.startswith(prefix):
            return self._json(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
        method = self.path.removeprefix(prefix)
        body = self._body()
        self.recorded.add(method, body)
        if method == "sendMessage":
            message = {
                "message_id": next(self.ids),
                "chat": {"id": body["chat_id"]},
                "text": body["text"],
            }
            return self._json(200, {"ok": True, "result": message})
        if method in ("editMessageText", "answerCallbackQuery"):
            return self._json(200, {"ok": True, "result": True})
        return self._json(404, {"ok": False, "description": "Not Found"})


@dataclass
class Platform:
    """A running fake: its base URL, what it recorded and (Slack) the messages it keeps,
    by conversation, oldest first."""

    url: str
    recorded: Recorded
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@contextmanager
def serve(kind: type[_Fake], clock: Callable[[], float] = time.time) -> Iterator[Platform]:
    """A fake on 127.0.0.1, its message timestamps read from `clock` (epoch seconds)."""
    recorded = Recorded()
    history: dict[str, list[dict[str, Any]]] = {}
    handler = type(
        kind.__name__,
        (kind,),
        {
            "recorded": recorded,
            "ids": itertools.count(100),
            "clock": staticmethod(clock),
            "history": history,
            "lock": threading.Lock(),
        },
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Platform(f"http://127.0.0.1:{server.server_port}", recorded, history)
    finally:
        server.shutdown()
        server.server_close()


def slack_delivery(
    payload: dict[str, Any], *, secret: str = SLACK_SIGNING_SECRET, at: int | None = None
) -> tuple[str, dict[str, str]]:
    """A signed interactivity delivery: the form body and Slack's headers."""
    body = urlencode({"payload": json.dumps(payload)})
    stamp = str(int(time.time()) if at is None else at)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }
    return body, headers


def slack_headers(
    body: str, *, secret: str = SLACK_SIGNING_SECRET, at: int | None = None
) -> dict[str, str]:
    """Slack's headers for `body` as it is sent: signed, timestamped."""
    stamp = str(int(time.time()) if at is None else at)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }


def slack_tap(user: str, value: str, slack_url: str, tap_id: str = "1") -> dict[str, Any]:
    """A `block_actions` payload for a button press."""
    return {
        "type": "block_actions",
        "user": {"id": user},
        "trigger_id": f"trigger-{tap_id}",
        "response_url": f"{slack_url}/respond/{tap_id}",
        "container": {"channel_id": "C-cards", "message_ts": "100.000100"},
        "actions": [{"action_id": "interlock-a", "value": value}],
    }


def telegram_tap(update_id: int, user: int, data: str, chat: int | None = None) -> dict[str, Any]:
    """An Update carrying a callback query (a button press)."""
    return {
        "update_id": update_id,
        "callback_query": {
            "id": f"cq-{update_id}",
            "from": {"id": user, "is_bot": False, "first_name": "T"},
            "message": {"message_id": 100, "chat": {"id": chat or user}},
            "data": data,
        },
    }


def telegram_headers(secret: str = TELEGRAM_WEBHOOK_SECRET) -> dict[str, str]:
    return {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": secret}
