"""Key builders: tiny pure functions, the only place item and object keys are spelled.

Identifiers that reach a key are validated first, so a chat id can never smuggle a `#`
into another chat's partition or a `/` into another chat's S3 prefix.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final, Literal

from interlock.errors import InvalidInput

SubjectKind = Literal["site", "package"]

ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$"
_ID = re.compile(ID_PATTERN)
REQUEST_SK: Final = "REQUEST"
META_SK: Final = "META"
SLOTS_SK: Final = "SLOTS"
# The pool of a user's open-request slots (`slot_attribute`).
ASK_POOL: Final = "ASK"
OUTBOX_SK: Final = "OUTBOX"
ADMIN_PK: Final = "ADMIN"
SNAPSHOT_PREFIX: Final = "snapshots/"
ANSWER_PREFIX: Final = "answers/"
STEP_PREFIX: Final = "steps/"


def checked_id(value: str, what: str = "id") -> str:
    """Return `value` if it is a safe identifier, else raise `InvalidInput`."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidInput(f"{what} must be 1-128 characters of letters, digits and _.:@+-")
    return value


def chat_pk(chat_id: str) -> str:
    return f"CHAT#{checked_id(chat_id, 'chat id')}"


def user_pk(user_id: str) -> str:
    return f"USER#{checked_id(user_id, 'user id')}"


def user_links_pk(user_id: str) -> str:
    """Where a user's linked chat accounts are listed: a partition of their own, so IAM
    can keep them to the administrators' routes (`dynamodb:LeadingKeys`)."""
    return f"LINKS#{checked_id(user_id, 'user id')}"


def approval_sk(user_id: str, kind: SubjectKind, name: str) -> str:
    return f"{approval_prefix(user_id)}{kind}#{name}"


def approval_prefix(user_id: str) -> str:
    return f"APPROVAL#{checked_id(user_id, 'user id')}#"


def admin_approval_sk(kind: SubjectKind, name: str) -> str:
    return f"APPROVAL#{kind}#{name}"


def turn_sk(seq: int) -> str:
    # Zero-padded so the sort key orders turns numerically.
    return f"TURN#{seq:010d}"


def event_sk(seq: int) -> str:
    # Event numbers are time-ordered (`interlock.adapters.chats.event_number`): 16 digits
    # until the year 2286.
    return f"EVENT#{seq:016d}"


def step_prefix(journal_id: str) -> str:
    """The journal of one answered run: `journal_id` names the claim that recorded the
    answer (`records.journal_of`), so a journal thrown away with its answer is never
    read again."""
    return f"STEP#{checked_id(journal_id, 'journal id')}#"


def step_sk(journal_id: str, seq: int) -> str:
    # Zero-padded so a query returns the steps in the order they were taken.
    return f"{step_prefix(journal_id)}{seq:06d}"


def step_key(chat_id: str, journal_id: str, seq: int, version: str) -> str:
    """Where a journal step too large for its item is kept as an object; `version` is
    the writer's lease token, so a worker that lost its claim writing the same step can
    never overwrite the object the winner's item points at."""
    chat, journal = checked_id(chat_id, "chat id"), checked_id(journal_id, "journal id")
    return f"{STEP_PREFIX}{chat}/{journal}/{seq:06d}.{checked_id(version, 'version')}.json.gz"


def slot_attribute(index: int, pool: str = "SLOT") -> str:
    """One slot of a per-user pool, an attribute of the user's `SLOTS` item: `SLOT`
    (running turns) or `ASK` (open requests), then its number."""
    return f"{pool}{index}"


def outbox_pk(idempotency_key: str) -> str:
    if not idempotency_key or len(idempotency_key) > 512:
        raise InvalidInput("outbox key must be 1-512 characters")
    return f"OUTBOX#{idempotency_key}"


def _object_name(interrupt_id: str) -> str:
    # Interrupt ids carry ':' and a tool-use id chosen by the model; a digest keeps the
    # object key short, safe and still deterministic.
    return hashlib.sha256(interrupt_id.encode()).hexdigest()[:32]


def snapshot_key(chat_id: str, interrupt_id: str, version: str | None = None) -> str:
    """Where a paused run's snapshot lives; `version` is the writer's fence token, so a
    worker that lost its claim can never overwrite the snapshot the winner points at."""
    suffix = f".{version}" if version else ""
    name = _object_name(interrupt_id)
    return f"{SNAPSHOT_PREFIX}{checked_id(chat_id, 'chat id')}/{name}{suffix}.json.gz"


def answer_key(chat_id: str, interrupt_id: str, version: str | None = None) -> str:
    suffix = f".{version}" if version else ""
    name = _object_name(interrupt_id)
    return f"{ANSWER_PREFIX}{checked_id(chat_id, 'chat id')}/{name}{suffix}.json.gz"


# How many index partitions the open requests are spread over (`sweep_shard`).
SWEEP_SHARDS: Final = 8


def sweep_shard(chat_id: str, shards: int) -> str:
    """Spread open requests over a few index partitions, stably per chat."""
    digest = hashlib.sha256(chat_id.encode()).digest()
    return f"OPEN#{digest[0] % shards}"
