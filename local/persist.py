"""Local mode's state on disk, so a restart of `./dev serve` loses nothing.

The embedded emulator keeps everything in memory. After every request that may have
written, the local server saves the table's items and the bucket's objects to one JSON
file (written whole, then renamed, so a kill never leaves half a file); at start it
puts them back. A server killed mid-request restarts from the last request that
finished, as a Lambda function killed mid-run restarts from what it had stored. The
development signing key is kept beside it, so a printed token stays valid.

One server at a time keeps a directory (`hold_state`): a second one would restore the
same cards and then overwrite the first one's chats with its own.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import secrets
from pathlib import Path
from typing import Any, Final

STATE_FILE: Final = "state.json"
KEY_FILE: Final = "dev-key"
LOCK_FILE: Final = "server.lock"


class StateBusy(Exception):
    """Another live process holds the state directory."""


def hold_state(directory: Path) -> int:
    """Take `directory` for this process, for as long as it lives: an exclusive lock on
    its lock file, which the system releases when the process ends, however it ends (a
    `kill -9` too), with this process's id written in it for the next one to name.

    Returns the lock file's descriptor, to be kept open.

    Raises:
        StateBusy: another live process holds it; the message names its pid.
    """
    directory.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(descriptor, 32).decode(errors="replace").strip() or "unknown"
        os.close(descriptor)
        raise StateBusy(
            f"another server (pid {holder}) is serving from {directory}: stop it, or give "
            "this one a state directory of its own (--state)"
        ) from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor


def adopt_shared_state(shared: Path, own: Path) -> bool:
    """Move the state and key an earlier version kept for every agent in `shared` into
    `own`, when `own` has none yet; True when something moved."""
    if not (shared / STATE_FILE).is_file() or (own / STATE_FILE).exists():
        return False
    own.mkdir(parents=True, exist_ok=True)
    for name in (STATE_FILE, KEY_FILE):
        if (shared / name).is_file() and not (own / name).exists():
            (shared / name).replace(own / name)
    return True


class LocalState:
    """The table and bucket of local mode, saved to and restored from `directory`.

    Args:
        directory: Where the state lives (created if missing).
        dynamodb: A boto3 DynamoDB client of the emulator.
        s3: A boto3 S3 client of the emulator.
        table: The table's name.
        bucket: The bucket's name.
    """

    def __init__(self, directory: Path, dynamodb: Any, s3: Any, table: str, bucket: str) -> None:
        self._dir = directory
        self._dynamodb = dynamodb
        self._s3 = s3
        self._table = table
        self._bucket = bucket
        # Objects are written once under keys that name their writer: read each once.
        self._objects: dict[str, tuple[str, str]] = {}

    @property
    def path(self) -> Path:
        return self._dir / STATE_FILE

    def save(self) -> None:
        """Write the whole table and bucket to the state file."""
        items = [
            item
            for page in self._dynamodb.get_paginator("scan").paginate(TableName=self._table)
            for item in page["Items"]
        ]
        listed = {
            entry["Key"]: entry["ETag"]
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket)
            for entry in page.get("Contents", [])
        }
        for key, etag in listed.items():
            if self._objects.get(key, ("", ""))[0] != etag:
                body = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
                self._objects[key] = (etag, base64.b64encode(body).decode())
        objects = {key: self._objects[key][1] for key in listed}
        self._dir.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps({"items": items, "objects": objects}, default=_bytes_out))
        partial.replace(self.path)

    def restore(self) -> int:
        """Put the saved items and objects back; returns how many items there were."""
        if not self.path.is_file():
            return 0
        saved = json.loads(self.path.read_text())
        for item in saved["items"]:
            self._dynamodb.put_item(TableName=self._table, Item=_bytes_in(item))
        for key, body in saved["objects"].items():
            self._s3.put_object(Bucket=self._bucket, Key=key, Body=base64.b64decode(body))
        return len(saved["items"])


# Binary attributes (a request's inline snapshot) in the JSON file.
_BYTES: Final = "$base64"


def _bytes_out(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {_BYTES: base64.b64encode(value).decode()}
    raise TypeError(f"cannot save {type(value).__name__}")


def _bytes_in(value: Any) -> Any:
    """Binary attribute values back to bytes: only where DynamoDB's JSON says binary."""
    if isinstance(value, list):
        return [_bytes_in(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for kind, inner in value.items():
        if kind == "B" and isinstance(inner, dict) and inner.keys() == {_BYTES}:
            out[kind] = base64.b64decode(inner[_BYTES])
        elif kind == "BS" and isinstance(inner, list):
            out[kind] = [base64.b64decode(v[_BYTES]) for v in inner]
        else:
            out[kind] = _bytes_in(inner)
    return out


def dev_key(directory: Path) -> bytes:
    """The development signing key kept in `directory` (made on first use, owner-only)."""
    path = directory / KEY_FILE
    if path.is_file():
        return bytes.fromhex(path.read_text().strip())
    directory.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(key.hex())
    return key
