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
import re
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from interlock import errors
from interlock.adapters.webclient import JsonHttp
from interlock.channels import (
    ANSWER_ALL,
    APPROVE,
    APPROVE_ALL,
    EDIT,
    FORM,
    ChannelCard,
    ChannelName,
    Link,
    Notice,
    Tap,
    asked_line,
    button_data,
    card_link,
    channel_card,
    dismiss_buttons,
    edit_fields,
    form_fields,
    group_buttons,
    numbered,
    read_button,
    settled_lines,
)
from interlock.records import RequestRecord

REPLY_HOST: Final = "hooks.slack.com"
# Every card is posted with message metadata of this type naming its chat and interrupt,
# so a post whose reference was lost (its process killed as Slack took it) is found again.
CARD_EVENT: Final = "interlock_card"
# The history read for a lost post: pages of this many messages, at most this many
# pages, from when its post was reserved, less a margin for Slack's clock.
HISTORY_PAGE: Final = 200
HISTORY_PAGES: Final = 5
CLOCK_MARGIN_S: Final = 60
_USER_PREFIXES: Final = ("U", "W")
SIGNATURE_HEADER: Final = "x-slack-signature"
TIMESTAMP_HEADER: Final = "x-slack-request-timestamp"
MAX_SKEW_S: Final = 300


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
        several = len(request.asked) > 1
        for index, asked in enumerate(request.asked):
            card = channel_card(asked.card)
            lines.append(numbered(card.header, index, len(request.asked)))
            blocks.append(_card_section(card, index, len(request.asked)))
            if not several:
                buttons = (*card.buttons, *dismiss_buttons(request))
                blocks.append(_actions(request, asked.interrupt_id, buttons))
        if several:
            # One run paused on all of them: they are answered (or dismissed) together.
            buttons = (*group_buttons(request, form=True), *dismiss_buttons(request))
            blocks.append(_actions(request, request.asked[0].interrupt_id, buttons))
        blocks.append(_section(_plain(asked_line(request))))
        if page_url:
            url = card_link(page_url, request.chat_id)
            blocks.append(_section(f"<{url}|Open the card page>"))
        answer = self._call(
            "/chat.postMessage",
            {
                "channel": link.destination,
                # The notification's text: Interlock's headers only, never the agent's words.
                "text": _plain(" / ".join(lines)),
                "blocks": blocks,
                # No preview of a page the card names: it would show that page's words.
                "unfurl_links": False,
                "unfurl_media": False,
                # What finds the message again should its reference be lost (`find`).
                "metadata": card_metadata(request.chat_id, request.interrupt_id),
            },
        )
        return {"channel": answer["channel"], "ts": answer["ts"]}

    def find(self, link: Link, chat_id: str, notice: Notice) -> dict[str, Any] | None:
        """The message an earlier attempt posted for `notice`, by its metadata: the
        conversation's history since the post was reserved (`conversations.history`,
        at most `HISTORY_PAGES` pages), newest first. None when none carries it, or
        when Slack refuses to show the history (an app installed without the history
        scopes): the card is then posted again, as before it could be found.

        Raises:
            ChannelError: Slack could not be reached (retried later).
        """
        conversation = self._conversation(link.destination)
        if conversation is None:
            return None
        since_s = max(notice.reserved_ms // 1000 - CLOCK_MARGIN_S, 0)
        body: dict[str, Any] = {
            "channel": conversation,
            "oldest": f"{since_s}.000000",
            "inclusive": True,
            "include_all_metadata": True,
            "limit": HISTORY_PAGE,
        }
        for _ in range(HISTORY_PAGES):
            answer = self._http.post("/conversations.history", body)
            if not isinstance(answer, dict) or not answer.get("ok"):
                return None
            for message in answer.get("messages") or []:
                if carries_card(message, chat_id, notice.interrupt_id):
                    return {"channel": conversation, "ts": message["ts"]}
            more = answer.get("response_metadata")
            cursor = more.get("next_cursor") if isinstance(more, dict) else None
            if not answer.get("has_more") or not isinstance(cursor, str) or not cursor:
                return None
            body = {**body, "cursor": cursor}
        return None

    def settle(self, ref: dict[str, Any], text: str) -> None:
        """Edit the card to how it ended: the question it kept, labelled and inert (it
        is in the asker's words), the facts the card showed, then the outcome,
        Interlock's, in bold."""
        asked, facts, outcome = settled_lines(text)
        lines = [_plain(line) for line in (asked, *facts) if line]
        # Whole lines only, within Slack's limit on a section's text (escaping can
        # lengthen a line): the outcome always fits, after what was kept.
        bold = f"*{_plain(outcome)}*"
        shown = [*_within(lines, MAX_SECTION_CHARS - len(bold) - 1), bold]
        blocks = [{"type": "section", "text": _mrkdwn("\n".join(shown))}]
        self._call("/chat.update", {**ref, "text": _plain(text), "blocks": blocks})

    def tell(self, tap: Tap, text: str) -> None:
        url = tap.reply.get("response_url")
        if isinstance(url, str) and self._may_reply_to(url):
            # The reply URL is itself the credential: the bot token never goes to it.
            body = {"response_type": "ephemeral", "replace_original": False, "text": text}
            self._http.post("", body, url=url, anonymous=True)
        elif channel := tap.reply.get("channel"):
            self._call(
                "/chat.postEphemeral", {"channel": channel, "user": tap.external_id, "text": text}
            )

    def open_form(self, trigger_id: str, tap: Tap, request: RequestRecord) -> None:
        """Open the form for an answer that needs typing (a reason, text, fields), for
        "Change and approve…" the arguments to change, or, for a group's "Answer
        each…", the one form that answers every card.

        Raises:
            InvalidInput: the form cannot be drawn in Slack (the card page can).
        """
        if tap.choice == ANSWER_ALL:
            view = group_view(tap, request)
        elif tap.choice == EDIT:
            view = edit_view(tap, request.card)
        else:
            view = form_view(tap, request.card)
        self._call("/views.open", {"trigger_id": trigger_id, "view": view})

    def _conversation(self, destination: str) -> str | None:
        """The conversation a post to `destination` lands in: a user's (`U…`, `W…`) is
        the app's direct message with them (`conversations.open`), anything else is a
        conversation already."""
        if not destination.startswith(_USER_PREFIXES):
            return destination
        answer = self._http.post("/conversations.open", {"users": destination})
        if not isinstance(answer, dict) or not answer.get("ok"):
            return None
        opened = answer.get("channel")
        found = opened.get("id") if isinstance(opened, dict) else None
        return found if isinstance(found, str) and found else None

    def _may_reply_to(self, url: str) -> bool:
        # A reply URL comes in a signed payload; still, only Slack's own reply host over
        # HTTPS receives the reply (or the configured API, as it is reached: a local
        # fake in tests).
        reply, api = urlsplit(url), urlsplit(self._http.base_url)
        if (reply.scheme, reply.netloc) == ("https", REPLY_HOST):
            return True
        return (reply.scheme, reply.netloc) == (api.scheme, api.netloc) and api.netloc != ""

    def _call(self, method: str, body: dict[str, Any]) -> Any:
        answer = self._http.post(method, body)
        if not isinstance(answer, dict) or not answer.get("ok"):
            raise errors.StoreError(f"Slack refused {method.lstrip('/')}")
        return answer


MAX_SECTION_CHARS: Final = 3000  # Slack's limit on a section's text


def _within(lines: list[str], most: int) -> list[str]:
    """The first of `lines` whose text, joined, is at most `most` characters."""
    kept: list[str] = []
    for line in lines:
        most -= len(line) + 1
        if most < 0:
            break
        kept.append(line)
    return kept


def card_metadata(chat_id: str, interrupt_id: str) -> dict[str, Any]:
    """The message metadata a card is posted with: what `find` matches it by."""
    return {
        "event_type": CARD_EVENT,
        "event_payload": {"chat_id": chat_id, "interrupt_id": interrupt_id},
    }


def carries_card(message: Any, chat_id: str, interrupt_id: str) -> bool:
    """Whether a message from the history carries the card of `interrupt_id` in
    `chat_id`: its metadata names both (nothing else of it is compared)."""
    if not isinstance(message, dict) or not isinstance(message.get("ts"), str):
        return False
    metadata = message.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("event_type") != CARD_EVENT:
        return False
    payload = metadata.get("event_payload")
    return (
        isinstance(payload, dict)
        and payload.get("chat_id") == chat_id
        and payload.get("interrupt_id") == interrupt_id
    )


def _escaped(text: str) -> str:
    """Text as Slack's mrkdwn shows it literally: its three control characters escaped,
    so a card's text can neither link nor mention anyone."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# mrkdwn has no escape for its formatting marks, so a mark that could open or close bold,
# italics, strike or code is shown as a look-alike that formats nothing. A mark between
# two letters or digits formats nothing in Slack and is kept (`snake_case`, `a*b`), so
# names and URLs read as written; a backtick is always swapped.
_LOOK_ALIKES: Final = {"*": "\u2217", "_": "\u02cd", "~": "\u223c", "`": "\u02cb"}
_LIVE_MARK: Final = re.compile(r"`|(?<![^\W_])[*_~]|[*_~](?![^\W_])")


def _plain(text: str) -> str:
    """Text as mrkdwn shows it with no effect of its own: escaped (`_escaped`), and no
    mark in it can make anything bold, italic, struck out or code."""
    return _escaped(_LIVE_MARK.sub(lambda mark: _LOOK_ALIKES[mark.group()], text))


def _mrkdwn(text: str) -> dict[str, str | bool]:
    """A mrkdwn text object that Slack shows as written: `verbatim`, so no URL, channel
    name or mention in it is turned into a link by Slack (only Interlock's own markup,
    around text passed through `_plain`, formats anything)."""
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _actions(
    request: RequestRecord, interrupt_id: str, buttons: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    return {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": label},
                "action_id": f"interlock-{choice}",
                "value": button_data(request.chat_id, interrupt_id, choice),
                **({"style": "primary"} if choice in (APPROVE, APPROVE_ALL) else {}),
            }
            for label, choice in buttons
        ],
    }


def _card_section(card: ChannelCard, index: int, count: int) -> dict[str, Any]:
    """A card as a section: Interlock's header in bold, the facts it checked under it,
    then the agent's words in a quote of their own under the label saying whose they
    are. Every piece of the card's text is shown inert (`_plain`): only this layout is
    markup."""
    lines = [f"*{_plain(numbered(card.header, index, count))}*", *map(_plain, card.details)]
    if card.said:
        lines += [f"_{_plain(card.speaker)}_", f">{_plain(card.said)}"]
    return {"type": "section", "text": _mrkdwn("\n".join(lines))}


def _section(text: str) -> dict[str, Any]:
    """A section of Interlock's own mrkdwn (its dynamic parts escaped by the caller)."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def form_view(tap: Tap, card: dict[str, Any]) -> dict[str, Any]:
    """The modal for a card's typed answer; its metadata routes the submission.

    A question or a card answered with fields shows the card, then its fields drawn
    as the group form draws them (`card_inputs`): a select for a choice or yes/no,
    checkboxes for several choices, a number for a number; an approval's form asks
    why it is denied.
    """
    kind = card.get("type")
    if kind in ("question", "info", "interrupt"):
        blocks = [_card_section(channel_card(card), 0, 1), *_inputs("", card)]
        return _modal(tap, "Fill in" if kind == "info" else "Answer", blocks)
    inputs = [
        _input("reason", "Why not?", False),
        _input("suggestion", "What should the agent do instead?", True),
    ]
    return _modal(tap, "Deny with feedback", inputs)


def edit_view(tap: Tap, card: dict[str, Any]) -> dict[str, Any]:
    """The change-and-approve modal: the card as the message shows it, then a field per
    argument the card lets a person change, drawn by its type and holding the agent's
    value; submitting it approves the call with what was changed.

    Raises:
        InvalidInput: the card has no argument to change, or a value too long for a
            Slack field (it is changed on the card page instead).
    """
    fields = edit_fields(card)
    if not fields:
        raise errors.InvalidInput("this card has no arguments to change")
    blocks = [_card_section(channel_card(card), 0, 1)]
    for spec in fields:
        # An argument the agent left out may stay out; one it gave cannot be emptied.
        given = spec.get("initial") is not None
        blocks.append(_block(spec["name"], spec["label"], _edit_input(spec), given))
    return _modal(tap, "Change and approve", blocks, submit="Approve")


def _edit_input(spec: dict[str, Any]) -> dict[str, Any]:
    """An argument's field (`_field_input`) holding the agent's value at first."""
    element = _field_input(spec)
    initial = spec.get("initial")
    if initial is None:
        return element
    if element["type"] == "static_select":
        chosen = [o for o in element["options"] if o["value"] == initial]
        if chosen:
            element["initial_option"] = chosen[0]
        return element
    if len(initial) > MAX_INITIAL_CHARS:
        raise errors.InvalidInput("a value too long to change in Slack: use the card page")
    element["initial_value"] = initial
    return element


MAX_INITIAL_CHARS: Final = 3000  # Slack's limit on a text field's value


def group_view(tap: Tap, request: RequestRecord) -> dict[str, Any]:
    """The one form that answers every card of a pause: each card's question, then a
    field drawn from its response schema (a select, checkboxes within the card's
    limits, a number or a typed field), named `<card index>.<field>`."""
    blocks: list[dict[str, Any]] = []
    for index, asked in enumerate(request.asked):
        blocks.append(_card_section(channel_card(asked.card), index, len(request.asked)))
        blocks += card_inputs(index, asked.card)
    if len(blocks) > MAX_VIEW_BLOCKS:
        raise errors.InvalidInput("too many questions for one Slack form: use the card page")
    return _modal(tap, "Answer each", blocks, submit="Send answers")


def card_inputs(index: int, card: dict[str, Any]) -> list[dict[str, Any]]:
    """The group form's fields for one card, named `<card index>.<field>`."""
    return _inputs(f"{index}.", card)


def _inputs(name: str, card: dict[str, Any]) -> list[dict[str, Any]]:
    """A card's fields, each named `name` + the field: drawn by the card's rules (a
    select for a choice or yes/no, checkboxes for several, a number for a number),
    so what is submitted is typed as the card asks (`form_answer`)."""
    kind = card.get("type")
    if kind == "question":
        options = [str(o) for o in card.get("options") or []]
        required = bool(card.get("required", True))
        if card.get("question_type") == "single_choice":
            initial = card.get("default") if card.get("default") in options else None
            element = _select([(o, o) for o in options], initial)
            return [_block(name + "answer", "Your choice", element, required)]
        if card.get("question_type") == "multiple_choice":
            low, high = int(card.get("min_selections", 1)), card.get("max_selections")
            limit = f"Choose {low} to {high}" if high else f"Choose at least {low}"
            element = _ticks(options, high)
            return [_block(name + "answer", limit, element, required and low > 0)]
        element = _typed_input("plain_text_input", card.get("max_length"), multiline=True)
        return [_block(name + "answer", "Your answer", element, required)]
    if fields := form_fields(card):
        return [
            _block(
                f"{name}{spec['name']}",
                str(spec.get("label") or spec["name"]),
                _field_input(spec),
                bool(spec.get("required", True)),
            )
            for spec in fields
        ]
    if kind == "interrupt":
        element = _typed_input("plain_text_input", None, multiline=True)
        return [_block(name + "answer", "Your answer", element, True)]
    reason = _typed_input("plain_text_input", None, multiline=True)
    return [
        _block(
            name + "decision",
            "Your decision",
            _select([("Approve", "approve"), ("Deny", "reject")], None),
            True,
        ),
        _block(name + "reason", "Reason or feedback", reason, False),
    ]


def form_errors(request: RequestRecord, problems: dict[int, str]) -> dict[str, Any]:
    """Slack's answer to a form submission that breaks a card's rules: each problem
    beside the card's first field, and the form stays open."""
    first = {i: card_inputs(i, a.card)[0]["block_id"] for i, a in enumerate(request.asked)}
    return {
        "response_action": "errors",
        "errors": {first[i]: text[:150] for i, text in problems.items() if i in first},
    }


MAX_VIEW_BLOCKS: Final = 100  # Slack's limit on a modal's blocks


def _field_input(spec: dict[str, Any]) -> dict[str, Any]:
    kind = spec.get("type")
    if spec.get("options"):
        return _select([(o, o) for o in spec["options"]], None)
    if kind == "boolean":
        return _select([("Yes", "yes"), ("No", "no")], None)
    if kind in ("integer", "number"):
        element: dict[str, Any] = {
            "type": "number_input",
            "action_id": "value",
            "is_decimal_allowed": kind == "number",
        }
        for bound, key in (("minimum", "min_value"), ("maximum", "max_value")):
            if spec.get(bound) is not None:
                value = spec[bound]
                element[key] = str(int(value) if kind == "integer" else value)
        return element
    if kind == "email":
        return {"type": "email_text_input", "action_id": "value"}
    return _typed_input("plain_text_input", spec.get("max_length"), multiline=False)


def _select(options: list[tuple[str, str]], initial: str | None) -> dict[str, Any]:
    """A select of `(words shown, value)`; `initial` is the value chosen at first."""
    element: dict[str, Any] = {
        "type": "static_select",
        "action_id": "value",
        "options": [_option(text, value) for text, value in options[:100]],
    }
    if initial is not None:
        element["initial_option"] = _option(initial, initial)
    return element


def _ticks(options: list[str], most: Any) -> dict[str, Any]:
    # Checkboxes show every option at once; Slack allows ten, and a longer list is a
    # multi-select that itself stops at the card's most.
    if len(options) <= 10:
        ticks = [_option(o, o) for o in options]
        return {"type": "checkboxes", "action_id": "value", "options": ticks}
    element: dict[str, Any] = {
        "type": "multi_static_select",
        "action_id": "value",
        "options": [_option(o, o) for o in options[:100]],
    }
    if most:
        element["max_selected_items"] = int(most)
    return element


def _option(text: str, value: str) -> dict[str, Any]:
    # The value is what the card's rules check; the words shown may be shortened.
    return {"text": {"type": "plain_text", "text": text[:75]}, "value": value[:150]}


def _typed_input(kind: str, most: Any, *, multiline: bool) -> dict[str, Any]:
    element: dict[str, Any] = {"type": kind, "action_id": "value", "multiline": multiline}
    if most:
        element["max_length"] = min(int(most), 3000)
    return element


def _block(block_id: str, label: str, element: dict[str, Any], required: bool) -> dict[str, Any]:
    return {
        "type": "input",
        "block_id": block_id,
        "optional": not required,
        "label": {"type": "plain_text", "text": label[:150]},
        "element": element,
    }


def _modal(
    tap: Tap, title: str, blocks: list[dict[str, Any]], submit: str = "Send"
) -> dict[str, Any]:
    # The metadata routes the submission (the chat, the card, the choice) and names the
    # message's channel, where the person is told what became of it.
    metadata = {"data": f"i1|{tap.choice or FORM}|{tap.fingerprint}|{tap.chat_id}"}
    if channel := tap.reply.get("channel"):
        metadata["channel"] = channel
    return {
        "type": "modal",
        "callback_id": "interlock-form",
        "private_metadata": json.dumps(metadata),
        "title": {"type": "plain_text", "text": title[:24]},
        "submit": {"type": "plain_text", "text": submit},
        "blocks": blocks,
    }


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

    Every member read is checked for its kind before it is used: the signature proves
    the delivery is Slack's, not that its payload is well formed.

    Raises:
        InvalidInput: the delivery is malformed.
        TooLarge: the body is over `MAX_BODY_BYTES`.
    """
    if len(body.encode()) > MAX_BODY_BYTES:
        raise errors.TooLarge(f"a Slack interaction is at most {MAX_BODY_BYTES} bytes")
    delivery = hashlib.sha256(body.encode()).hexdigest()
    payload = _payload(body)
    user = _obj(payload.get("user"), "user").get("id")
    if not isinstance(user, str) or not user:
        raise errors.InvalidInput("an interaction without its user")
    reply = {
        "response_url": _text(payload.get("response_url"), "response_url"),
        "channel": _text(_obj(payload.get("container"), "container").get("channel_id"), "channel"),
    }
    kind = _text(payload.get("type"), "type")
    if kind == "block_actions":
        return delivery, *_button_tap(payload, user, reply)
    if kind == "view_submission":
        return delivery, _form_tap(payload, user, reply), None
    return delivery, None, None


def _payload(body: str) -> dict[str, Any]:
    """The JSON object in the form body's `payload` field.

    Raises:
        InvalidInput: not a form with a `payload`, not JSON, not an object, or holding
            text that is not valid Unicode (a lone surrogate could be neither stored nor
            shown).
    """
    try:
        form = parse_qs(body, strict_parsing=True, max_num_fields=8)
        payload = json.loads(form["payload"][0])
        json.dumps(payload, ensure_ascii=False).encode()
    except (KeyError, ValueError, RecursionError):  # UnicodeError is a ValueError
        raise errors.InvalidInput("not a Slack interaction") from None
    if not isinstance(payload, dict):
        raise errors.InvalidInput("not a Slack interaction")
    return payload


def _button_tap(
    payload: dict[str, Any], user: str, reply: dict[str, Any]
) -> tuple[Tap | None, str | None]:
    """`(tap, trigger id)` of a `block_actions` payload: a press of an Interlock button,
    or None for any other action."""
    actions = payload.get("actions")
    if actions is not None and not isinstance(actions, list):
        raise errors.InvalidInput("a Slack interaction whose actions are malformed")
    first = _obj(actions[0], "action") if actions else {}
    value = _text(first.get("value"), "action value")
    trigger = _text(payload.get("trigger_id"), "trigger_id")
    if value is None or not value.startswith("i1|"):
        return None, None
    choice, fingerprint, chat_id = read_button(value)
    tap = Tap("slack", user, chat_id, fingerprint, "resolved", None, choice=choice, reply=reply)
    return tap, trigger


def _form_tap(payload: dict[str, Any], user: str, reply: dict[str, Any]) -> Tap | None:
    """The tap a `view_submission` of an Interlock form makes; None for another form."""
    view = _obj(payload.get("view"), "view")
    try:
        metadata = json.loads(_text(view.get("private_metadata"), "metadata") or "{}")
    except (ValueError, RecursionError):
        return None  # not a form Interlock opened: its metadata is always JSON
    data = metadata.get("data", "") if isinstance(metadata, dict) else None
    if not isinstance(data, str) or not data.startswith("i1|"):
        return None
    choice, fingerprint, chat_id = read_button(data)
    if choice not in (FORM, ANSWER_ALL, EDIT):
        return None
    if isinstance(metadata.get("channel"), str):
        reply["channel"] = metadata["channel"]
    values = _form_values(_obj(view.get("state"), "state").get("values"))
    return Tap("slack", user, chat_id, fingerprint, "resolved", values, choice=choice, reply=reply)


def _form_values(blocks: Any) -> dict[str, Any]:
    """What each block of a submitted form holds, by block id (its first element's)."""
    values: dict[str, Any] = {}
    for block, inputs in _obj(blocks, "values").items():
        elements = _obj(inputs, "form block")
        if elements:
            values[block] = _value(next(iter(elements.values())))
    return values


MAX_BODY_BYTES: Final = 256 * 1024
"""The largest interaction read: Slack's own are a few kilobytes, a form's a few more."""


def _obj(value: Any, what: str) -> dict[str, Any]:
    """A payload member that is an object when present.

    Raises:
        InvalidInput: it is present and not an object (signed, but malformed).
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise errors.InvalidInput(f"a Slack interaction whose {what} is malformed")
    return value


def _text(value: Any, what: str) -> str | None:
    """A payload member that is text when present (raises as `_obj` does)."""
    if value is None or isinstance(value, str):
        return value
    raise errors.InvalidInput(f"a Slack interaction whose {what} is malformed")


def _value(element: Any) -> Any:
    """What one form field holds: the text typed, the option chosen, or those ticked.

    Raises:
        InvalidInput: the field is not an object, or what it holds is of another kind
            than the element Interlock drew could send.
    """
    field = _obj(element, "form field")
    if "selected_options" in field:
        ticked = field["selected_options"]
        if ticked is not None and not isinstance(ticked, list):
            raise errors.InvalidInput("a Slack interaction whose options are malformed")
        return [_option_value(option) for option in ticked or []]
    if "selected_option" in field:
        chosen = field["selected_option"]
        return None if chosen is None else _option_value(chosen)
    return _text(field.get("value"), "form field")


def _option_value(option: Any) -> str | None:
    """The value of one option chosen (an object, as Slack sends every option)."""
    if not isinstance(option, dict):
        raise errors.InvalidInput("a Slack interaction whose options are malformed")
    return _text(option.get("value"), "option")
