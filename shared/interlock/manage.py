"""Reading and managing a chat's requests, approvals and trail: no agent involved.

These are the service functions behind the requests Lambda; none of them imports
strands, so that function starts fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from interlock import access, errors
from interlock.caller import Caller
from interlock.channels import CHANNELS, ChannelName, Link
from interlock.egress import safe_package, safe_site
from interlock.keys import ASK_POOL, checked_id
from interlock.ports import Entry, EntryRefused, Stores
from interlock.records import (
    Approval,
    AuditEvent,
    InboxCursor,
    InboxEntry,
    RequestRecord,
    RequestState,
    Subject,
    fresh_secret,
)


@dataclass(frozen=True, slots=True)
class OpenRequest:
    """A chat's current request and, when it can still be answered, a fresh secret."""

    request: RequestRecord
    secret: str | None


def owned_chat(stores: Stores, caller: Caller, chat_id: str) -> None:
    """Refuse callers who do not own the chat (a chat nobody owns yet is empty)."""
    access.require_owner(caller, stores.chats.meta(chat_id).owner)


def open_request(stores: Stores, caller: Caller, chat_id: str, now_ms: int) -> OpenRequest:
    """The chat's request; reading an answerable one issues a fresh secret.

    Rotating on every read means a copy of an older secret (another tab, a leaked
    link) stops working the moment the owner looks at the card again.
    """
    request = _request(stores, caller, chat_id, now_ms)
    if not request.claimable(now_ms):
        return OpenRequest(request, None)
    secret, secret_hash = fresh_secret()
    rotated = stores.requests.rotate_secret(request, "page", secret_hash, now_ms)
    return OpenRequest(rotated, secret)


CANCELLED_BY_USER: Final = "cancelled by the user"
_CANCEL_ATTEMPTS: Final = 3


def cancel_request(
    stores: Stores, caller: Caller, chat_id: str, now_ms: int, config_version: str | None = None
) -> RequestRecord:
    """Cancel the chat's answerable request on its owner's word (an operator a request
    was rerouted to may answer it, not cancel it).

    The cancel is one transaction with everything it takes back: the rows a dead claim
    granted for its cards, the owner's open-request slot and the trail's `cancelled`
    event. A cancel that is sent again (its first answer lost to a 5xx or a timeout)
    finds its request cancelled by its user and returns it: nothing is left to do.

    Raises:
        RequestExpired: nobody answered it before its stated expiry: its timeout policy
            applies (the sweeper settles it), not a cancel.
    """
    request = _request(stores, caller, chat_id, now_ms)
    if request.user_id != caller.user_id:
        raise errors.Forbidden("only the chat's user can cancel its request")
    if request.state is RequestState.CANCELLED and request.ended_reason == CANCELLED_BY_USER:
        return request
    if request.state is RequestState.PENDING and request.is_past_expiry(now_ms):
        raise errors.RequestExpired("its time ran out unanswered: its timeout policy applies")
    for attempt in range(_CANCEL_ATTEMPTS):
        try:
            return stores.requests.cancel(
                request,
                CANCELLED_BY_USER,
                now_ms,
                also=_taken_back(stores, caller, request, now_ms, config_version),
            )
        except EntryRefused:
            # A row was stamped anew between the read and the write: read them again.
            if attempt == _CANCEL_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _taken_back(
    stores: Stores,
    caller: Caller,
    request: RequestRecord,
    now_ms: int,
    config_version: str | None,
) -> list[Entry]:
    """What a cancel of `request` writes beside the pointer, in its transaction."""
    grants = [
        entry
        for asked in request.asked
        if asked.card.get("card_id")
        # A worker that died after its claim may have granted this card's rows.
        for entry in stores.approvals.withdraw_entries(
            request.chat_id, request.user_id, asked.card["card_id"]
        )
    ]
    slot = (
        [stores.limits.release_entry(request.user_id, request.chat_id, request.ask_slot, ASK_POOL)]
        if request.ask_slot is not None  # the owner's open-request slot (admission.ask_slots)
        else []
    )
    event = stores.chats.event_entry(
        request.chat_id,
        "cancelled",
        caller.user_id,
        now_ms,
        interrupt_id=request.interrupt_id,
        trace_id=caller.trace_id,
        config_version=config_version,
    )
    return [*grants, *slot, event]


def approvals(
    stores: Stores, caller: Caller, chat_id: str, now_ms: int
) -> dict[str, list[Approval]]:
    """The caller's approvals in this chat, and the administrator's list."""
    owned_chat(stores, caller, chat_id)
    return {
        "approvals": stores.approvals.for_user(chat_id, caller.user_id, now_ms),
        "preapproved": stores.approvals.admin_list(),
    }


def revoke(
    stores: Stores,
    caller: Caller,
    chat_id: str,
    kind: str,
    name: str,
    now_ms: int,
    config_version: str | None = None,
) -> None:
    """Revoke one approved site or package, effective from the next turn."""
    owned_chat(stores, caller, chat_id)
    subject = subject_of(kind, name)
    if not stores.approvals.revoke(chat_id, caller.user_id, subject):
        raise errors.UnknownRequest(f"no approval for {kind} {subject.name} in this chat")
    stores.chats.record(
        chat_id,
        "revoked",
        caller.user_id,
        now_ms,
        kind=kind,
        name=subject.name,
        trace_id=caller.trace_id,
        config_version=config_version,
    )


def trail(stores: Stores, caller: Caller, chat_id: str, after: int, limit: int) -> list[AuditEvent]:
    """The chat's audit events numbered above `after`."""
    owned_chat(stores, caller, chat_id)
    return stores.chats.events(chat_id, after=after, limit=limit)


def turns(stores: Stores, caller: Caller, chat_id: str, after: int) -> list[dict[str, Any]]:
    """The chat's saved turns numbered above `after`."""
    owned_chat(stores, caller, chat_id)
    return stores.chats.turns(chat_id, after=after, limit=1000)


def preapprove(stores: Stores, caller: Caller, kind: str, name: str, now_ms: int) -> Subject:
    """Put a site or package on the administrator's list, for every user and chat."""
    _administrator(caller)
    subject = subject_of(kind, name)
    stores.approvals.admin_grant([subject], caller.user_id, now_ms)
    return subject


def remove_preapproval(stores: Stores, caller: Caller, kind: str, name: str) -> Subject:
    """Take a site or package off the administrator's list (effective next turn)."""
    _administrator(caller)
    subject = subject_of(kind, name)
    if not stores.approvals.admin_revoke(subject):
        raise errors.UnknownRequest(f"{kind} {subject.name} is not pre-approved")
    return subject


INBOX_PAGE: Final = 8
"""How many open requests a page of the inbox lists."""


@dataclass(frozen=True, slots=True)
class InboxPage:
    """A page of the caller's open requests, and where the next begins (None: the last)."""

    entries: list[InboxEntry]
    next: str | None


def inbox(
    stores: Stores, caller: Caller, now_ms: int, after: str | None = None, size: int = INBOX_PAGE
) -> InboxPage:
    """A page of the caller's open requests across every chat, newest first, from just
    after `after` (the `next` of the page before). Those past their expiry, which the
    sweeper has not settled yet, are left out.

    Raises:
        InvalidInput: `after` is not a `next` this function gave.
    """
    # One more than a page: whether another follows is known without a second read.
    entries = stores.requests.open_for(caller.user_id, size + 1, _inbox_cursor(after))
    shown, more = entries[:size], len(entries) > size
    following = f"{shown[-1].created_ms}~{shown[-1].chat_id}" if more else None
    return InboxPage([e for e in shown if e.expires_at * 1000 > now_ms], following)


def _inbox_cursor(after: str | None) -> InboxCursor | None:
    """The cursor `inbox` wrote as `<created ms>~<chat>` (no id holds a `~`), checked."""
    if after is None or after == "":
        return None
    created, sep, chat_id = after.partition("~")
    try:
        if sep and created.isascii() and created.isdigit() and len(created) <= 16:
            return int(created), checked_id(chat_id)
    except errors.InvalidInput:
        pass
    raise errors.InvalidInput("page must be the next of an inbox page, as it gave it")


def link_account(
    stores: Stores, caller: Caller, channel: str, external_id: str, link: Link, now_ms: int
) -> Link:
    """Link a channel account to a user, so its taps answer as that user (admin only)."""
    _administrator(caller)
    checked = Link(
        channel=_channel(channel),
        external_id=external_id,
        user_id=checked_id(link.user_id, "userId"),
        roles=frozenset(checked_id(r, "role") for r in link.roles),
        address=link.address,
    )
    stores.channels.link(checked, caller.user_id, now_ms)
    return checked


def unlink_account(stores: Stores, caller: Caller, channel: str, external_id: str) -> Link:
    """Remove a link (admin only); the account's taps are refused from then on."""
    _administrator(caller)
    removed = stores.channels.unlink(_channel(channel), external_id)
    if removed is None:
        raise errors.UnknownRequest(f"no {channel} account {external_id} is linked")
    return removed


def _channel(name: str) -> ChannelName:
    if name not in CHANNELS:
        raise errors.InvalidInput(f"channel must be one of {', '.join(CHANNELS)}")
    return name


def _administrator(caller: Caller) -> None:
    access.require_admin(caller)


def subject_of(kind: str, name: str) -> Subject:
    """A validated subject from a route's `kind` and `name`."""
    if kind == "site":
        return Subject("site", safe_site(name))
    if kind == "package":
        return Subject("package", safe_package(name))
    raise errors.InvalidInput("kind must be 'site' or 'package'")


def _request(stores: Stores, caller: Caller, chat_id: str, now_ms: int) -> RequestRecord:
    request = stores.requests.get(chat_id, now_ms)
    if request is None:
        owned_chat(stores, caller, chat_id)
        raise errors.UnknownRequest("this chat has no request")
    # A rerouted request is also open to the role whose queue it went to.
    access.require_answerer(caller, None, request)
    return request
