"""Entries of one transaction that write the same item, sent as one entry.

DynamoDB refuses a transaction that names an item twice. Stores build their entries
apart (a run gives its slot back, a request its open-request slot), and two of them
may land on one item (a user's slots). `grouped` finds them and `merged` joins each
group: one update whose condition is all of theirs and whose update does all of theirs.
Each part was built on its own, so its placeholders are renamed apart first. Parts
must touch different attributes, as two writes of one item in a transaction would have
to anyway.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from interlock.adapters.schema import PARTITION_KEY, SORT_KEY

_KINDS: Final = ("Put", "Update", "Delete", "ConditionCheck")
_JOINABLE: Final = frozenset({"Update", "ConditionCheck"})
# The keywords that open an update's clauses (any case), not a placeholder's name.
_CLAUSE: Final = re.compile(r"(?<![#:\w.])(SET|REMOVE|ADD|DELETE)\b", re.IGNORECASE)
_CLAUSE_ORDER: Final = ("SET", "REMOVE", "ADD", "DELETE")
_PLACEHOLDER: Final = re.compile(r"[#:]\w+")


def grouped(items: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """The indexes of `items`, gathered by the item each writes (table and key), in the
    order each item first appears."""
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        body = item[kind_of(item)]
        written = body.get("Key") or {k: body["Item"][k] for k in (PARTITION_KEY, SORT_KEY)}
        key = json.dumps([body["TableName"], written], sort_keys=True)
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def kind_of(item: Mapping[str, Any]) -> str:
    """Which write a transaction entry is: `Put`, `Update`, `Delete` or `ConditionCheck`."""
    return next(kind for kind in _KINDS if kind in item)


def merged(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One entry doing everything `parts` (updates and checks of one item) do.

    Raises:
        ValueError: a part puts or deletes the item, which no other write can share.
    """
    kinds = [kind_of(part) for part in parts]
    if not set(kinds) <= _JOINABLE:
        raise ValueError("only updates and checks of one item can share a transaction entry")
    bodies = [
        _renamed(part[kind], n) for n, (part, kind) in enumerate(zip(parts, kinds, strict=True))
    ]
    entry: dict[str, Any] = {"TableName": bodies[0]["TableName"], "Key": bodies[0]["Key"]}
    conditions = [b["ConditionExpression"] for b in bodies if b.get("ConditionExpression")]
    if conditions:
        entry["ConditionExpression"] = " AND ".join(f"({c})" for c in conditions)
    clauses: dict[str, list[str]] = {kind: [] for kind in _CLAUSE_ORDER}
    for body in bodies:
        for kind, text in _clauses(body.get("UpdateExpression", "")):
            clauses[kind].append(text)
    for field in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        joined = {k: v for body in bodies for k, v in body.get(field, {}).items()}
        if joined:
            entry[field] = joined
    if any(body.get("ReturnValuesOnConditionCheckFailure") for body in bodies):
        entry["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    update = " ".join(f"{kind} {', '.join(texts)}" for kind, texts in clauses.items() if texts)
    if update:
        return {"Update": {**entry, "UpdateExpression": update}}
    return {"ConditionCheck": entry}


def _renamed(body: Mapping[str, Any], n: int) -> dict[str, Any]:
    """`body` with each placeholder given the suffix `_n`, so parts never share one."""

    def rename(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: f"{m.group()}_{n}", text)

    out = dict(body)
    for field in ("ConditionExpression", "UpdateExpression"):
        if field in out:
            out[field] = rename(out[field])
    for field in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        if field in out:
            out[field] = {rename(k): v for k, v in out[field].items()}
    return out


def _clauses(update: str) -> list[tuple[str, str]]:
    """The clauses of an update expression, as (keyword, what follows it)."""
    pieces = _CLAUSE.split(update)
    return [
        (keyword.upper(), text.strip().rstrip(",").strip())
        for keyword, text in zip(pieces[1::2], pieces[2::2], strict=True)
    ]
