"""IAM's decision on one DynamoDB request, or on one action of another service on one
resource (`decide_action`), from a role's synthesized statements.

Only what the roles here use is understood: actions (with `*`), resources compared as
the template spells them, and the set operators over `dynamodb:LeadingKeys` and
`dynamodb:Attributes`. A condition it does not understand raises instead of guessing, so a
new kind of condition cannot pass a test unread.

The rule is IAM's: an explicit Deny that matches wins; else an Allow that matches
allows; else the request is denied implicitly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, Literal

from tests.calls import Call

Decision = Literal["allowed", "denied", "not allowed"]
_SET_KEYS = {"dynamodb:LeadingKeys": "leading_keys", "dynamodb:Attributes": "attributes"}


def decide(statements: Sequence[Mapping[str, Any]], call: Call, table: Any) -> Decision:
    """What IAM answers `call` on `table` (the table's ARN as the template spells it)."""
    resource = table if call.index is None else _index(table, call.index)
    matching = [s for s in statements if _applies(s, call, resource)]
    if any(s["Effect"] == "Deny" for s in matching):
        return "denied"
    if any(s["Effect"] == "Allow" for s in matching):
        return "allowed"
    return "not allowed"


def decide_action(statements: Sequence[Mapping[str, Any]], action: str, resource: Any) -> Decision:
    """What IAM answers `action` on `resource` (as the template spells it) when the
    request carries no DynamoDB keys or attributes, as any other service's does."""
    return decide(statements, Call("", action, None, frozenset(), frozenset()), resource)


def _index(table: Any, index: str) -> Any:
    return {"Fn::Join": ["", [table, f"/index/{index}"]]}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _applies(statement: Mapping[str, Any], call: Call, resource: Any) -> bool:
    actions = _listed(statement["Action"])
    if not any(fnmatchcase(call.action, action) for action in actions):
        return False
    spelled = json.dumps(resource, sort_keys=True)
    resources = [json.dumps(r, sort_keys=True) for r in _listed(statement["Resource"])]
    if spelled not in resources and "*" not in _listed(statement["Resource"]):
        return False
    return all(
        _holds(operator, key, wanted, call)
        for operator, tests in statement.get("Condition", {}).items()
        for key, wanted in tests.items()
    )


def _holds(operator: str, key: str, wanted: Any, call: Call) -> bool:
    qualifier, _, test = operator.rpartition(":")
    if key not in _SET_KEYS or qualifier not in ("ForAllValues", "ForAnyValue"):
        raise ValueError(f"no rule here for the condition {operator} on {key}")
    values: Iterable[str] = getattr(call, _SET_KEYS[key])
    patterns = [str(w) for w in _listed(wanted)]
    if test == "StringEquals":
        matches = [value in patterns for value in values]
    elif test == "StringLike":
        matches = [any(fnmatchcase(value, p) for p in patterns) for value in values]
    else:
        raise ValueError(f"no rule here for the operator {test}")
    # IAM's set semantics: ForAllValues holds for an empty set, ForAnyValue does not.
    return all(matches) if qualifier == "ForAllValues" else any(matches)
