"""Telling people about cards where they are: post when a request opens, edit the post
when it settles (by any channel, the sweeper, a cancel or an expiry).

Each delivery is kept under one key, the interrupt's notice on a channel (`Notice`). A
new request carries a mark that its posts are owed (`notify_due_ms`, written with the
pointer) until they are reserved, so a process that dies in between leaves them to the
finder; a post is reserved before it is sent, so a retried or taken-over run never posts
it again, and an edit is recorded (with its text) before it is sent. One attempt at a
time holds a notice; one that fails is due again later (backing off), one whose process
died is due once its hold runs out, and the finder's pass (`retry`) carries both on
until they are done or the request's own retention (its TTL) ends.

The edit is owed by the write that ends the request: once its posts are reserved the
pointer keeps a flag (`RequestRecord.posted`, set in the write that clears the mark
above), and every ending (a finish, a cancel, an expiry, a chain to the next request, a
run whose snapshot is gone) writes the mark again with it, due `timing.EDIT_HOLD_MS`
later, keeping the pointer in the notice index. The process that ended it records the
edits (`settled`) and clears the mark; should it die first, the finder's pass edits
every post the pointer no longer asks within that hold and one finder interval, never
only at the request's expiry. A posted card also stays due at its request's expiry.

Edits are idempotent, so retrying one is exact. A post is sent at most once per attempt;
the one case an attempt cannot tell apart by itself is a post the platform took whose
record was never written (the process killed with the call in flight or just after it
answered, or the record's write failing). Before such a post is sent again, or its
notice closed once its request ended, the platform is asked for it (`Channel.find`):
Slack finds it by the metadata every card is posted with, and it is adopted (and edited
when its request ended), never posted twice. Telegram's Bot API cannot list a chat's
messages: there the card may show twice (posted again while its request is open), and
only the copy whose reference was recorded is edited. Every copy answers the same
interrupt, and a tap on any is told the truth (answered, and how; no longer answerable,
and why: `respond.screen_tap`), so a copy too many can never act; a card never shown
would leave its person unasked.

A platform that is down never fails a run: the request is durable before anything is
posted, and a card can always be answered on the page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from interlock.channels import (
    Channel,
    ChannelName,
    Link,
    Notice,
    Tap,
    kept_text,
    outcome_text,
    recorded_chosen,
    settled_text,
)
from interlock.ports import ChannelPort, RequestPort
from interlock.records import OPEN_STATES, RequestRecord, RequestState, gave_up
from interlock.timing import CLOCK_SKEW_MS

logger = logging.getLogger(__name__)

# How long one delivery attempt holds its notice: well past the HTTP client's timeout.
ATTEMPT_MS: Final = 30_000
# How long a new request's owed posts are left to the process that opened it.
NOTIFY_HOLD_MS: Final = 60_000
# A failed delivery is due again after this, doubling per try up to `MAX_BACKOFF_MS`.
FIRST_BACKOFF_MS: Final = 60_000
MAX_BACKOFF_MS: Final = 3_600_000


@dataclass
class NoticeReport:
    """What delivering notices did (the finder's pass, or one call).

    Attributes:
        delivered: Posts and edits the platform accepted.
        failed: Attempts that failed; each is due again later.
        abandoned: Notices given up on: their retention ran out first.
    """

    delivered: int = 0
    failed: int = 0
    abandoned: int = 0


class Notifier:
    """Posts and settles cards on the configured channels.

    Args:
        store: Links and notices.
        channels: The configured channels, by name.
        now_ms: The clock.
        page_url: The card page's URL, offered in each post, if known.
        requests: The requests (the finder's retries read them; a new request's mark
            that its posts are owed is cleared there).
    """

    def __init__(
        self,
        store: ChannelPort,
        channels: Mapping[ChannelName, Channel],
        now_ms: Callable[[], int],
        page_url: str | None = None,
        requests: RequestPort | None = None,
    ) -> None:
        self._store = store
        self._channels = dict(channels)
        self._now_ms = now_ms
        self._page_url = page_url
        self._requests = requests

    @property
    def channels(self) -> Mapping[ChannelName, Channel]:
        return self._channels

    def opened(self, request: RequestRecord, report: NoticeReport | None = None) -> None:
        """Post the request's card to every linked account of its user (and of no one
        else: a rerouted card waits for its role on the page)."""
        if not self._channels:
            return
        report = report if report is not None else NoticeReport()
        try:
            posted = False  # a notice is kept for some post of it (reserved here or before)
            for link in self._store.links_of(request.user_id):
                if link.channel not in self._channels:
                    continue
                posted = True
                now = self._now_ms()
                notice = Notice(
                    link.channel,
                    request.interrupt_id,
                    user_id=request.user_id,
                    title=_title(request),
                    # Retried for as long as the request itself is kept.
                    give_up_ms=request.ttl * 1000,
                )
                if self._store.reserve_notice(request.chat_id, notice, now, now + ATTEMPT_MS):
                    self._post(request, link, notice, report)
            # The mark that its posts are owed goes, and the pointer keeps that it has
            # posts (in the same write): the write that ends it then owes their edit.
            if self._requests is not None and (
                request.notify_due_ms is not None or (posted and not request.posted)
            ):
                self._requests.notified(
                    request.chat_id, request.interrupt_id, posted=posted, now_ms=self._now_ms()
                )
        except Exception as exc:  # a platform's or the table's trouble never fails a run
            _failed("post", exc)

    def settled(
        self,
        chat_id: str,
        interrupt_ids: Iterable[str],
        decision: str | None,
        who: str | None,
        source: str,
        chosen: str = "",
    ) -> None:
        """Edit every post of the settled interrupts to say how they ended and, above
        that, what was chosen (`chosen`: `channels.chosen_text` of the answers the
        ending recorded, which its caller holds, so saying it costs no read).

        Each edit is recorded on its notice (with its text) before any is sent; then the
        mark the ending wrote that they are owed is cleared (one write, only when some
        edit was recorded), so the finder never looks at a request edited here."""
        if not self._channels:
            return
        ids = frozenset(interrupt_ids)
        outcome = outcome_text(decision, who, self._now_ms() // 1000, _source_name(source))
        text = _with_chosen(chosen, outcome)
        try:
            notices = [n for i in sorted(ids) for n in self._store.notices(chat_id, i)]
            marked = [
                settled
                for notice in notices
                if not notice.done
                and (settled := self._store.settle_notice(chat_id, notice, text, self._now_ms()))
                is not None
            ]
            if marked and self._requests is not None:
                self._requests.edits_recorded(chat_id, ids)
            for notice in marked:
                self._edit(chat_id, notice, NoticeReport())
        except Exception as exc:
            _failed("edit", exc)

    def retry(self, chat_id: str) -> NoticeReport:
        """Carry on the chat's notices that are due: a post or an edit that failed or
        was interrupted, and a post whose request ended without its edit.

        A pointer marked due (`RequestRecord.notify_due_ms`) owes more: an open one its
        own posts (its process died before it reserved them), and either one the edit of
        every post of an interrupt it no longer asks (the write that ended that request
        owed it, and its process died before it recorded the edit). The mark of an ended
        pointer is cleared once every such edit is recorded; until then it stays due."""
        report = NoticeReport()
        if not self._channels:
            return report
        now = self._now_ms()
        request = self._requests.get(chat_id, now) if self._requests is not None else None
        marked = (
            request is not None
            and request.notify_due_ms is not None
            and request.notify_due_ms <= now
        )
        if marked and request is not None and request.state in OPEN_STATES:
            self.opened(request, report)  # its process died before it reserved the posts
        left = False  # an owed edit not recorded by this pass
        for notice in self._store.notices(chat_id):
            if notice.done:
                continue
            owed = marked and not _asks(request, notice)
            if owed and notice.in_flight(now):
                left = True  # its attempt finishes it, or lapses and is due then
                continue
            if not owed and (notice.due_ms is None or notice.due_ms > now):
                continue
            try:
                self._carry_on(chat_id, notice, now, report, request)
            except Exception as exc:  # one notice's trouble leaves the others to do
                _failed("retry", exc)
                report.failed += 1
                left = left or owed
        ended = request is not None and request.state not in OPEN_STATES
        if marked and ended and not left and request is not None and self._requests is not None:
            self._requests.edits_recorded(chat_id, request.interrupt_ids)
        return report

    def tell(self, tap: Tap, text: str) -> None:
        """Tell a tapper what became of their tap."""
        channel = self._channels.get(tap.channel)
        try:
            if channel is not None:
                channel.tell(tap, text)
        except Exception as exc:
            _failed("reply", exc)

    def _carry_on(
        self,
        chat_id: str,
        notice: Notice,
        now: int,
        report: NoticeReport,
        request: RequestRecord | None,
    ) -> None:
        # `request` is the chat's pointer as `retry` read it, once for all its notices.
        if now >= notice.give_up_ms:
            self._store.finish_notice(chat_id, notice, now)
            report.abandoned += 1
            logger.warning("channel notice abandoned: its retention ran out")
            return
        if notice.edit_text is not None:
            self._edit(chat_id, notice, report)
            return
        open_here = _asks(request, notice)
        if notice.ref is None:
            taken = self._store.begin_notice(chat_id, notice, now, now + ATTEMPT_MS)
            if taken is None:
                return
            link = self._link(taken, request)
            try:
                # An earlier attempt may have posted it and died before its record: found
                # again (where the platform allows it), it is adopted, not posted twice.
                found = self._found(chat_id, link, taken)
            except Exception as exc:
                self._retry_later(chat_id, taken, "lookup", exc, report)
                return
            if found is not None:
                watch = _watch_ms(request) if open_here and request is not None else now
                after = self._store.posted_notice(chat_id, taken, found, watch, now)
                if after.edit_text is not None:
                    self._edit(chat_id, after, report)
                elif not open_here:
                    self._ended(chat_id, after, now, report, request)
                return
            if not open_here or request is None:
                self._store.finish_notice(chat_id, taken, now)  # nothing left to ask
                return
            if link is None:  # unlinked since: nobody to post to
                self._store.finish_notice(chat_id, taken, now)
                return
            self._post(request, link, taken, report)
            return
        if open_here and request is not None:
            # Still open (rerouted with more time, or reset to be answered again): watch on.
            self._store.retry_notice(chat_id, notice, _watch_ms(request))
            return
        self._ended(chat_id, notice, now, report, request)

    def _ended(
        self,
        chat_id: str,
        notice: Notice,
        now: int,
        report: NoticeReport,
        request: RequestRecord | None,
    ) -> None:
        # It ended without its edit: say how, as far as the pointer still knows.
        text = _ended_text(request, notice)
        marked = self._store.settle_notice(chat_id, notice, text, now)
        if marked is not None:
            self._edit(chat_id, marked, report)

    def _link(self, notice: Notice, request: RequestRecord | None) -> Link | None:
        """The linked account `notice` is posted to (None once unlinked)."""
        user = notice.user_id or (request.user_id if request is not None else "")
        if not user:
            return None
        return next((x for x in self._store.links_of(user) if x.channel == notice.channel), None)

    def _found(self, chat_id: str, link: Link | None, notice: Notice) -> dict[str, Any] | None:
        """The message an earlier attempt at `notice`'s post sent, if the platform finds
        it again (`Channel.find`): only a notice whose attempt began before this one
        (`tries`) may have one. Raises what the lookup raised (retried later)."""
        channel = self._channels.get(notice.channel)
        if channel is None or link is None or notice.tries <= 1:
            return None
        return channel.find(link, chat_id, notice)

    def _post(
        self, request: RequestRecord, link: Link, notice: Notice, report: NoticeReport
    ) -> None:
        """Send the post `notice` holds the attempt of; on success, watch it."""
        channel = self._channels[notice.channel]
        try:
            ref = channel.post(link, request, self._page_url)
        except Exception as exc:
            self._retry_later(request.chat_id, notice, "post", exc, report)
            return
        report.delivered += 1
        now = self._now_ms()
        after = self._store.posted_notice(request.chat_id, notice, ref, _watch_ms(request), now)
        if after.edit_text is not None:  # it settled while the post was in flight
            self._edit(request.chat_id, after, report)

    def _edit(self, chat_id: str, notice: Notice, report: NoticeReport) -> None:
        """Take an attempt at the edit `notice` records and send it."""
        now = self._now_ms()
        taken = self._store.begin_notice(chat_id, notice, now, now + ATTEMPT_MS)
        if taken is None:
            return  # an attempt in flight (the post, say) finishes it or lapses into a retry
        if taken.ref is None:
            try:
                found = self._found(chat_id, self._link(taken, None), taken)
            except Exception as exc:
                self._retry_later(chat_id, taken, "lookup", exc, report)
                return
            if found is None:
                # Never posted (or not to be found again), and now never will be (its
                # request ended): nothing to edit.
                self._store.finish_notice(chat_id, taken, now)
                return
            # Posted by an attempt that died before its record: edit that message.
            self._edit(chat_id, self._store.posted_notice(chat_id, taken, found, now, now), report)
            return
        channel = self._channels.get(taken.channel)
        if channel is None:
            self._store.retry_notice(chat_id, taken, now + MAX_BACKOFF_MS)
            return
        try:
            channel.settle(taken.ref, settled_text(taken.title, taken.edit_text or ""))
        except Exception as exc:
            self._retry_later(chat_id, taken, "edit", exc, report)
            return
        report.delivered += 1
        self._store.finish_notice(chat_id, taken, self._now_ms())

    def _retry_later(
        self, chat_id: str, notice: Notice, what: str, exc: Exception, report: NoticeReport
    ) -> None:
        _failed(what, exc)
        report.failed += 1
        backoff = min(FIRST_BACKOFF_MS * 2 ** max(notice.tries - 1, 0), MAX_BACKOFF_MS)
        self._store.retry_notice(chat_id, notice, self._now_ms() + backoff)


def _asks(request: RequestRecord | None, notice: Notice) -> bool:
    """Whether the chat's pointer, `request`, is open on the interrupt `notice` carries."""
    return (
        request is not None
        and request.state in OPEN_STATES
        and notice.interrupt_id in request.interrupt_ids
    )


def _title(request: RequestRecord) -> str:
    # What the post asks and the facts it shows: kept above the outcome once it settled.
    return kept_text(request)


def _watch_ms(request: RequestRecord) -> int:
    # Due when its request is past its expiry by every clock, as the finder settles it
    # (`RequestRecord.overdue`): then it has settled, and its card needs its edit.
    return request.expires_at * 1000 + CLOCK_SKEW_MS


def _ended_text(request: RequestRecord | None, notice: Notice) -> str:
    if request is None or notice.interrupt_id not in request.interrupt_ids:
        return outcome_text(None, None, None, "")  # "Settled": the chat has moved on
    if (cause := gave_up(request)) is not None:
        return outcome_text("given_up", None, None, cause)  # not the answer it never ran
    decision = {
        RequestState.CANCELLED: "cancelled",
        RequestState.EXPIRED: "expired",
    }.get(request.state, request.decision)
    at_ms = request.decided_at_ms or (request.answered_at or 0) * 1000
    outcome = outcome_text(
        decision, request.decided_by, at_ms // 1000 or None, _source_name(request.decided_via or "")
    )
    # What was chosen, from the answer the pointer recorded: only a request carried
    # through says one (a cancelled or expired one never acted on what it recorded).
    done = request.state is RequestState.DONE
    return _with_chosen(recorded_chosen(request) if done else "", outcome)


def _with_chosen(chosen: str, outcome: str) -> str:
    """A settled card's last lines: what was chosen, then how it ended (the outcome is
    always the last line, as `channels.settled_lines` reads it)."""
    return f"{chosen}\n{outcome}" if chosen else outcome


def _failed(what: str, exc: Exception) -> None:
    # The type only: a platform's error text may quote a URL, and Telegram's carry a token.
    logger.warning("channel %s failed: %s", what, type(exc).__name__)


def _source_name(source: str) -> str:
    return {
        "slack": "Slack",
        "telegram": "Telegram",
        "api": "card page",
        "sweeper": "timeout",
        "recovery": "after an interruption",
    }.get(source, source)
