"""Telegram: cards as messages with an inline keyboard, taps from the bot's webhook.

Telegram signs nothing; it sends the secret token set with `setWebhook` in the
`X-Telegram-Bot-Api-Secret-Token` header, compared here in constant time. The bot token
is part of every API path (`/bot<token>/<method>`), which is why `JsonHttp` never shows
a URL.
"""

from __future__ import annotations

import hmac
from typing import Any, Final

from interlock import errors
from interlock.adapters.webclient import JsonHttp
from interlock.channels import (
    EDIT,
    FORM,
    ChannelName,
    Link,
    Notice,
    Tap,
    asked_line,
    button_data,
    card_link,
    channel_card,
    dismiss_buttons,
    group_buttons,
    numbered,
    read_button,
    settled_lines,
)
from interlock.records import RequestRecord

SECRET_HEADER: Final = "x-telegram-bot-api-secret-token"
# No preview of a page a card names: it would show that page's own words under the card.
_NO_PREVIEW: Final = {"link_preview_options": {"is_disabled": True}}


class TelegramChannel:
    """Posts cards to a linked user's chat with the bot and answers their taps.

    Args:
        http: A `JsonHttp` on Telegram's Bot API (or a local fake).
        token: The bot's token (from Secrets Manager).
    """

    name: ChannelName = "telegram"

    def __init__(self, http: JsonHttp, token: str) -> None:
        self._http = http
        self._token = token

    def post(self, link: Link, request: RequestRecord, page_url: str | None) -> dict[str, Any]:
        """Post the card as plain text (no parse mode: nothing in it becomes bold, a link
        or any other entity): Interlock's header first, the facts it checked, then the
        agent's words in quotes on their own line, under the label saying whose."""
        rows: list[list[dict[str, str]]] = []
        lines: list[str] = []
        count = len(request.asked)
        for index, asked in enumerate(request.asked):
            card = channel_card(asked.card)
            lines += [numbered(card.header, index, count), *card.details]
            if card.said:
                # One line (`channel_card` flattens it), so it cannot pass for a line of
                # Interlock's; the quotes show where it starts and ends.
                lines += [card.speaker, f"\u201c{card.said}\u201d"]
            if count == 1:
                if buttons := _buttons(request, asked.interrupt_id, card.buttons):
                    rows.append(buttons)
                if page_url and any(choice == EDIT for _, choice in card.buttons):
                    # No forms in Telegram: the arguments are changed on the card page.
                    edit_url = card_link(page_url, request.chat_id)
                    rows.append([{"text": "Change on the card page", "url": edit_url}])
                if card.form:
                    lines.append("(Answers that need typing: on the card page.)")
        if count > 1:
            # One run paused on all of them: they are answered together, in one tap when
            # every card is an approval, else on the card page the link below opens.
            group = group_buttons(request, form=False)
            if buttons := _buttons(request, request.asked[0].interrupt_id, group):
                rows.append(buttons)
            where = "here all at once, or each on the card page" if group else "on the card page"
            lines.append(f"({count} questions, answered together: {where}.)")
        # A row of its own: it sets the request aside, unlike the answers above it.
        if dismiss := _buttons(request, request.asked[0].interrupt_id, dismiss_buttons(request)):
            rows.append(dismiss)
        lines.append(asked_line(request))
        if page_url:
            link_url = card_link(page_url, request.chat_id)
            rows.append([{"text": "Open the card page", "url": link_url}])
        message = self._call(
            "sendMessage",
            {
                "chat_id": link.destination,
                "text": "\n".join(lines),
                **_NO_PREVIEW,
                "reply_markup": {"inline_keyboard": rows},
            },
        )
        return {"chat_id": message["chat"]["id"], "message_id": message["message_id"]}

    def settle(self, ref: dict[str, Any], text: str) -> None:
        """Edit the card to how it ended, as plain text (no parse mode: nothing in it
        becomes an entity): the question it kept, labelled, the facts the card showed,
        then the outcome."""
        asked, facts, outcome = settled_lines(text)
        shown = "\n".join(line for line in (asked, *facts, outcome) if line)
        self._call(
            "editMessageText",
            {**ref, "text": shown, **_NO_PREVIEW, "reply_markup": {"inline_keyboard": []}},
        )

    def find(self, link: Link, chat_id: str, notice: Notice) -> dict[str, Any] | None:
        """None: the Bot API cannot list a chat's messages, so a post whose reference
        was lost cannot be found again. It is posted again (one copy too many at most,
        whose taps are told the truth: `interlock.respond.screen_tap`)."""
        return None

    def tell(self, tap: Tap, text: str) -> None:
        if query := tap.reply.get("callback_query_id"):
            try:
                self._call("answerCallbackQuery", {"callback_query_id": query, "text": text})
                return
            except errors.InterlockError:
                pass  # an answer comes too late for the query: say it in the chat
        if chat := tap.reply.get("chat_id"):
            self._call("sendMessage", {"chat_id": chat, "text": text})

    def _call(self, method: str, body: dict[str, Any]) -> Any:
        answer = self._http.post(f"/bot{self._token}/{method}", body)
        if not isinstance(answer, dict) or not answer.get("ok"):
            raise errors.StoreError(f"Telegram refused {method}")
        return answer.get("result")


def _buttons(
    request: RequestRecord, interrupt_id: str, buttons: tuple[tuple[str, str], ...]
) -> list[dict[str, str]]:
    """An inline keyboard row: the buttons a tap answers (typed answers and changed
    arguments need the page)."""
    return [
        {"text": label, "callback_data": button_data(request.chat_id, interrupt_id, choice)}
        for label, choice in buttons
        if choice not in (FORM, EDIT)
    ]


def verified(secret_token: str, header: str | None) -> bool:
    """Whether a webhook delivery carries the secret token set with `setWebhook`."""
    return bool(header) and hmac.compare_digest(secret_token.encode(), str(header).encode())


def read_update(update: Any) -> tuple[str, Tap | None]:
    """`(delivery id, tap)` of a webhook update; the tap is None for anything that is not
    a press of an Interlock button (a plain message, a game's button).

    Every member read is checked for its kind before it is used: the secret token
    proves the delivery is Telegram's, not that its body is well formed.

    Raises:
        InvalidInput: the update is malformed (a member of the wrong kind, or a button
            Interlock did not make).
    """
    if not isinstance(update, dict):
        raise errors.InvalidInput("not a Telegram update")
    body: dict[str, Any] = update
    delivery = str(_integer(body.get("update_id"), "update_id"))
    for name in _OBJECT_MEMBERS:
        _member(body, name)
    query = _member(body, "callback_query")
    if query is None:
        return delivery, None
    sender = _object(query.get("from"), "callback_query.from")
    sender_id = _integer(sender.get("id"), "callback_query.from.id")
    query_id = _text(query.get("id"), "callback_query.id")
    reply_chat = _reply_chat(_member(query, "message", "callback_query.message"))
    if "data" not in query:  # a game's button, not a callback button
        return delivery, None
    choice, fingerprint, chat_id = read_button(_text(query["data"], "callback_query.data"))
    return delivery, Tap(
        channel="telegram",
        external_id=str(sender_id),
        chat_id=chat_id,
        fingerprint=fingerprint,
        status="resolved",
        payload=None,
        choice=choice,
        reply={"callback_query_id": query_id, "chat_id": reply_chat},
    )


def _reply_chat(message: dict[str, Any] | None) -> int | None:
    """The chat of the message the button was on, where a late answer is said; None
    when Telegram left the message out (it is too old)."""
    if message is None:
        return None
    chat = _member(message, "chat", "callback_query.message.chat")
    return _integer(chat.get("id"), "chat id") if chat is not None else None


_OBJECT_MEMBERS: Final = ("message", "edited_message", "callback_query")
"""Update members that are objects whenever present (Telegram omits an absent member;
it never sends null)."""


def _malformed(what: str) -> errors.InvalidInput:
    return errors.InvalidInput(f"a Telegram update whose {what} is malformed")


def _object(value: Any, what: str) -> dict[str, Any]:
    """`value`, which must be a JSON object."""
    if not isinstance(value, dict):
        raise _malformed(what)
    return value


def _member(parent: dict[str, Any], name: str, what: str = "") -> dict[str, Any] | None:
    """An optional object member: None when absent, else it must be an object (a null
    is malformed too, since Telegram leaves absent members out)."""
    if name not in parent:
        return None
    return _object(parent[name], what or name)


def _integer(value: Any, what: str) -> int:
    """An integer id (a bool is JSON's true or false, not an id)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise _malformed(what)
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _malformed(what)
    return value
