"""DynamoDB capacity units of each request, estimated at the emulator.

DynamoDB on-demand bills request units, not calls: a write costs 1 WRU per KB of the
item (the larger of its size before and after the write; twice that in a transaction),
plus its writes to each global secondary index the item enters, leaves or changes in
(`index_wru`, 1 per KB of the projected item, two when an index key changes; not
doubled in a transaction, where only the table's write is);
a read 1 RRU per 4 KB (half for an eventually consistent read, twice in a transaction;
a Query pays for the sum of the items it reads, rounded up once). The emulator's
`Traffic` counts calls and request bytes only, so `metered` wraps it for a measurement:
every DynamoDB request is matched to the items it touches in moto's own tables, sized
by DynamoDB's item-size rule (`item_size`), before and after the write.

It is an estimate: a Query's items are sized as returned (a projection hides attributes
DynamoDB still bills), unless the response carries their key. Requests are measured one
at a time, as a benchmark sends them; concurrent ones could see each other's writes.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from local.emulator import Emulator, Traffic, journal_named

WRITE_KB = 1024
READ_KB = 4096
_REGION = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")
Key = tuple[str, dict[str, Any]]  # table name, key attributes as DynamoDB JSON
Units = dict[str, dict[str, float]]


def write_units(size_bytes: int, transactional: bool = False) -> int:
    """WRUs for one item write: 1 per KB started, at least 1; doubled in a transaction."""
    units = max(1, math.ceil(size_bytes / WRITE_KB))
    return units * 2 if transactional else units


def read_units(size_bytes: int, consistent: bool, transactional: bool = False) -> float:
    """RRUs for reading `size_bytes` (one item, or a Query's sum): 1 per 4 KB started,
    at least 1; half when eventually consistent, double in a transaction."""
    units = float(max(1, math.ceil(size_bytes / READ_KB)))
    if transactional:
        return units * 2
    return units if consistent else units / 2


def item_size(attributes: dict[str, Any] | dict[str, DynamoType]) -> int:
    """An item's size by DynamoDB's rule: each attribute's name plus its value."""
    return sum(len(name.encode()) + value_size(value) for name, value in attributes.items())


def stored_size(item: Item) -> int:
    """`item_size` of an item as moto keeps it."""
    return item_size(item.attrs)


def value_size(value: DynamoType | dict[str, Any]) -> int:
    """One attribute value's size as DynamoDB bills it (its developer guide's "item
    sizes" rule): a string's UTF-8 bytes, a binary's bytes, a number one byte per two
    significant digits plus one, a boolean or null one byte, a list or map three bytes
    plus one per element and the elements (a map's keys included). moto's own sizing
    counts a number's digits instead, which bills every timestamp about twice."""
    typed = value if isinstance(value, DynamoType) else DynamoType(value)
    kind, raw = typed.type, typed.value
    if kind == "S":
        return len(raw.encode())
    if kind == "B":
        return len(raw) if isinstance(raw, bytes) else len(base64.b64decode(raw))
    if kind == "N":
        return _number_size(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: member}) for member in raw)
    if kind == "L":
        return 3 + sum(1 + value_size(member) for member in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in raw.items())
    raise ValueError(f"unknown DynamoDB type {kind}")


def _number_size(text: str) -> int:
    # Leading and trailing zeros are not significant; read from the digits as written
    # (`normalize` would round to the context's 28 digits, DynamoDB keeps 38).
    digits = "".join(map(str, Decimal(text).as_tuple().digits)).strip("0")
    return math.ceil(len(digits) / 2) + 1


class _Tables:
    """moto's tables behind the emulator, for the size of an item by its key."""

    def __init__(self, region: str) -> None:
        self._backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][region]

    def size(self, table_name: str, key: dict[str, Any]) -> int:
        """The stored item's size in bytes, 0 when absent."""
        table = self._backend.tables.get(table_name)
        if table is None or table.hash_key_attr not in key:
            return 0
        range_attr = table.range_key_attr
        range_key = DynamoType(key[range_attr]) if range_attr and range_attr in key else None
        if range_attr and range_key is None:
            return 0
        found: Item | None = table.get_item(DynamoType(key[table.hash_key_attr]), range_key)
        return stored_size(found) if found else 0

    def item(self, table_name: str, key: dict[str, Any]) -> Item | None:
        """A copy of the stored item (moto changes items in place), None when absent."""
        table = self._backend.tables.get(table_name)
        if table is None or table.hash_key_attr not in key:
            return None
        range_attr = table.range_key_attr
        if range_attr and range_attr not in key:
            return None
        range_key = DynamoType(key[range_attr]) if range_attr else None
        found: Item | None = table.get_item(DynamoType(key[table.hash_key_attr]), range_key)
        return copy.deepcopy(found) if found else None

    def index_units(
        self, table_name: str, before: Item | None, after: Item | None
    ) -> dict[str, int]:
        """The WRUs a write pays to each global secondary index, by DynamoDB's rule: an
        item entering or leaving an index is one index write, a changed index key two
        (a delete and a put), a changed projected attribute one, anything else none;
        each sized by the projected item, 1 WRU per KB started."""
        table = self._backend.tables.get(table_name)
        if table is None:
            return {}
        units: dict[str, int] = {}
        for index in table.global_indexes:
            old, new = _in_index(index, before), _in_index(index, after)
            if old is None and new is None:
                continue
            if old is not None and new is not None:
                same_keys = all(
                    old.attrs.get(a) == new.attrs.get(a) for a in index.schema_key_attrs
                )
                writes = 0 if same_keys and old.attrs == new.attrs else 1 if same_keys else 2
            else:
                writes = 1
            if writes:
                size = max(stored_size(p) for p in (old, new) if p is not None)
                units[index.name] = writes * write_units(size)
        return units

    def key_of(self, table_name: str, item: dict[str, Any]) -> dict[str, Any]:
        """The key attributes of a full item."""
        table = self._backend.tables.get(table_name)
        if table is None:
            return {}
        names = [table.hash_key_attr, table.range_key_attr]
        return {n: item[n] for n in names if n and n in item}


def _in_index(index: Any, item: Item | None) -> Item | None:
    """The item as `index` projects it, None when it is not in the (sparse) index."""
    if item is None or any(a not in item.attrs for a in index.schema_key_attrs):
        return None
    projected: Item = index.project(copy.deepcopy(item))
    return projected


def _writes(op: str, body: dict[str, Any], tables: _Tables) -> list[tuple[Key, int]]:
    """The items a write request touches: (key, bytes it writes at least)."""
    if op in ("PutItem", "UpdateItem", "DeleteItem"):
        item = body.get("Item", {})
        key = body.get("Key") or tables.key_of(body["TableName"], item)
        return [((body["TableName"], key), item_size(item))]
    if op == "TransactWriteItems":
        found = []
        for action in body.get("TransactItems", []):
            ((_, spec),) = action.items()
            item = spec.get("Item", {})
            key = spec.get("Key") or tables.key_of(spec["TableName"], item)
            found.append(((spec["TableName"], key), item_size(item)))
        return found
    if op == "BatchWriteItem":
        found = []
        for table, requests in body.get("RequestItems", {}).items():
            for request in requests:
                item = request.get("PutRequest", {}).get("Item", {})
                key = request.get("DeleteRequest", {}).get("Key") or tables.key_of(table, item)
                found.append(((table, key), item_size(item)))
        return found
    return []


def _read_units(op: str, body: dict[str, Any], reply: dict[str, Any], tables: _Tables) -> float:
    """RRUs of a read request, from the items it read."""
    consistent = bool(body.get("ConsistentRead", False))
    if op == "GetItem":
        return read_units(tables.size(body["TableName"], body["Key"]), consistent)
    if op in ("Query", "Scan"):
        table = body["TableName"]
        sizes = [
            tables.size(table, tables.key_of(table, item)) or item_size(item)
            for item in reply.get("Items", [])
        ]
        return read_units(sum(sizes), consistent)
    if op == "BatchGetItem":
        return sum(
            read_units(tables.size(table, key), bool(spec.get("ConsistentRead", False)))
            for table, spec in body.get("RequestItems", {}).items()
            for key in spec.get("Keys", [])
        )
    if op == "TransactGetItems":
        return sum(
            read_units(tables.size(g["Get"]["TableName"], g["Get"]["Key"]), True, True)
            for g in body.get("TransactItems", [])
        )
    return 0.0


class _Meter:
    """WSGI middleware around the emulator: the capacity units of each DynamoDB call."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.units: dict[str, defaultdict[str, float]] = {}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if not target.startswith("DynamoDB_"):
            return list(self.app(environ, start_response))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        op, body = target.split(".", 1)[1], json.loads(raw or b"{}")
        match = _REGION.search(str(environ.get("HTTP_AUTHORIZATION", "")))
        tables = _Tables(match.group(1) if match else "us-east-1")
        touched = _writes(op, body, tables)
        before = [tables.item(*key) for key, _ in touched]
        reply = list(self.app(environ, start_response))
        # Named as the emulator's Traffic names it: a resumed run's journal step apart.
        name = journal_named("dynamodb." + op, raw).removeprefix("dynamodb.")
        self._count(name, op, body, reply, tables, touched, before)
        return reply

    def _count(
        self,
        name: str,
        op: str,
        body: dict[str, Any],
        reply: list[bytes],
        tables: _Tables,
        touched: list[tuple[Key, int]],
        before: list[Item | None],
    ) -> None:
        counter = self.units.setdefault("dynamodb." + name, defaultdict(float))
        if touched:
            transactional = op == "TransactWriteItems"
            for (key, sent), old in zip(touched, before, strict=True):
                new = tables.item(*key)
                sizes = [sent, *(stored_size(i) for i in (old, new) if i is not None)]
                counter["wru"] += write_units(max(sizes), transactional)
                # A transaction doubles the table's write only: its index writes are
                # billed as a single write's, as checked against DynamoDB's own
                # ReturnConsumedCapacity=INDEXES figures (a small indexed put in a
                # transaction: table 2, index 1; github.com/nubo-db/dynoxide pull 188).
                counter["index_wru"] += sum(tables.index_units(key[0], old, new).values())
            return
        decoded = json.loads(b"".join(reply) or b"{}")
        counter["rru"] += _read_units(op, body, decoded, tables)

    def take(self) -> Units:
        """Units per operation since the last take, then start again."""
        taken = {op: dict(sorted(c.items())) for op, c in sorted(self.units.items())}
        self.units.clear()
        return taken


class _MeteredTraffic(Traffic):
    """The emulator's traffic, with each take carrying the capacity units as well.

    Recording still goes to the emulator's own `Traffic`; only `take` is joined, so a
    caller that takes between a pause and a resume splits both the same way.
    """

    def __init__(self, inner: Traffic, meter: _Meter) -> None:
        super().__init__()
        self._inner = inner
        self._meter = meter

    def record(self, environ: dict[str, Any], body: bytes = b"") -> None:
        self._inner.record(environ, body)

    def take(self) -> dict[str, Any]:
        return {**self._inner.take(), "capacity_units": self._meter.take()}


@contextmanager
def metered(emulator: Emulator) -> Iterator[Emulator]:
    """While inside, `emulator.traffic.take()` also reports capacity units per operation.

    The meter wraps the emulator's WSGI application (outside its serializing lock) and
    is removed on exit.
    """
    server = emulator._server  # the emulator exposes no hook; its app is werkzeug's
    meter = _Meter(server.app)
    inner = emulator.traffic
    server.app, emulator.traffic = meter, _MeteredTraffic(inner, meter)
    try:
        yield emulator
    finally:
        server.app, emulator.traffic = meter.app, inner
