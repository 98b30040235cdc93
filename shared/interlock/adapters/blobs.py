"""Snapshots and answers in S3, as gzip-compressed JSON under deterministic keys.

Only the size-checked, compressed bytes are sent; a PUT that returns has been
confirmed, which is what the pause protocol waits for before writing the pointer.
Every snapshot is an object, however small: one path, so one set of crash windows,
and the request's item stays small enough that each write to it is cheap.
"""

from __future__ import annotations

import gzip
import json
import zlib
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from interlock import keys
from interlock.errors import JournalLost, SnapshotLost, SnapshotTooLarge, StoreError
from interlock.records import StoredSnapshot
from interlock.tokens import digest_matches, digest_of

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

    def put_snapshot(
        self,
        chat_id: str,
        interrupt_id: str,
        snapshot: dict[str, Any],
        version: str | None = None,
    ) -> StoredSnapshot:
        """Store a paused agent's snapshot under a key that names the writer's fence;
        returns once S3 confirmed the PUT, with the key and the digest the pointer keeps.

        Raises `SnapshotTooLarge` (nothing written) when over the size limit.
        """
        body = _encode(snapshot)
        if len(body) > self._max_snapshot_bytes:
            raise SnapshotTooLarge(
                f"snapshot of {len(body)} compressed bytes exceeds {self._max_snapshot_bytes}"
            )
        digest = digest_of(body)
        key = keys.snapshot_key(chat_id, interrupt_id, version)
        self._put(key, body)
        return StoredSnapshot(key, len(body), digest)

    def read_snapshot(self, stored: StoredSnapshot) -> dict[str, Any]:
        """Load the snapshot its request points at, checked against the digest the
        request recorded.

        Raises `SnapshotLost` when it is missing, corrupt or not the one recorded.
        """
        if stored.key is None:
            raise SnapshotLost("the paused run's snapshot is gone")
        return self.get_snapshot(stored.key, stored.digest or None)

    def get_snapshot(self, key: str, digest: str | None = None) -> dict[str, Any]:
        """Load a snapshot from S3, checking it against the digest the pointer recorded.

        Raises `SnapshotLost` when it is missing, corrupt or not the one recorded.
        """
        body = self._get_bytes(key)
        if body is None:
            raise SnapshotLost("the paused run's snapshot is gone")
        return _snapshot_of(body, digest)

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

    def put_step(
        self, chat_id: str, journal_id: str, seq: int, entry: str, version: str
    ) -> tuple[str, str]:
        """Store one journal step too large for its item under the writer's `version`
        (its lease token); returns its key and the digest of the stored bytes, for the
        item that points at it."""
        key = keys.step_key(chat_id, journal_id, seq, version)
        body = gzip.compress(entry.encode(), mtime=0)
        self._put(key, body)
        return key, digest_of(body)

    def get_step(self, key: str, digest: str) -> str:
        """A stored journal step, checked against its digest.

        Raises `JournalLost` when it is missing or not the one recorded (a takeover must
        not continue from a step it cannot read, and trying again will not bring it
        back); `StoreError` when S3 could not be read now.
        """
        body = self._get_bytes(key)
        if body is None or not digest_matches(digest, body):
            raise JournalLost("a recorded step of the run is missing or not the one recorded")
        try:
            return gzip.decompress(body).decode()
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
            raise JournalLost("a recorded step of the run cannot be read") from exc

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
        body = self._get_bytes(key)
        if body is None:
            return None
        try:
            return json.loads(gzip.decompress(body))
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            raise StoreError(f"read {key} failed: not gzip JSON") from exc

    def _get_bytes(self, key: str) -> bytes | None:
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=key)
            return bytes(response["Body"].read())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise StoreError(f"read {key} failed: {type(exc).__name__}") from exc
        except BotoCoreError as exc:
            raise StoreError(f"read {key} failed: {type(exc).__name__}") from exc


def _snapshot_of(body: bytes, digest: str | None) -> dict[str, Any]:
    if digest is not None and not digest_matches(digest, body):
        raise SnapshotLost("the paused run's snapshot is not the one that was stored")
    try:
        found = json.loads(gzip.decompress(body))
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise SnapshotLost("the paused run's snapshot cannot be read") from exc
    if not isinstance(found, dict):
        raise SnapshotLost("the paused run's snapshot cannot be read")
    return found


def _encode(value: dict[str, Any]) -> bytes:
    # mtime=0 keeps the bytes deterministic for the same content.
    return gzip.compress(json.dumps(value, separators=(",", ":")).encode(), mtime=0)
