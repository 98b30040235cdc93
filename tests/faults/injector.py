"""A fault plan for boto3 clients: count every AWS call, and at one of them kill the
process (SIGKILL, before the request leaves or after its response arrived) or fail it.

It hooks botocore's `before-parameter-build` (the call's own parameters, before anything
is sent) and `after-call` events, so it sits under every store
of every adapter without any of them knowing: the same code runs as in production, and
a "step" is simply the n-th AWS call a process makes.
"""

from __future__ import annotations

import json
import os
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

Mode = Literal["none", "kill_before", "kill_after", "fail", "ambiguous", "timeout", "throttle"]


@dataclass
class FaultPlan:
    """Where this process dies or fails.

    Attributes:
        at: The 0-based index of the AWS call to fault (ignored with mode "none").
        mode: kill_before (SIGKILL before the call is sent), kill_after (SIGKILL once its
            response arrived: the write landed, the process never learned it), fail (the
            call raises as a lost connection would), ambiguous (the call is served, then
            answers 500 as AWS does once its own retries are spent: the write landed),
            timeout (served, then the read of its answer times out), throttle (refused
            before it is served, as a throttled call is: nothing landed).
        trace: A file that receives one JSON line per call (its index and description).
        op: With it, the call to fault is the `nth` (0-based) call described as `op`,
            wherever it falls: a call elsewhere that a run makes or not (a slot taken at
            the first try or the second) cannot move the fault to another step. An `op`
            ending in `*` matches every description it begins.
        nth: See `op`.
    """

    at: int = -1
    mode: Mode = "none"
    trace: Path | None = None
    op: str | None = None
    nth: int = 0
    calls: int = field(default=0, init=False)
    _seen: dict[str, int] = field(default_factory=dict, init=False)
    _armed: bool = field(default=False, init=False)

    def attach(self, *clients: Any) -> None:
        for client in clients:
            client.meta.events.register("before-parameter-build", self._before)
            client.meta.events.register("after-call", self._after)

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        index = self.calls
        self.calls += 1
        described = describe(model.name, params)
        if self.trace is not None:
            line = {"index": index, "op": described}
            with self.trace.open("a") as out:
                out.write(json.dumps(line) + "\n")
        if not self._targets(index, described):
            return
        self._armed = True
        if self.mode == "kill_before":
            _die()
        if self.mode == "fail":
            raise EndpointConnectionError(endpoint_url=f"fault-injected:{model.name}")
        if self.mode == "throttle":
            raise _refusal(model.name, "ProvisionedThroughputExceededException", 400)

    def _targets(self, index: int, described: str) -> bool:
        if self.op is None:
            return index == self.at
        wanted = self.op
        matches = described.startswith(wanted[:-1]) if wanted.endswith("*") else described == wanted
        if not matches:
            return False
        seen = self._seen.get(wanted, 0)
        self._seen[wanted] = seen + 1
        return seen == self.nth

    def _after(self, model: Any, **_: Any) -> None:
        if not self._armed:
            return
        self._armed = False  # one fault per plan: a resend of the call goes through
        if self.mode == "kill_after":
            _die()
        if self.mode == "ambiguous":
            raise _refusal(model.name, "InternalServerError", 500)
        if self.mode == "timeout":
            raise ReadTimeoutError(endpoint_url=f"fault-injected:{model.name}")


def _refusal(operation: str, code: str, status: int) -> ClientError:
    """The error botocore raises for an AWS answer with this code and status."""
    response: Any = {
        "Error": {"Code": code, "Message": "fault injected"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, operation)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def describe(operation: str, params: dict[str, Any]) -> str:
    """A short, stable name for a call: the operation and what it touches."""
    if operation == "TransactWriteItems":
        parts = [
            f"{kind} {_sk(body)}" for item in params["TransactItems"] for kind, body in item.items()
        ]
        return f"Transact[{', '.join(parts)}]"
    if operation == "Query":
        values = params.get("ExpressionAttributeValues", {})
        prefix = values.get(":prefix", values.get(":low", {})).get("S", "?")
        return f"Query {str(prefix).split('#')[0]}"
    if "Bucket" in params:
        key = str(params.get("Key", ""))
        return f"{operation} {key.split('/', 1)[0]}" if key else operation
    text = f"{operation} {_sk(params)}"
    update = params.get("UpdateExpression", "")
    if update:
        # Placeholders are sent as short aliases: name the attribute itself.
        names = params.get("ExpressionAttributeNames", {})
        first = update.split(",")[0].split(" = ")[0]
        text += " " + re.sub(r"#\w+", lambda m: "#" + names.get(m.group(), m.group()[1:]), first)
    return text


def is_write(op: str) -> bool:
    """Whether a described call changes anything (kill-after differs from kill-before)."""
    return op.split(" ")[0].split("[")[0] in {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Transact",
        "PutObject",
        "BatchWriteItem",
    }


def in_flight(op: str, mode: str) -> bool:
    """Whether a fault here can catch a finished model call or tool body before its
    journal record: the one step such a fault may legitimately repeat. Killed after the
    record's own write, nothing was lost; a step's object comes before its record, so
    a fault there in any mode loses the step. The run's answer (a response that calls
    no tool) is recorded by the finish itself, its object first, so a fault at either
    costs that one model call."""
    if op.startswith(("PutObject steps", "PutObject answers")):
        return True
    return ("Put STEP" in op or "OUTBOX" in op or finishes(op)) and mode != "kill_after"


def finishes(op: str) -> bool:
    """Whether the described call stores a run's answer (the finish, or its object
    first): a fault there can cost the answer's model call, never a tool body."""
    return op.startswith("PutObject answers") or (
        op.startswith("Transact[Update REQUEST") and "Put TURN" in op
    )


def _sk(body: dict[str, Any]) -> str:
    key = body.get("Key") or body.get("Item") or {}
    sk = key.get("sk", {}).get("S", "")
    return str(sk).split("#")[0] if sk else "?"
