"""Approval rows: one per approved site or package, per user and chat, stamped with
the card that created it. An administrator list of pre-approved subjects lives beside
them and is consulted by the same lookup.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from interlock import keys
from interlock.adapters.dynamo import (
    Cancelled,
    ConditionFailed,
    DynamoDBClient,
    batch_get,
    expression,
    from_item,
    to_item,
    translated,
    writes,
)
from interlock.adapters.fencing import fenced
from interlock.errors import StoreError
from interlock.ports import Entry, Role
from interlock.records import Approval, Fence, Subject

_BATCH = 25  # BatchWriteItem's limit
_READ_BATCH = 100  # BatchGetItem's
_FENCED_BATCH = 99  # a transaction holds 100 items, one of them the fence check
_RETRIES = 5


class ApprovalStore:
    """Grant, list, revoke and withdraw approvals.

    Args:
        client: A boto3 DynamoDB client.
        table_name: The Interlock table.
        ttl_s: How long a granted row lives.
    """

    def __init__(self, client: DynamoDBClient, table_name: str, ttl_s: int) -> None:
        self._client = client
        self._table = table_name
        self._ttl_s = ttl_s

    def grant(
        self,
        chat_id: str,
        user_id: str,
        subjects: Iterable[Subject],
        card_id: str,
        now_ms: int,
        fence: Fence | None = None,
    ) -> list[Approval]:
        """Write a row per subject stamped with `card_id` (a re-grant restamps the row).

        With `fence`, the rows are written only while it is held (else `LeaseLost`).
        """
        now_s = now_ms // 1000
        approvals = [
            Approval(s, card_id, user_id, now_s, now_s + self._ttl_s) for s in set(subjects)
        ]
        items = [
            _to_item(
                keys.chat_pk(chat_id), keys.approval_sk(user_id, a.subject.kind, a.subject.name), a
            )
            for a in approvals
        ]
        if fence is not None:
            puts = [{"Put": {"TableName": self._table, "Item": item}} for item in items]
            for start in range(0, len(puts), _FENCED_BATCH):
                fenced(
                    self._client, self._table, fence, puts[start : start + _FENCED_BATCH], "grant"
                )
        else:
            self._write_all(items)
        return sorted(approvals, key=lambda a: (a.subject.kind, a.subject.name))

    def grant_entries(
        self, chat_id: str, user_id: str, subjects: Iterable[Subject], card_id: str, now_ms: int
    ) -> list[Entry]:
        """`grant`'s rows as entries of another write's transaction (a claim's)."""
        now_s = now_ms // 1000
        rows = [
            _to_item(
                keys.chat_pk(chat_id),
                keys.approval_sk(user_id, s.kind, s.name),
                Approval(s, card_id, user_id, now_s, now_s + self._ttl_s),
            )
            for s in sorted(set(subjects), key=lambda s: (s.kind, s.name))
        ]
        return [Entry(Role.GRANT, {"Put": {"TableName": self._table, "Item": r}}) for r in rows]

    def for_user(self, chat_id: str, user_id: str, now_ms: int) -> list[Approval]:
        """The user's live approvals in this chat; rows past their TTL are left out."""
        rows = self._query(keys.chat_pk(chat_id), keys.approval_prefix(user_id))
        return [a for a in rows if a.ttl is None or a.ttl > now_ms // 1000]

    def approved_among(
        self, chat_id: str, user_id: str, subjects: Collection[Subject], now_ms: int
    ) -> frozenset[Subject]:
        """Which of `subjects` the user may fetch or install in this chat: their own row
        or the administrator list's, read by key in one round trip (a tool asks about
        the few subjects it names, never the whole list)."""
        wanted = sorted(set(subjects), key=lambda s: (s.kind, s.name))
        if not wanted:
            return frozenset()
        keyed = [
            (keys.chat_pk(chat_id), keys.approval_sk(user_id, s.kind, s.name)) for s in wanted
        ] + [(keys.ADMIN_PK, keys.admin_approval_sk(s.kind, s.name)) for s in wanted]
        found: set[Subject] = set()
        for start in range(0, len(keyed), _READ_BATCH):
            chunk = [to_item({"pk": pk, "sk": sk}) for pk, sk in keyed[start : start + _READ_BATCH]]
            rows = batch_get(self._client, self._table, chunk, "read approvals")
            live = (_from_item(row) for row in rows)
            found |= {a.subject for a in live if a.ttl is None or a.ttl > now_ms // 1000}
        return frozenset(found)

    def revoke(self, chat_id: str, user_id: str, subject: Subject) -> bool:
        """Delete one row; True if it existed. Effective from the next turn."""
        with translated("revoke approval"):
            response = self._client.delete_item(
                TableName=self._table,
                Key=to_item(
                    {
                        "pk": keys.chat_pk(chat_id),
                        "sk": keys.approval_sk(user_id, subject.kind, subject.name),
                    }
                ),
                ReturnValues="ALL_OLD",
            )
        return "Attributes" in response

    def withdraw_card(
        self, chat_id: str, user_id: str, card_id: str, fence: Fence | None = None
    ) -> int:
        """Delete only the rows stamped with `card_id` (a deny); returns how many.

        Each delete is conditional on the stamp, so a row another card re-granted in
        the meantime survives. With `fence`, rows are deleted only while it is held.
        """
        if fence is not None:
            return self._withdraw_fenced(chat_id, user_id, card_id, fence)
        removed = 0
        for approval in self._query(keys.chat_pk(chat_id), keys.approval_prefix(user_id)):
            if approval.card_id != card_id:
                continue
            sk = keys.approval_sk(user_id, approval.subject.kind, approval.subject.name)
            try:
                with translated("withdraw approval"):
                    self._client.delete_item(
                        TableName=self._table,
                        Key=to_item({"pk": keys.chat_pk(chat_id), "sk": sk}),
                        **expression(condition="#card_id = :card_id", values={":card_id": card_id}),
                    )
                removed += 1
            except ConditionFailed:
                continue
        return removed

    def withdraw_entries(self, chat_id: str, user_id: str, card_id: str) -> list[Entry]:
        """Transaction entries deleting the rows stamped with `card_id`, each only while
        it still carries that stamp (to commit with another write, all or nothing)."""
        stamped = expression(condition="#card_id = :card_id", values={":card_id": card_id})
        return [
            Entry(
                Role.GRANT,
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": to_item({"pk": keys.chat_pk(chat_id), "sk": sk}),
                        **stamped,
                    }
                },
            )
            for sk in self._stamped(chat_id, user_id, card_id)[:_FENCED_BATCH]
        ]

    def _stamped(self, chat_id: str, user_id: str, card_id: str) -> list[str]:
        return [
            keys.approval_sk(user_id, a.subject.kind, a.subject.name)
            for a in self._query(keys.chat_pk(chat_id), keys.approval_prefix(user_id))
            if a.card_id == card_id
        ]

    def _withdraw_fenced(self, chat_id: str, user_id: str, card_id: str, fence: Fence) -> int:
        for _ in range(_RETRIES):
            deletes = self.withdraw_entries(chat_id, user_id, card_id)
            if not deletes:
                return 0
            try:
                fenced(self._client, self._table, fence, writes(deletes), "withdraw approvals")
                return len(deletes)
            except Cancelled:
                continue  # a row was re-stamped by another card since the read: read again
        raise StoreError("withdraw approvals failed: rows kept changing")

    def admin_list(self) -> list[Approval]:
        """The administrator's pre-approved sites and packages."""
        return self._query(keys.ADMIN_PK, "APPROVAL#")

    def admin_grant(self, subjects: Iterable[Subject], by: str, now_ms: int) -> None:
        """Add subjects to the administrator list (no TTL: kept until removed).

        One put each: the list is short, and the requests function may not batch-write.
        """
        for subject in set(subjects):
            sk = keys.admin_approval_sk(subject.kind, subject.name)
            item = _to_item(keys.ADMIN_PK, sk, Approval(subject, None, by, now_ms // 1000))
            with translated("pre-approve"):
                self._client.put_item(TableName=self._table, Item=item)

    def admin_revoke(self, subject: Subject) -> bool:
        """Remove one subject from the administrator list; True if it was there."""
        key = {"pk": keys.ADMIN_PK, "sk": keys.admin_approval_sk(subject.kind, subject.name)}
        with translated("remove pre-approval"):
            response = self._client.delete_item(
                TableName=self._table, Key=to_item(key), ReturnValues="ALL_OLD"
            )
        return "Attributes" in response

    def _query(self, pk: str, prefix: str) -> list[Approval]:
        return [_from_item(row) for row in self._pages(pk, prefix)]

    def _pages(self, pk: str, prefix: str) -> Iterator[dict[str, Any]]:
        paginator = self._client.get_paginator("query")
        with translated("list approvals"):
            for page in paginator.paginate(
                TableName=self._table,
                ConsistentRead=True,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues=to_item({":pk": pk, ":prefix": prefix}),
            ):
                yield from (from_item(item) for item in page.get("Items", []))

    def _write_all(self, items: list[dict[str, Any]]) -> None:
        for start in range(0, len(items), _BATCH):
            batch = [{"PutRequest": {"Item": item}} for item in items[start : start + _BATCH]]
            requests: dict[str, Any] = {self._table: batch}
            for attempt in range(_RETRIES):
                with translated("grant approvals"):
                    response = self._client.batch_write_item(RequestItems=requests)
                requests = response.get("UnprocessedItems") or {}
                if not requests:
                    break
                time.sleep(0.05 * 2**attempt)  # throttled: back off before the rest
            else:
                raise StoreError("grant approvals failed: writes left unprocessed")


def _to_item(pk: str, sk: str, approval: Approval) -> dict[str, Any]:
    return to_item(
        {
            "pk": pk,
            "sk": sk,
            "subject_kind": approval.subject.kind,
            "subject_name": approval.subject.name,
            "card_id": approval.card_id,
            "granted_by": approval.granted_by,
            "granted_at": approval.granted_at,
            "ttl": approval.ttl,
        }
    )


def _from_item(row: dict[str, Any]) -> Approval:
    return Approval(
        subject=Subject(row["subject_kind"], row["subject_name"]),
        card_id=row.get("card_id"),
        granted_by=row["granted_by"],
        granted_at=row["granted_at"],
        ttl=row.get("ttl"),
    )
