"""moto at scale: costs DynamoDB does not have, taken out.

Some things moto does on a call grow with the whole table, so the longer a local
session, a test or a benchmark runs, the slower each call gets and the larger the
process grows:

- before applying a TransactWriteItems, moto deep-copies every table it names, whole
  (once per entry), to put the copy back if an entry fails;
- a Query on the table (not an index) sorts every item of the table, then walks the
  partition from its first item, sizing each, to the first one in the key condition's
  range (DynamoDB seeks to it): a reader paging `after=N` pays for the N before;
- its server lists its own package directory on every request, to tell a service's
  name from a host's;
- and its response serializer walks every attribute value of every item returned
  through the shape of `AttributeValue`, trying each of its ten members by each alias
  (a quarter of the emulator's time on a busy chat), though the value already has its
  wire form.

`install()` keeps moto's own code and semantics but backs up only the items a
transaction names (restoring those on failure), hands a table Query only its
partition's items within the key condition's range, lists the directory once, and
writes an attribute value as its members' own serializers would (`_wire`). It
patches moto for the whole process, once: the emulator installs it (`local.emulator`),
and so does the test session for in-process moto. Each patch acts only on the thread
making the call, so concurrent callers never see each other's.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any, Final, cast

from moto.core.serialize import BaseJSONSerializer
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table

# (table, hash key, range key, the item as it was, or None if there was none)
_Backup = tuple[Table, Any, Any, Any]

# What this thread's call is doing: rolling back by items (moto's whole-table copy of a
# table is then the table itself), or querying one partition of one table.
_call = threading.local()
_lock = threading.Lock()
_installed = False


def install() -> None:
    """Both patches, for the rest of the process (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        _patch_transactions()
        _patch_queries()
        _patch_module_listing()
        _patch_attribute_values()
        _installed = True


def _patch_transactions() -> None:
    original = DynamoDBBackend.transact_write_items

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        try:
            backups = _backups(self, transact_items)
        except Exception:
            # Malformed: moto's own path refuses it as DynamoDB would.
            return original(self, transact_items)
        if backups is None:
            return original(self, transact_items)  # a streamed table: moto's own backup
        # moto's whole-table "copy" becomes the table itself, so its own rollback (putting
        # the copy back) changes nothing; the items named are restored here instead.
        _call.rollback = True
        try:
            original(self, transact_items)
        except Exception:
            _restore(backups)
            raise
        finally:
            _call.rollback = False

    plain = getattr(Table, "__deepcopy__", None)

    def __deepcopy__(table: Table, memo: dict[int, Any]) -> Table:
        if getattr(_call, "rollback", False):
            return table
        if plain is not None:
            return plain(table, memo)  # type: ignore[no-any-return]
        return _copied(table, memo)

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    Table.__deepcopy__ = __deepcopy__  # type: ignore[attr-defined]


def _copied(table: Table, memo: dict[int, Any]) -> Table:
    """A deep copy as `copy.deepcopy` makes one of an object without `__deepcopy__`."""
    cls = table.__class__
    clone = cast(Table, cls.__new__(cls))
    memo[id(table)] = clone
    for name, value in table.__dict__.items():
        setattr(clone, name, copy.deepcopy(value, memo))
    return clone


def _patch_queries() -> None:
    original_query = Table.query
    original_all_items: Callable[[Table], Any] = Table.all_items

    def query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        # The backend passes the index name eighth, after the projection.
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if index_name is not None or hash_key is None or self.range_key_attr is None:
            return original_query(self, hash_key, *args, **kwargs)
        # moto keeps the items of `all_items()` whose hash key matches, then those whose
        # range key meets the condition: give it only those (it checks them again).
        partition = list(self.items.get(hash_key, {}).values())
        range_comparison, range_objs = args[0], args[1]
        if range_comparison:
            partition = [i for i in partition if i.range_key.compare(range_comparison, range_objs)]
        _call.partition = (self, partition)
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            _call.partition = None

    def all_items(self: Table) -> Any:
        partition = getattr(_call, "partition", None)
        if partition is not None and partition[0] is self:
            return partition[1]
        return original_all_items(self)

    Table.query = query  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]


def _patch_module_listing() -> None:
    from moto import backends

    listed = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: listed


def _backups(
    backend: DynamoDBBackend, transact_items: list[dict[str, Any]]
) -> list[_Backup] | None:
    backups = []
    for entry in transact_items:
        ((_, op),) = entry.items()
        table = backend.get_table(op["TableName"])
        if table.stream_shard is not None:
            return None  # its stream's records would need rolling back too
        key = op.get("Key") or {
            name: op["Item"][name]
            for name in (table.hash_key_attr, table.range_key_attr)
            if name is not None
        }
        hash_key, range_key = backend.get_keys_value(table, key)
        item = table.get_item(hash_key, range_key)
        backups.append((table, hash_key, range_key, copy.deepcopy(item)))
    return backups


def _restore(backups: list[_Backup]) -> None:
    # Newest first, so an item named twice ends as it was before the first.
    for table, hash_key, range_key, item in reversed(backups):
        if item is None:
            table.delete_item(hash_key, range_key)
        elif range_key is not None:
            table.items[hash_key][range_key] = item
        else:
            table.items[hash_key] = item


# moto's own, as imported: what `_wire` must write the same as (its test compares them).
PLAIN_STRUCTURE: Final = BaseJSONSerializer._serialize_type_structure


def _patch_attribute_values() -> None:
    def _serialize_type_structure(
        self: BaseJSONSerializer, serialized: Any, value: Any, shape: Any, key: str
    ) -> None:
        if shape.name != "AttributeValue" or type(value) is not dict or not key:
            return PLAIN_STRUCTURE(self, serialized, value, shape, key)
        if getattr(self._value_picker, "response_transformers", None):
            return PLAIN_STRUCTURE(self, serialized, value, shape, key)  # a response reshapes it
        serialized[key] = _wire(self, value)
        return None

    BaseJSONSerializer._serialize_type_structure = _serialize_type_structure  # type: ignore[method-assign]


def _wire(serializer: BaseJSONSerializer, value: dict[str, Any]) -> dict[str, Any]:
    """An attribute value as moto's JSON serializer writes it through the shape: its
    members in the shape's order, a None member left out, strings and numbers as `str`,
    binaries in base64, maps and lists member by member."""
    out: dict[str, Any] = {}
    for member in _MEMBERS:
        item = value.get(member)
        if item is None:
            continue
        if member in ("S", "N"):
            out[member] = str(item) if item not in ({}, []) else item
        elif member in ("SS", "NS"):
            out[member] = [str(x) if x not in ({}, []) else x for x in item]
        elif member == "B":
            out[member] = serializer._base64(item)
        elif member == "BS":
            out[member] = [serializer._base64(x) for x in item]
        elif member == "M":
            out[member] = {k: _wire(serializer, v) for k, v in item.items()}
        elif member == "L":
            out[member] = [_wire(serializer, v) for v in item]
        else:  # NULL, BOOL
            out[member] = item
    return out


# The members of DynamoDB's `AttributeValue`, in its shape's order.
_MEMBERS = ("S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL")
