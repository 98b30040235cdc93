"""moto's DynamoDB at benchmark scale: two costs DynamoDB does not have, taken out.

With a thousand chats in one table, two things moto does grow with the whole table on
every call, so the emulator (which serves one request at a time) rather than the code
under test sets the pace, and the process grows by gigabytes:

- before applying a TransactWriteItems, moto deep-copies every table it names, whole,
  to put the copy back if an entry fails;
- a Query on the table (not an index) sorts every item of the table, then keeps the
  partition's.

`at_scale` keeps moto's own code and semantics but backs up only the items a
transaction names (restoring those on failure), and hands a table Query only its
partition's items. It patches moto for the whole process while it is active: use it
where the emulator serializes requests (`local.emulator`), around a run that does not
otherwise use moto.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table

# (table, hash key, range key, the item as it was, or None if there was none)
_Backup = tuple[Table, Any, Any, Any]


@contextmanager
def at_scale() -> Iterator[None]:
    """Both patches, for a benchmark's whole run."""
    with item_level_rollback(), partition_queries():
        yield


@contextmanager
def item_level_rollback() -> Iterator[None]:
    """While active, TransactWriteItems backs up only the items it names."""
    original = DynamoDBBackend.transact_write_items

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        try:
            backups = _backups(self, transact_items)
        except Exception:
            # Malformed: moto's own path refuses it as DynamoDB would.
            return original(self, transact_items)
        # moto's whole-table "copy" becomes the table itself, so its own rollback (putting
        # the copy back) changes nothing; the items named are restored here instead.
        Table.__deepcopy__ = _same  # type: ignore[attr-defined]
        try:
            original(self, transact_items)
        except Exception:
            _restore(backups)
            raise
        finally:
            del Table.__deepcopy__  # type: ignore[attr-defined]

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]


@contextmanager
def partition_queries() -> Iterator[None]:
    """While active, a Query on a table's key looks at its partition's items only."""
    original = Table.query

    def query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        # The backend passes the index name eighth, after the projection.
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if index_name is not None or hash_key is None or self.range_key_attr is None:
            return original(self, hash_key, *args, **kwargs)
        partition = list(self.items.get(hash_key, {}).values())
        # moto keeps the items of `all_items()` whose hash key matches: give it only those.
        self.all_items = lambda: partition  # type: ignore[method-assign]
        try:
            return original(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    Table.query = query  # type: ignore[method-assign]
    try:
        yield
    finally:
        Table.query = original  # type: ignore[method-assign]


def _same(table: Table, memo: dict[int, Any]) -> Table:
    return table


def _backups(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> list[_Backup]:
    backups = []
    for entry in transact_items:
        ((_, op),) = entry.items()
        table = backend.get_table(op["TableName"])
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
