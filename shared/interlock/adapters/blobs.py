"""Snapshots and answers in S3, as gzip-compressed JSON under deterministic keys.

Only the size-checked, compressed bytes are sent; a PUT that returns has been
confirmed, which is what the pause protocol waits for before writing the pointer.
"""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from interlock import keys
from interlock.errors import SnapshotTooLarge, StoreError

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client
else:
    S3Client = Any


class BlobStore:
    """Reads and writes the bucket's JSON objects.

    Args:
        client: A boto3 S3 client.
        bucket: The Interlock bucket.
        max_snapshot_bytes: Largest compressed snapshot accepted.
    """

    def __init__(self, client: S3Client, bucket: str, max_snapshot_bytes: int) -> None:
        self._client = client
        self._bucket = bucket
        self._max_snapshot_bytes = max_snapshot_bytes

    def put_snapshot(self, chat_id: str, interrupt_id: str, snapshot: dict[str, Any]) -> int:
        """Store a paused agent's snapshot under its deterministic key; returns its size.

        Raises `SnapshotTooLarge` (nothing written) when over the size limit.
        """
        body = _encode(snapshot)
        if len(body) > self._max_snapshot_bytes:
            raise SnapshotTooLarge(
                f"snapshot of {len(body)} compressed bytes exceeds {self._max_snapshot_bytes}"
            )
        self._put(keys.snapshot_key(chat_id, interrupt_id), body)
        return len(body)

    def get_snapshot(self, key: str) -> dict[str, Any]:
        """Load a snapshot; a missing one is a store error (the resume cannot proceed)."""
        found = self._get(key)
        if found is None:
            raise StoreError("the paused run's snapshot is gone")
        return dict(found)

    def put_answer(
        self, chat_id: str, interrupt_id: str, answer: dict[str, Any], version: str | None = None
    ) -> str:
        """Store the final answer of a resumed run; returns its key.

        `version` (the claim's lease token) keeps two workers' answers apart.
        """
        key = keys.answer_key(chat_id, interrupt_id, version)
        self._put(key, _encode(answer))
        return key

    def get_answer(self, key: str) -> dict[str, Any] | None:
        """The stored answer, or None if it has aged out."""
        found = self._get(key)
        return dict(found) if found is not None else None

    def _put(self, key: str, body: bytes) -> None:
        try:
            self._client.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=body,
                ContentType="application/json",
                ContentEncoding="gzip",
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError(f"write {key} failed: {type(exc).__name__}") from exc

    def _get(self, key: str) -> Any:
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=key)
            return json.loads(gzip.decompress(response["Body"].read()))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise StoreError(f"read {key} failed: {type(exc).__name__}") from exc
        except BotoCoreError as exc:
            raise StoreError(f"read {key} failed: {type(exc).__name__}") from exc


def _encode(value: dict[str, Any]) -> bytes:
    # mtime=0 keeps the bytes deterministic for the same content.
    return gzip.compress(json.dumps(value, separators=(",", ":")).encode(), mtime=0)
