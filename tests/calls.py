"""Every DynamoDB call the code makes, as IAM sees it, with the function that made it.

IAM authorizes a DynamoDB request by its action, its resource and its condition keys:
`dynamodb:LeadingKeys` (the partition keys it touches) and `dynamodb:Attributes` (every
top-level attribute it names: an item's, a key's, and those of its update, condition,
key-condition, filter and projection expressions). A transaction is authorized entry by
entry, each as the single-item action it performs. `Recorder` turns each request the
code sends into those terms, so a test can evaluate it against a synthesized policy.

The function is named by the code that runs, not by the request's route: locally one
process serves every function (the streamed routes under one app, a tap applied on a
thread of its own), so a route cannot say which function would have made the call. The
innermost frame that is a deployed function's entry point (or handler) names it; on a
thread the agent's work hops to, the entry point's context variable does (Strands and
asyncio copy the context to their threads).
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import botocore.handlers

ROOT: Final = Path(__file__).resolve().parents[1]
# (module, function) -> the deployed function whose code it is.
ENTRY_POINTS: Final[Mapping[tuple[str, str], str]] = {
    ("interlock.resume", "resume_replies"): "resume",
    # Deployed, the channels function hands a screened tap to the resume function.
    ("interlock.respond", "apply_tap"): "resume",
    ("interlock.api.stream", "run_turn_for"): "run",
    ("interlock.api.stream", "resync_for"): "run",
    ("interlock.settling", "settle_batch"): "settle",
}
HANDLERS: Final = {
    str(ROOT / "functions" / name / "handler.py"): name
    for name in ("requests", "admin", "channels", "settle", "sweeper")
}
TRANSACTION_ACTIONS: Final = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_WORDS: Final = frozenset(
    (
        *("SET", "REMOVE", "ADD", "DELETE", "AND", "OR", "NOT", "IN", "BETWEEN", "size"),
        *("attribute_exists", "attribute_not_exists", "attribute_type", "begins_with"),
        *("contains", "if_not_exists", "list_append"),
    )
)
_NAME: Final = re.compile(r"(?<![#:\w])([A-Za-z_][A-Za-z0-9_]*)")
_EXPRESSIONS: Final = (
    "UpdateExpression",
    "ConditionExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
)


@dataclass(frozen=True)
class Call:
    """One authorization IAM makes for a DynamoDB request."""

    function: str
    action: str
    index: str | None
    leading_keys: frozenset[str]
    attributes: frozenset[str]
    return_values: str | None = None


def names_in(params: Mapping[str, Any]) -> frozenset[str]:
    """Every top-level attribute a request (or a transaction entry) names."""
    names: set[str] = set()
    for field in ("Item", "Key"):
        names |= set(params.get(field) or {})
    aliases = params.get("ExpressionAttributeNames") or {}
    for field in _EXPRESSIONS:
        text = params.get(field)
        if not text:
            continue
        # `#name` is an alias; a path's first element is the top-level attribute.
        names |= {aliases[alias] for alias in re.findall(r"#\w+", text) if alias in aliases}
        bare = re.sub(r"[#:]\w+", " ", text)
        names |= {word for word in _NAME.findall(bare) if word not in _WORDS}
    return frozenset(names)


def _partition(params: Mapping[str, Any]) -> frozenset[str]:
    for field in ("Item", "Key"):
        if value := params.get(field):
            return frozenset({_scalar(value["pk"])})
    condition = params.get("KeyConditionExpression")
    if condition:
        aliases = {v: k for k, v in (params.get("ExpressionAttributeNames") or {}).items()}
        spelled = "|".join(re.escape(n) for n in ("pk", aliases.get("pk", "pk")))
        found = re.search(rf"(?:{spelled})\s*=\s*(:\w+)", condition)
        if found:
            return frozenset({_scalar(params["ExpressionAttributeValues"][found.group(1)])})
    return frozenset()


def _scalar(value: Any) -> str:
    if isinstance(value, dict):
        return str(next(iter(value.values())))
    return str(value)


_RUNNING: Final = contextvars.ContextVar[str | None]("interlock_function", default=None)


def _function() -> str | None:
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        if (module, code.co_name) in ENTRY_POINTS:
            return ENTRY_POINTS[(module, code.co_name)]
        if code.co_filename in HANDLERS:
            return HANDLERS[code.co_filename]
        frame = frame.f_back  # type: ignore[assignment]
    return _RUNNING.get()


def _marked(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(function)
    def marked(*args: Any, **kwargs: Any) -> Any:
        token = _RUNNING.set(name)
        try:
            return function(*args, **kwargs)
        finally:
            _RUNNING.reset(token)

    return marked


@contextmanager
def _entry_points_marked() -> Iterator[None]:
    """Each entry point sets `_RUNNING` while it runs, wherever it was imported."""
    originals = {key: getattr(importlib.import_module(key[0]), key[1]) for key in ENTRY_POINTS}
    patched: list[tuple[Any, str, Any]] = []
    for (source, attribute), original in originals.items():
        wrapper = _marked(original, ENTRY_POINTS[(source, attribute)])
        for module in list(sys.modules.values()):
            if getattr(module, "__dict__", {}).get(attribute) is original:
                patched.append((module, attribute, original))
                setattr(module, attribute, wrapper)
    try:
        yield
    finally:
        for module, attribute, original in patched:
            setattr(module, attribute, original)


def calls_of(function: str, operation: str, params: Mapping[str, Any]) -> list[Call]:
    """The authorizations of one request."""
    if operation in ("TransactWriteItems", "TransactGetItems"):
        return [
            one
            for entry in params["TransactItems"]
            for kind, inner in entry.items()
            for one in calls_of(function, TRANSACTION_ACTIONS[kind], inner)
        ]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        # One authorization for the whole batch, over every key it names.
        batches = params["RequestItems"].values()
        if operation == "BatchGetItem":
            found = [key for table in batches for key in table["Keys"]]
        else:
            writes = [w for table in batches for w in table]
            found = [
                w.get("PutRequest", {}).get("Item") or w["DeleteRequest"]["Key"] for w in writes
            ]
        return [
            Call(
                function,
                f"dynamodb:{operation}",
                None,
                frozenset(_scalar(key["pk"]) for key in found),
                frozenset(name for key in found for name in key),
            )
        ]
    action = operation if operation.startswith("dynamodb:") else f"dynamodb:{operation}"
    return [
        Call(
            function,
            action,
            params.get("IndexName"),
            _partition(params) if params.get("IndexName") is None else frozenset(),
            names_in(params),
            params.get("ReturnValues"),
        )
    ]


class Recorder:
    """Collects the calls of every DynamoDB client made while it is installed."""

    def __init__(self) -> None:
        self.calls: set[Call] = set()
        self.unattributed = 0
        self._lock = threading.Lock()

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        function = _function()
        with self._lock:
            if function is None:
                self.unattributed += 1
                return
            self.calls.update(calls_of(function, model.name, params))

    def of(self, function: str) -> list[Call]:
        """The calls one function made, in a stable order."""
        found = [call for call in self.calls if call.function == function]
        return sorted(found, key=repr)


@contextmanager
def recording() -> Iterator[Recorder]:
    """Record the calls of every DynamoDB client created inside the block."""
    recorder = Recorder()
    entry = ("provide-client-params.dynamodb", recorder)
    botocore.handlers.BUILTIN_HANDLERS.append(entry)
    try:
        with _entry_points_marked():
            yield recorder
    finally:
        botocore.handlers.BUILTIN_HANDLERS.remove(entry)
