"""Small shared pieces of every DynamoDB adapter: item codec, error translation, sizes.

AWS errors are translated here, once: a failed condition becomes `ConditionFailed`
(carrying the old item when DynamoDB returned it), anything else a `StoreError`.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, TypeVar

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from interlock.adapters.merging import grouped, kind_of, merged
from interlock.errors import StoreError
from interlock.ports import Entry, EntryRefused

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
else:
    DynamoDBClient = Any

__all__ = [
    "Cancelled",
    "ConditionFailed",
    "DynamoDBClient",
    "best_effort",
    "chats_due",
    "expression",
    "from_item",
    "item_size",
    "put_new",
    "to_item",
    "transact",
    "translated",
]

# The key `best_effort` adds to an entry; never sent.
BEST_EFFORT: Final = "InterlockBestEffort"
# The key `judged` adds to an entry: whether the item as it stood refuses it; never sent.
REFUSED_BY: Final = "InterlockRefusedBy"
MARKS: Final = (BEST_EFFORT, REFUSED_BY)  # what `transact` reads and never sends
# Marks an audit event's `Put` whose number its chat's counter gives at write time
# (`interlock.adapters.numbering`); the value is the chat id.
EVENT: Final = "InterlockEvent"
_serializer = TypeSerializer()
_deserializer = TypeDeserializer()
logger = logging.getLogger(__name__)
# Writes that meet a transaction in flight on their item (a run's parallel tools all
# check the claim's item; every transition of a user's turns writes the user's item)
# come in bursts: back off exponentially, with jitter, for up to about a second in all.
_CONFLICT_ATTEMPTS: Final = 6
T = TypeVar("T")


class ConditionFailed(Exception):
    """A conditional write lost; `old` is the item as it stood, when returned."""

    def __init__(self, old: dict[str, Any] | None) -> None:
        super().__init__("conditional check failed")
        self.old = old


class Cancelled(Exception):
    """A transaction was cancelled by a failed condition.

    `failed` maps the index of each item whose condition failed to the item as it stood
    (None when DynamoDB returned no item), so the caller can tell which rule lost.
    """

    def __init__(self, failed: dict[int, dict[str, Any] | None]) -> None:
        super().__init__(f"transaction cancelled by items {sorted(failed)}")
        self.failed = failed


def writes(entries: Iterable[Entry] | None) -> list[dict[str, Any]]:
    """The TransactWriteItems entries of `entries` (another store's writes)."""
    return [entry.write for entry in entries or ()]


def entry_refused(entries: Sequence[Entry], cancelled: Cancelled, before: int) -> EntryRefused:
    """The refusal of a transaction whose own `before` items all held: it names the role
    of the first of `entries` (sent after them) that lost its condition."""
    return EntryRefused(entries[min(cancelled.failed) - before].role)


def judged(entry: dict[str, Any], refuses: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Mark a transaction entry with what its condition says in Python: given the item
    as it stood (plain values), whether it refuses. When the entry shares its item with
    others (`merging`) and that item refuses the joined entry, only the parts it refuses
    are reported as lost."""
    return {**entry, REFUSED_BY: refuses}


def best_effort(entry: dict[str, Any]) -> dict[str, Any]:
    """Mark a transaction entry as riding along: if only such entries lose their
    condition, the transaction is written once more without them (see `transact`)."""
    return {**entry, BEST_EFFORT: True}


def transact(
    client: DynamoDBClient,
    items: list[dict[str, Any]],
    action: str,
    *,
    read_back: Collection[int] = (0,),
) -> None:
    """Write `items` (TransactWriteItems entries) all or nothing.

    A failed condition raises `Cancelled` naming the items that lost, with their old
    values for the entries in `read_back` (by default the first: the change the
    transaction is about; the others' old values are not asked for, nor sent back);
    anything else is a `StoreError`. Entries marked `best_effort` (bookkeeping such as
    giving a slot back) never cost the write: when only they lose, the rest is written
    without them. Entries that write one item go out as one (`merging`). When such an
    entry loses, its parts' judges (`judged`) tell which lost, from the item as it
    stood: a part that must hold fails the call, a best-effort part is left out. When
    they cannot tell, its best-effort parts are left out, and once the rest is written
    each is tried on its own, so its own condition still decides.
    """
    if any(EVENT in item for item in items):
        from interlock.adapters.numbering import counted_transact

        # Audit events are numbered by their chat's counter as the write goes out.
        return counted_transact(
            lambda numbered: transact(client, numbered, action, read_back=read_back), items
        )
    optional = {i for i, item in enumerate(items) if item.get(BEST_EFFORT)}
    judges = {i: item[REFUSED_BY] for i, item in enumerate(items) if REFUSED_BY in item}
    entries = [{k: v for k, v in item.items() if k not in MARKS} for item in items]
    groups = grouped(entries)
    # A shared entry's old item tells which of its parts lost: always ask for it.
    wanted = set(read_back) | {i for g in groups if len(g) > 1 for i in g}
    entries = [_reading_back(item) if i in wanted else item for i, item in enumerate(entries)]
    kept = set(range(len(entries)))  # the caller's indexes of what is still sent
    alone: list[int] = []  # best-effort parts left out of a shared entry, tried after
    while True:
        sent = [parts for parts in ([i for i in g if i in kept] for g in groups) if parts]
        if not sent:
            break  # only best-effort entries were asked for, and all of them lost
        try:
            _transact(client, [_joined(entries, parts) for parts in sent], action)
            break
        except Cancelled as cancelled:
            lost = [(sent[i], old) for i, old in cancelled.failed.items()]
            told = [(parts, old, _refused(parts, old, judges)) for parts, old in lost]
            # An entry told apart lost by the parts it names; one that cannot be told
            # apart lost by a part that must hold only if it has nothing to leave out.
            hard: dict[int, dict[str, Any] | None] = {}
            for parts, old, refused in told:
                if refused is not None:
                    hard |= {i: old for i in refused if i not in optional}
                elif optional.isdisjoint(parts):
                    hard |= {i: old for i in parts}
            if hard:
                raise Cancelled(hard) from None  # indexes as the caller numbered them
            # Only best-effort parts lost, or may have: leave those out (what else an
            # entry holds may still hold). One left out of a shared entry without
            # knowing whether it lost is tried on its own once the rest is written.
            for parts, _, refused in told:
                left_out = [i for i in (parts if refused is None else refused) if i in optional]
                kept -= set(left_out)
                if refused is None and len(parts) > 1:
                    alone += left_out
    for i in alone:
        _try_alone(client, entries[i])


def _refused(
    parts: list[int],
    old: dict[str, Any] | None,
    judges: Mapping[int, Callable[[dict[str, Any]], bool]],
) -> list[int] | None:
    """Which `parts` of an entry that lost refuse the item as it stood: a lone entry's
    one part (its own condition lost); for a shared entry, the parts its judges name, or
    None when that cannot be told (its old item did not come back, a part has no judge,
    or no judge says it refused)."""
    if len(parts) == 1:
        return parts
    if old is None or any(i not in judges for i in parts):
        return None
    return [i for i in parts if judges[i](old)] or None


def _joined(entries: Sequence[dict[str, Any]], parts: list[int]) -> dict[str, Any]:
    return entries[parts[0]] if len(parts) == 1 else merged([entries[i] for i in parts])


def _try_alone(client: DynamoDBClient, entry: dict[str, Any]) -> None:
    """Send one best-effort transaction entry as a write of its own; losing is fine."""
    kind = kind_of(entry)
    send = {
        "Put": client.put_item,
        "Update": client.update_item,
        "Delete": client.delete_item,
    }.get(kind)
    if send is None:
        return  # a check alone writes nothing
    body = {k: v for k, v in entry[kind].items() if k != "ReturnValuesOnConditionCheckFailure"}
    try:
        with translated("best-effort write"):
            send(**body)
    except ConditionFailed:
        return  # its own condition lost: nothing of it was to be written
    except StoreError as exc:
        # The transaction it rode with is written; what it kept lapses on its own.
        logger.warning("reason=<%s> | a best-effort write was not sent", exc)


def _reading_back(item: dict[str, Any]) -> dict[str, Any]:
    """`item` asking for its old value should its condition fail."""
    return {
        kind: {**body, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if "ConditionExpression" in body
        else body
        for kind, body in item.items()
    }


def _transact(client: DynamoDBClient, items: list[dict[str, Any]], action: str) -> None:
    try:
        client.transact_write_items(TransactItems=items)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        reasons = exc.response.get("CancellationReasons") or []
        failed = {
            index: (from_item(reason["Item"]) if reason.get("Item") else None)
            for index, reason in enumerate(reasons)
            if reason.get("Code") == "ConditionalCheckFailed"
        }
        if error.get("Code") == "TransactionCanceledException" and failed:
            raise Cancelled(failed) from exc
        if any(reason.get("Code") == "TransactionConflict" for reason in reasons):
            raise Conflicted(f"{action} failed: a concurrent transaction held an item") from exc
        raise StoreError(f"{action} failed: {error.get('Code', 'unknown error')}") from exc
    except BotoCoreError as exc:
        raise StoreError(f"{action} failed: {type(exc).__name__}") from exc


class Conflicted(StoreError):
    """A transaction lost to another one in flight on the same item: nothing was
    written, and the same write may simply be sent again."""


def again_on_conflict(send: Callable[[], T]) -> T:
    """`send()`, sent again while it meets a transaction in flight on an item it writes
    (`Conflicted`: nothing was written), up to a few times with a short backoff."""
    for attempt in range(_CONFLICT_ATTEMPTS - 1):
        try:
            return send()
        except Conflicted:
            time.sleep(random.uniform(0, 0.02 * 2**attempt))
    return send()


# BatchGetItem may hand back keys it did not read (throttling); they are asked again.
_BATCH_READ_ATTEMPTS: Final = 5


def batch_get(
    client: DynamoDBClient, table: str, keys: list[dict[str, Any]], action: str
) -> list[dict[str, Any]]:
    """Read up to 100 items by key in one consistent round trip (more only when some
    keys came back unprocessed); returns the plain rows that exist, in no order."""
    rows: list[dict[str, Any]] = []
    left = keys
    for _ in range(_BATCH_READ_ATTEMPTS):
        with translated(action):
            response = client.batch_get_item(
                RequestItems={table: {"Keys": left, "ConsistentRead": True}}
            )
        rows += [from_item(item) for item in response.get("Responses", {}).get(table, [])]
        left = response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
        if not left:
            return rows
    raise StoreError(f"{action} failed: keys left unprocessed")


def put_new(client: DynamoDBClient, table: str, item: Mapping[str, Any], action: str) -> bool:
    """Put `item` unless one with its key exists; True only for the call that wrote it."""
    try:
        with translated(action):
            client.put_item(
                TableName=table,
                Item=to_item(item),
                **expression(condition="attribute_not_exists(#pk)", values={}),
            )
    except ConditionFailed:
        return False
    return True


def chats_due(
    client: DynamoDBClient,
    table: str,
    index: str,
    sort_key: str,
    shard: str,
    upto: int,
    limit: int,
    action: str,
) -> list[str]:
    """The chat ids one shard of a sparse KEYS_ONLY index holds with `sort_key` at most
    `upto`, in order, each once: what a finder reads (overdue, lapsed, due)."""
    with translated(action):
        response = client.query(
            TableName=table,
            IndexName=index,
            KeyConditionExpression="#shard = :shard AND #sort <= :upto",
            ExpressionAttributeNames={"#shard": "sweep_shard", "#sort": sort_key},
            ExpressionAttributeValues=to_item({":shard": shard, ":upto": upto}),
            Limit=limit,
        )
    chats = [from_item(item)["pk"].removeprefix("CHAT#") for item in response.get("Items", [])]
    return list(dict.fromkeys(chats))


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """Serialize plain values, leaving out None (absent attributes stay absent)."""
    return {k: _serializer.serialize(v) for k, v in values.items() if v is not None}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, set)):
        return [_plain(v) for v in value]
    if isinstance(value, Binary):
        return bytes(value)
    return value


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """Deserialize a low-level item into plain Python values (ints, not Decimals)."""
    return {k: _plain(_deserializer.deserialize(v)) for k, v in item.items()}


def item_size(item: Mapping[str, Any]) -> int:
    """Approximate DynamoDB item size: attribute names plus UTF-8 values.

    Numbers are counted at their maximum (21 bytes) so the estimate errs large.
    """
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return 21
    if kind == "BOOL" or kind == "NULL":
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + _value_size(v) for k, v in inner.items())
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in inner)
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(v).encode()) for v in inner)
    return len(inner) if isinstance(inner, (bytes, bytearray)) else len(str(inner))


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Translate botocore errors raised inside the block into domain terms."""
    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ConditionalCheckFailedException":
            old = exc.response.get("Item")
            raise ConditionFailed(from_item(old) if old else None) from exc
        reasons = exc.response.get("CancellationReasons") or []
        if error.get("Code") == "TransactionConflictException" or any(
            reason.get("Code") == "TransactionConflict" for reason in reasons
        ):
            # A transaction in flight held the item: nothing was done, and the same
            # request may simply be sent again.
            raise Conflicted(f"{action} failed: a concurrent transaction held an item") from exc
        raise StoreError(f"{action} failed: {error.get('Code', 'unknown error')}") from exc
    except BotoCoreError as exc:
        raise StoreError(f"{action} failed: {type(exc).__name__}") from exc


def expression(
    *,
    condition: str,
    values: Mapping[str, Any],
    update: str | None = None,
    names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Build the expression arguments of a conditional write.

    Attribute names are written `#name` for the attribute `name` unless `names` says
    otherwise; DynamoDB refuses unused placeholders, so only those mentioned are sent.
    The placeholders go out as short aliases (`#a`, `:b`): conditions stay readable
    here, and a fenced write that repeats its condition on every step sends less.
    """
    text = f"{condition} {update or ''}"
    mentioned = sorted(set(re.findall(r"#\w+", text)))
    used = sorted(set(re.findall(r":\w+", text)))
    missing = set(used) - values.keys()
    if missing:
        raise ValueError(f"expression values missing: {sorted(missing)}")
    alias = {name: f"#{_short(i)}" for i, name in enumerate(mentioned)}
    alias.update({value: f":{_short(i)}" for i, value in enumerate(used)})

    def aliased(expr: str) -> str:
        return re.sub(r"[#:]\w+", lambda m: alias[m.group()], expr)

    args: dict[str, Any] = {
        "ConditionExpression": aliased(condition),
        "ExpressionAttributeNames": {
            alias[name]: (names or {}).get(name, name[1:]) for name in mentioned
        },
    }
    if used:
        args["ExpressionAttributeValues"] = {
            alias[value]: _serializer.serialize(values[value]) for value in used
        }
    if update:
        args["UpdateExpression"] = aliased(update)
    return args


def _short(index: int) -> str:
    """`a`, `b`, ..., `z`, `ba`, ...: the index in base 26."""
    digits = ""
    while True:
        index, digit = divmod(index, 26)
        digits = chr(ord("a") + digit) + digits
        if not index:
            return digits
