"""Telling people about cards where they are: post when a request opens, edit the post
when it settles (by any channel, the sweeper or a cancel).

Best effort by design: the request is durable before anything is posted, and a card can
always be answered on the page, so a platform that is down costs a message, never an
answer. Each interrupt is posted at most once per channel (a reserved notice), so a
retried or taken-over run does not post it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from interlock.channels import Channel, ChannelName, Notice, Tap, outcome_text
from interlock.ports import ChannelPort
from interlock.records import RequestRecord

logger = logging.getLogger(__name__)


class Notifier:
    """Posts and settles cards on the configured channels.

    Args:
        store: Links and notices.
        channels: The configured channels, by name.
        now_ms: The clock.
        page_url: The card page's URL, offered in each post, if known.
    """

    def __init__(
        self,
        store: ChannelPort,
        channels: Mapping[ChannelName, Channel],
        now_ms: Callable[[], int],
        page_url: str | None = None,
    ) -> None:
        self._store = store
        self._channels = dict(channels)
        self._now_ms = now_ms
        self._page_url = page_url

    @property
    def channels(self) -> Mapping[ChannelName, Channel]:
        return self._channels

    def opened(self, request: RequestRecord) -> None:
        """Post the request's card to every linked account of its user (and of no one
        else: a rerouted card waits for its role on the page)."""
        if not self._channels:
            return
        try:
            links = self._store.links_of(request.user_id)
            for link in links:
                channel = self._channels.get(link.channel)
                if channel is None or not self._store.reserve_notice(
                    request.chat_id, request.interrupt_id, link.channel, self._now_ms()
                ):
                    continue
                ref = channel.post(link, request, self._page_url)
                notice = Notice(link.channel, request.interrupt_id, ref)
                self._store.save_notice(request.chat_id, notice)
        except Exception as exc:  # a platform's trouble never fails a run
            _failed("post", exc)

    def settled(
        self,
        chat_id: str,
        interrupt_ids: Iterable[str],
        decision: str | None,
        who: str | None,
        source: str,
    ) -> None:
        """Edit every post of the settled interrupts to say how they ended."""
        if not self._channels:
            return
        text = outcome_text(decision, who, self._now_ms() // 1000, _source_name(source))
        try:
            notices = [n for i in interrupt_ids for n in self._store.notices(chat_id, i)]
        except Exception as exc:
            _failed("read notices", exc)
            return
        for notice in notices:
            channel = self._channels.get(notice.channel)
            try:
                if channel is not None:
                    channel.settle(notice.ref, text)
            except Exception as exc:  # one platform down leaves the others edited
                _failed("edit", exc)

    def tell(self, tap: Tap, text: str) -> None:
        """Tell a tapper what became of their tap."""
        channel = self._channels.get(tap.channel)
        try:
            if channel is not None:
                channel.tell(tap, text)
        except Exception as exc:
            _failed("reply", exc)


def _failed(what: str, exc: Exception) -> None:
    # The type only: a platform's error text may quote a URL, and Telegram's carry a token.
    logger.warning("channel %s failed: %s", what, type(exc).__name__)


def _source_name(source: str) -> str:
    return {"slack": "Slack", "telegram": "Telegram", "api": "card page", "sweeper": "timeout"}.get(
        source, source
    )
