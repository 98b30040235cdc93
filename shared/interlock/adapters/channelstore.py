"""Channel records: linked accounts, deliveries already seen, and posted cards.

LINK#<channel>#<external id> / LINK        who a channel account acts as
LINKS#<user> / LINK#<channel>              where that user's cards are posted
DELIVERY#<channel>#<delivery id> / SEEN     a webhook delivery, dropped if seen again
CHAT#<chat> / NOTICE#<interrupt>#<channel> the message that carries a card: its post
                                           and its edit, each delivered once, and
                                           in the sparse notice index while one is due
"""

from __future__ import annotations

import json
from typing import Any, Final

from interlock import errors, keys
from interlock.adapters.dynamo import (
    ConditionFailed,
    DynamoDBClient,
    chats_due,
    expression,
    from_item,
    put_new,
    to_item,
    transact,
    translated,
)
from interlock.adapters.schema import NOTICE_INDEX, NOTICE_INDEX_SORT, SWEEP_SHARDS
from interlock.channels import ChannelName, Link, Notice

# Platforms retry a delivery for minutes, not days: a day of memory is plenty.
DELIVERY_MEMORY_S: Final = 24 * 3600


class ChannelStore:
    """Links, deliveries and notices in the Interlock table.

    Args:
        client: A boto3 DynamoDB client.
        table_name: The Interlock table.
        retention_s: How long a notice is kept (its `ttl`).
    """

    def __init__(self, client: DynamoDBClient, table_name: str, retention_s: int) -> None:
        self._client = client
        self._table = table_name
        self._retention_s = retention_s

    def link(self, link: Link, by: str, now_ms: int) -> None:
        """Link a channel account to a user (replacing the user's earlier account on
        that channel, and the account's earlier user), both ways at once."""
        body = {
            "user_id": keys.checked_id(link.user_id, "user id"),
            "external_id": checked_external(link.external_id),
            "roles": sorted(link.roles),
            "address": link.address,
            "linked_by": by,
            "at_ms": now_ms,
        }
        earlier = self.links_of(link.user_id)
        stale = [
            old
            for old in earlier
            if old.channel == link.channel and old.external_id != link.external_id
        ]
        before = self.linked(link.channel, link.external_id)
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item({**_link_key(link.channel, link.external_id), **body}),
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item({**_user_key(link.user_id, link.channel), **body}),
                }
            },
        ]
        items += [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": to_item(_link_key(o.channel, o.external_id)),
                }
            }
            for o in stale
        ]
        if before is not None and before.user_id != link.user_id:
            items.append(
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": to_item(_user_key(before.user_id, link.channel)),
                    }
                }
            )
        transact(self._client, items, "link account")

    def unlink(self, channel: ChannelName, external_id: str) -> Link | None:
        """Remove a link, both ways; returns what it was."""
        before = self.linked(channel, external_id)
        if before is None:
            return None
        transact(
            self._client,
            [
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": to_item(_link_key(channel, external_id)),
                    }
                },
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": to_item(_user_key(before.user_id, channel)),
                    }
                },
            ],
            "unlink account",
        )
        return before

    def linked(self, channel: ChannelName, external_id: str) -> Link | None:
        """Who a channel account acts as, if anyone."""
        with translated("read link"):
            response = self._client.get_item(
                TableName=self._table,
                Key=to_item(_link_key(channel, external_id)),
                ConsistentRead=True,
            )
        item = response.get("Item")
        return _link(channel, from_item(item)) if item else None

    def links_of(self, user_id: str) -> list[Link]:
        """Every channel account linked to a user."""
        with translated("read user links"):
            response = self._client.query(
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :sk)",
                ExpressionAttributeValues=to_item(
                    {":pk": keys.user_links_pk(user_id), ":sk": "LINK#"}
                ),
                ConsistentRead=True,
            )
        return [
            _link(row["sk"].removeprefix("LINK#"), row)
            for row in map(from_item, response.get("Items", []))
        ]

    def first_delivery(self, channel: ChannelName, delivery_id: str, now_ms: int) -> bool:
        """Record a webhook delivery; False when it was seen before (a replay)."""
        item = {
            "pk": f"DELIVERY#{channel}#{checked_external(delivery_id)}",
            "sk": "SEEN",
            "at_ms": now_ms,
            "ttl": now_ms // 1000 + DELIVERY_MEMORY_S,
        }
        return put_new(self._client, self._table, item, "record delivery")

    def reserve_notice(self, chat_id: str, notice: Notice, now_ms: int, until_ms: int) -> bool:
        """Reserve the one post of an interrupt's card on a channel, as its first
        attempt (held until `until_ms`); False if it was reserved before.

        The reservation is due at `until_ms`: should this attempt never end (its process
        died), the finder picks the post up then.
        """
        item = {
            **_notice_key(chat_id, notice.interrupt_id, notice.channel),
            "user_id": notice.user_id,
            "title": notice.title or None,
            "tries": 1,
            "attempt_until_ms": until_ms,
            "give_up_ms": notice.give_up_ms,
            NOTICE_INDEX_SORT: until_ms,
            "sweep_shard": keys.sweep_shard(chat_id, SWEEP_SHARDS),
            "at_ms": now_ms,
            # Kept at least as long as it may be retried.
            "ttl": max(now_ms // 1000 + self._retention_s, notice.give_up_ms // 1000),
        }
        return put_new(self._client, self._table, item, "reserve notice")

    def notices(self, chat_id: str, interrupt_id: str | None = None) -> list[Notice]:
        """The notices of one interrupt, or of every interrupt of the chat."""
        prefix = f"NOTICE#{interrupt_id}#" if interrupt_id is not None else "NOTICE#"
        with translated("read notices"):
            response = self._client.query(
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :sk)",
                ExpressionAttributeValues=to_item({":pk": keys.chat_pk(chat_id), ":sk": prefix}),
                ConsistentRead=True,
            )
        return [_notice(row) for row in map(from_item, response.get("Items", []))]

    def due_notices(self, shard: str, now_ms: int, limit: int) -> list[str]:
        """Chat ids with a notice due by `now_ms` (a delivery to retry, or a post whose
        request may have ended unseen), in one shard of the sparse notice index."""
        return chats_due(
            self._client,
            self._table,
            NOTICE_INDEX,
            NOTICE_INDEX_SORT,
            shard,
            now_ms,
            limit,
            "find due notices",
        )

    def begin_notice(
        self, chat_id: str, notice: Notice, now_ms: int, until_ms: int
    ) -> Notice | None:
        """Take the next delivery attempt (held until `until_ms`, and due then should it
        never end); None while another attempt holds it or nothing is left to do."""
        return self._update(
            chat_id,
            notice,
            "begin notice",
            "SET #attempt_until_ms = :until, #due = :until, #tries = #tries + :one",
            "attribute_exists(#pk) AND attribute_not_exists(#done_ms)"
            # No clock margin: an attempt's hold (`notify.ATTEMPT_MS`) outlasts its HTTP
            # call's timeout by more than `timing.CLOCK_SKEW_MS`, and an edit is idempotent.
            " AND (attribute_not_exists(#attempt_until_ms) OR #attempt_until_ms < :now)",
            {":until": until_ms, ":one": 1, ":now": now_ms},
        )

    def posted_notice(
        self, chat_id: str, notice: Notice, ref: dict[str, Any], watch_ms: int, now_ms: int
    ) -> Notice:
        """Record where the card was posted, and watch it until `watch_ms` (its
        request's expiry). If the request settled while the post was in flight, the edit
        is due at once instead: the returned notice then carries its `edit_text`."""
        values = {":ref": json.dumps(ref, sort_keys=True)}
        watched = self._update(
            chat_id,
            notice,
            "save notice",
            "SET #ref = :ref, #due = :watch REMOVE #attempt_until_ms",
            "attribute_exists(#pk) AND attribute_not_exists(#edit_text)",
            {**values, ":watch": watch_ms},
        )
        if watched is not None:
            return watched
        settled = self._update(
            chat_id,
            notice,
            "save notice",
            "SET #ref = :ref, #due = :now REMOVE #attempt_until_ms",
            "attribute_exists(#pk)",
            {**values, ":now": now_ms},
        )
        if settled is None:
            raise errors.StoreError("save notice failed: the notice is gone")
        return settled

    def settle_notice(self, chat_id: str, notice: Notice, text: str, now_ms: int) -> Notice | None:
        """Record how the card ends, due for its edit now; None if nothing is left to
        deliver (it was edited, or never posted and closed)."""
        return self._update(
            chat_id,
            notice,
            "settle notice",
            "SET #edit_text = :text, #due = :now",
            "attribute_exists(#pk) AND attribute_not_exists(#done_ms)",
            {":text": text, ":now": now_ms},
        )

    def retry_notice(self, chat_id: str, notice: Notice, due_ms: int) -> None:
        """End the attempt in flight without delivering; due again at `due_ms`."""
        self._update(
            chat_id,
            notice,
            "retry notice",
            "SET #due = :due REMOVE #attempt_until_ms",
            "attribute_exists(#pk) AND attribute_not_exists(#done_ms)",
            {":due": due_ms},
        )

    def finish_notice(self, chat_id: str, notice: Notice, now_ms: int) -> None:
        """Nothing more to deliver: the card was edited (or needs no post or edit)."""
        self._update(
            chat_id,
            notice,
            "finish notice",
            "SET #done_ms = :now REMOVE #attempt_until_ms, #due, #sweep_shard",
            "attribute_exists(#pk)",
            {":now": now_ms},
        )

    def _update(
        self,
        chat_id: str,
        notice: Notice,
        action: str,
        update: str,
        condition: str,
        values: dict[str, Any],
    ) -> Notice | None:
        try:
            with translated(action):
                response = self._client.update_item(
                    TableName=self._table,
                    Key=to_item(_notice_key(chat_id, notice.interrupt_id, notice.channel)),
                    ReturnValues="ALL_NEW",
                    **expression(
                        condition=condition,
                        update=update,
                        values=values,
                        names={"#due": NOTICE_INDEX_SORT},
                    ),
                )
        except ConditionFailed:
            return None
        return _notice(from_item(response["Attributes"]))


def checked_external(value: str) -> str:
    """A channel account or delivery id as a key may hold it; else `InvalidInput`."""
    text = str(value)
    if not (0 < len(text) <= 128 and text.isascii() and text.isprintable() and "#" not in text):
        raise errors.InvalidInput("a channel id must be 1-128 printable ASCII characters")
    return text


def _link_key(channel: str, external_id: str) -> dict[str, str]:
    return {"pk": f"LINK#{channel}#{checked_external(external_id)}", "sk": "LINK"}


def _user_key(user_id: str, channel: str) -> dict[str, str]:
    return {"pk": keys.user_links_pk(user_id), "sk": f"LINK#{channel}"}


def _notice_key(chat_id: str, interrupt_id: str, channel: str) -> dict[str, str]:
    return {"pk": keys.chat_pk(chat_id), "sk": f"NOTICE#{interrupt_id}#{channel}"}


def _notice(row: dict[str, Any]) -> Notice:
    _, interrupt_id, channel = row["sk"].rsplit("#", 2)
    return Notice(
        channel=channel,
        interrupt_id=interrupt_id,
        ref=json.loads(row["ref"]) if "ref" in row else None,
        user_id=str(row.get("user_id", "")),
        edit_text=row.get("edit_text"),
        done="done_ms" in row,
        tries=int(row.get("tries", 0)),
        attempt_until_ms=row.get("attempt_until_ms"),
        give_up_ms=int(row.get("give_up_ms", 0)),
        due_ms=row.get(NOTICE_INDEX_SORT),
        title=str(row.get("title", "")),
        reserved_ms=int(row.get("at_ms", 0)),
    )


def _link(channel: ChannelName, row: dict[str, Any]) -> Link:
    return Link(
        channel=channel,
        external_id=str(row["external_id"]),
        user_id=str(row["user_id"]),
        roles=frozenset(row.get("roles", [])),
        address=str(row.get("address", "")),
    )
