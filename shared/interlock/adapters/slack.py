"""Slack: cards as Block Kit messages with buttons, a form (modal) for answers that need
typing, and taps from the app's interactivity webhook.

A delivery is Slack's if its `X-Slack-Signature` is the v0 HMAC-SHA256 of
`v0:<timestamp>:<raw body>` under the app's signing secret and its timestamp is within
five minutes (an older one may be a captured request played again).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from interlock import errors
from interlock.adapters.webclient import JsonHttp
from interlock.channels import (
    FORM,
    ChannelName,
    Link,
    Tap,
    asked_line,
    button_data,
    card_link,
    channel_card,
    read_button,
)
from interlock.records import RequestRecord

API_URL: Final = "https://slack.com/api"
REPLY_HOST: Final = "hooks.slack.com"
SIGNATURE_HEADER: Final = "x-slack-signature"
TIMESTAMP_HEADER: Final = "x-slack-request-timestamp"
MAX_SKEW_S: Final = 300
_FIELD: Final = "answer"


class SlackChannel:
    """Posts cards for linked users and answers their taps.

    Args:
        http: A `JsonHttp` on Slack's Web API (or a local fake), with the bot token.
    """

    name: ChannelName = "slack"

    def __init__(self, http: JsonHttp) -> None:
        self._http = http

    def post(self, link: Link, request: RequestRecord, page_url: str | None) -> dict[str, Any]:
        blocks: list[dict[str, Any]] = []
        lines: list[str] = []
        for asked in request.asked:
            card = channel_card(asked.card)
            lines.append(card.title)
            blocks.append(_section(_escaped(card.title), tuple(map(_escaped, card.details))))
            blocks.append(
                {
                    "type": "actions",
                    "elements": [
                        {
                            "type": "button",
                            "text": {"type": "plain_text", "text": label},
                            "action_id": f"interlock-{choice}",
                            "value": button_data(request.chat_id, asked.interrupt_id, choice),
                            **({"style": "primary"} if choice == "a" else {}),
                        }
                        for label, choice in card.buttons
                    ],
                }
            )
        blocks.append(_section(_escaped(asked_line(request)), ()))
        if page_url:
            url = card_link(page_url, request.chat_id)
            blocks.append(_section(f"<{url}|Open the card page>", ()))
        answer = self._call(
            "/chat.postMessage",
            {"channel": link.destination, "text": " / ".join(lines), "blocks": blocks},
        )
        return {"channel": answer["channel"], "ts": answer["ts"]}

    def settle(self, ref: dict[str, Any], text: str) -> None:
        title, _, outcome = text.rpartition("\n")
        blocks = (
            [_section(_escaped(title), (_escaped(outcome),))]
            if title
            else [_section(_escaped(text), ())]
        )
        self._call("/chat.update", {**ref, "text": text, "blocks": blocks})

    def tell(self, tap: Tap, text: str) -> None:
        url = tap.reply.get("response_url")
        if isinstance(url, str) and self._may_reply_to(url):
            self._http.post(
                "", {"response_type": "ephemeral", "replace_original": False, "text": text}, url=url
            )
        elif channel := tap.reply.get("channel"):
            self._call(
                "/chat.postEphemeral", {"channel": channel, "user": tap.external_id, "text": text}
            )

    def open_form(self, trigger_id: str, tap: Tap, card: dict[str, Any]) -> None:
        """Open the form for an answer that needs typing (a reason, text, fields)."""
        self._call("/views.open", {"trigger_id": trigger_id, "view": form_view(tap, card)})

    def _may_reply_to(self, url: str) -> bool:
        # A reply URL comes in a signed payload; still, only Slack's (or, in tests, the
        # configured API's) host receives the reply.
        host = urlsplit(url).netloc
        return host == REPLY_HOST or host == urlsplit(self._http.base_url).netloc

    def _call(self, method: str, body: dict[str, Any]) -> Any:
        answer = self._http.post(method, body)
        if not isinstance(answer, dict) or not answer.get("ok"):
            raise errors.StoreError(f"Slack refused {method.lstrip('/')}")
        return answer


def _escaped(text: str) -> str:
    """Text as Slack's mrkdwn shows it literally: its three control characters escaped,
    so a card's text can neither link nor mention anyone."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _section(text: str, details: tuple[str, ...]) -> dict[str, Any]:
    body = "\n".join([f"*{text}*", *details]) if details else text
    return {"type": "section", "text": {"type": "mrkdwn", "text": body}}


def form_view(tap: Tap, card: dict[str, Any]) -> dict[str, Any]:
    """The modal for a card's typed answer; its metadata routes the submission."""
    kind = card.get("type")
    if kind == "info":
        inputs = [
            _input(f["name"], f.get("label") or f["name"], not f.get("required"))
            for f in card["fields"]
        ]
        title = "Fill in"
    elif kind in ("question", "interrupt"):
        inputs = [_input(_FIELD, str(card.get("reason", "Your answer"))[:150], False)]
        title = "Answer"
    else:
        inputs = [
            _input("reason", "Why not?", False),
            _input("suggestion", "What should the agent do instead?", True),
        ]
        title = "Deny with feedback"
    return {
        "type": "modal",
        "callback_id": "interlock-form",
        "private_metadata": json.dumps({"data": _data(tap)}),
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": "Send"},
        "blocks": inputs,
    }


def _data(tap: Tap) -> str:
    return f"i1|{FORM}|{tap.fingerprint}|{tap.chat_id}"


def _input(name: str, label: str, optional: bool) -> dict[str, Any]:
    return {
        "type": "input",
        "block_id": name,
        "optional": optional,
        "label": {"type": "plain_text", "text": label[:150]},
        "element": {
            "type": "plain_text_input",
            "action_id": name,
            "multiline": name != "suggestion",
        },
    }


def verified(signing_secret: str, headers: dict[str, str], body: str, now_s: int) -> bool:
    """Whether a delivery is Slack's, and fresh (timestamp within five minutes)."""
    stamp = headers.get(TIMESTAMP_HEADER, "")
    signature = headers.get(SIGNATURE_HEADER, "")
    if not stamp.isdigit() or abs(now_s - int(stamp)) > MAX_SKEW_S:
        return False
    expected = hmac.new(signing_secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256)
    return hmac.compare_digest(f"v0={expected.hexdigest()}", signature)


def read_interaction(body: str) -> tuple[str, Tap | None, str | None]:
    """`(delivery id, tap, trigger id)` of an interactivity delivery; the tap is None for
    anything that is not an Interlock button or form.

    Raises:
        InvalidInput: the delivery is malformed.
    """
    delivery = hashlib.sha256(body.encode()).hexdigest()
    try:
        payload = json.loads(parse_qs(body, strict_parsing=True)["payload"][0])
    except (KeyError, ValueError):
        raise errors.InvalidInput("not a Slack interaction") from None
    if not isinstance(payload, dict):
        raise errors.InvalidInput("not a Slack interaction")
    user = (payload.get("user") or {}).get("id")
    if not isinstance(user, str):
        raise errors.InvalidInput("an interaction without its user")
    reply = {
        "response_url": payload.get("response_url"),
        "channel": (payload.get("container") or {}).get("channel_id"),
    }
    if payload.get("type") == "block_actions":
        actions = payload.get("actions") or []
        value = actions[0].get("value") if actions and isinstance(actions[0], dict) else None
        if not isinstance(value, str) or not value.startswith("i1|"):
            return delivery, None, None
        choice, fingerprint, chat_id = read_button(value)
        tap = Tap("slack", user, chat_id, fingerprint, "resolved", None, choice=choice, reply=reply)
        return delivery, tap, payload.get("trigger_id")
    if payload.get("type") == "view_submission":
        view = payload.get("view") or {}
        try:
            data = json.loads(view.get("private_metadata") or "{}").get("data", "")
        except ValueError:
            return delivery, None, None
        if not isinstance(data, str) or not data.startswith("i1|"):
            return delivery, None, None
        _, fingerprint, chat_id = read_button(data)
        values = {
            block: next(iter(inputs.values())).get("value")
            for block, inputs in ((view.get("state") or {}).get("values") or {}).items()
            if isinstance(inputs, dict) and inputs
        }
        tap = Tap("slack", user, chat_id, fingerprint, "resolved", values, choice=FORM, reply=reply)
        return delivery, tap, None
    return delivery, None, None
