"""Channel records: linked accounts, deliveries already seen, and posted cards.

LINK#<channel>#<external id> / LINK        who a channel account acts as
USER#<user> / LINK#<channel>               where that user's cards are posted
DELIVERY#<channel>#<delivery id> / SEEN     a webhook delivery, dropped if seen again
CHAT#<chat> / NOTICE#<interrupt>#<channel> the message that carries a card
"""

from __future__ import annotations

import json
from typing import Any, Final

from interlock import errors, keys
from interlock.adapters.dynamo import (
    DynamoDBClient,
    from_item,
    put_new,
    to_item,
    transact,
    translated,
)
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
            "external_id": _external(link.external_id),
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
                ExpressionAttributeValues=to_item({":pk": keys.user_pk(user_id), ":sk": "LINK#"}),
                ConsistentRead=True,
            )
        return [
            _link(row["sk"].removeprefix("LINK#"), row)
            for row in map(from_item, response.get("Items", []))
        ]

    def first_delivery(self, channel: ChannelName, delivery_id: str, now_ms: int) -> bool:
        """Record a webhook delivery; False when it was seen before (a replay)."""
        item = {
            "pk": f"DELIVERY#{channel}#{_external(delivery_id)}",
            "sk": "SEEN",
            "at_ms": now_ms,
            "ttl": now_ms // 1000 + DELIVERY_MEMORY_S,
        }
        return put_new(self._client, self._table, item, "record delivery")

    def reserve_notice(
        self, chat_id: str, interrupt_id: str, channel: ChannelName, now_ms: int
    ) -> bool:
        """Reserve the one post of an interrupt's card on a channel; False if taken."""
        item = {
            **_notice_key(chat_id, interrupt_id, channel),
            "at_ms": now_ms,
            "ttl": now_ms // 1000 + self._retention_s,
        }
        return put_new(self._client, self._table, item, "reserve notice")

    def save_notice(self, chat_id: str, notice: Notice) -> None:
        """Record where the card was posted, to edit it when the request settles."""
        with translated("save notice"):
            self._client.update_item(
                TableName=self._table,
                Key=to_item(_notice_key(chat_id, notice.interrupt_id, notice.channel)),
                UpdateExpression="SET #ref = :ref",
                ExpressionAttributeNames={"#ref": "ref"},
                ExpressionAttributeValues=to_item({":ref": json.dumps(notice.ref, sort_keys=True)}),
            )

    def notices(self, chat_id: str, interrupt_id: str) -> list[Notice]:
        """The posted cards of an interrupt (reserved but never posted ones are left out)."""
        with translated("read notices"):
            response = self._client.query(
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :sk)",
                ExpressionAttributeValues=to_item(
                    {":pk": keys.chat_pk(chat_id), ":sk": f"NOTICE#{interrupt_id}#"}
                ),
                ConsistentRead=True,
            )
        found = []
        for row in map(from_item, response.get("Items", [])):
            if "ref" in row:
                channel = row["sk"].rsplit("#", 1)[1]
                found.append(Notice(channel, interrupt_id, json.loads(row["ref"])))
        return found


def _external(value: str) -> str:
    text = str(value)
    if not (0 < len(text) <= 128 and text.isascii() and text.isprintable() and "#" not in text):
        raise errors.InvalidInput("a channel id must be 1-128 printable ASCII characters")
    return text


def _link_key(channel: str, external_id: str) -> dict[str, str]:
    return {"pk": f"LINK#{channel}#{_external(external_id)}", "sk": "LINK"}


def _user_key(user_id: str, channel: str) -> dict[str, str]:
    return {"pk": keys.user_pk(user_id), "sk": f"LINK#{channel}"}


def _notice_key(chat_id: str, interrupt_id: str, channel: str) -> dict[str, str]:
    return {"pk": keys.chat_pk(chat_id), "sk": f"NOTICE#{interrupt_id}#{channel}"}


def _link(channel: ChannelName, row: dict[str, Any]) -> Link:
    return Link(
        channel=channel,
        external_id=str(row["external_id"]),
        user_id=str(row["user_id"]),
        roles=frozenset(row.get("roles", [])),
        address=str(row.get("address", "")),
    )
