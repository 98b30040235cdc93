"""The OpenAPI 3.1 document of the whole HTTP API, generated, never written by hand.

Paths and methods come from the route table (`interlock.api.routes`), which also builds
the API Gateway resources and the handlers' bindings; bodies are the JSON Schemas of
the models that parse requests (AG-UI's `RunAgentInput`) and render responses
(`interlock.api.schemas`). A route with no operation entry here fails at import, so the
document cannot fall behind the table.

    python -m interlock.api.openapi > docs/openapi.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Final

from ag_ui.core import RunAgentInput
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from interlock.api import schemas
from interlock.api.bodies import MAX_QUERY_DIGITS
from interlock.api.routes import ROUTES, Route
from interlock.keys import ID_PATTERN

VERSION: Final = "1.0.0"
REF: Final = "#/components/schemas/{model}"


@dataclass(frozen=True)
class Operation:
    """What one route takes and gives."""

    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None  # None: an AG-UI event stream
    query: tuple[str, ...] = ()


OPERATIONS: Final[dict[tuple[str, str], Operation]] = {
    ("POST", "/runs"): Operation(body=RunAgentInput),
    ("POST", "/resume"): Operation(body=RunAgentInput),
    ("GET", "/chats/{chat_id}/request"): Operation(response=schemas.RequestView),
    ("DELETE", "/chats/{chat_id}/request"): Operation(response=schemas.RequestView),
    ("GET", "/chats/{chat_id}/turns"): Operation(response=schemas.Turns, query=("after",)),
    ("GET", "/chats/{chat_id}/approvals"): Operation(response=schemas.Approvals),
    ("DELETE", "/chats/{chat_id}/approvals/{kind}/{name}"): Operation(response=schemas.Revoked),
    ("GET", "/chats/{chat_id}/events"): Operation(response=schemas.Events, query=("after",)),
    ("PUT", "/admin/approvals/{kind}/{name}"): Operation(response=schemas.Preapproved),
    ("DELETE", "/admin/approvals/{kind}/{name}"): Operation(response=schemas.Revoked),
    ("GET", "/inbox"): Operation(response=schemas.Inbox, query=("page",)),
    ("PUT", "/admin/links/{channel}/{external_id}"): Operation(
        body=schemas.LinkInput, response=schemas.Linked
    ),
    ("DELETE", "/admin/links/{channel}/{external_id}"): Operation(response=schemas.Unlinked),
    # The platforms' own formats (Slack's form-encoded payload, a Telegram Update): not
    # described here; each is verified by its signature or secret token.
    ("POST", "/channels/slack/interactions"): Operation(response=schemas.Acknowledged),
    ("POST", "/channels/telegram/webhook"): Operation(response=schemas.Acknowledged),
}
_missing = {(r.method, r.path) for r in ROUTES} ^ set(OPERATIONS)
if _missing:
    raise RuntimeError(f"routes and documented operations disagree: {sorted(_missing)}")

PATH_PARAMETERS: Final = {
    "chat_id": {"type": "string", "pattern": ID_PATTERN, "description": "The chat (AG-UI thread)"},
    "kind": {"type": "string", "enum": ["site", "package"]},
    "name": {"type": "string", "minLength": 1, "maxLength": 253},
    "channel": {"type": "string", "enum": ["slack", "telegram"]},
    "external_id": {
        "type": "string",
        "pattern": '^[!-"$-~]{1,128}$',
        "description": "The platform's user id (Slack U..., Telegram's number)",
    },
}
QUERY_PARAMETERS: Final = {
    "after": {
        "type": "string",
        "pattern": f"^[0-9]{{1,{MAX_QUERY_DIGITS}}}$",
        "description": "Only items numbered above this (ASCII digits)",
    },
    "page": {
        "type": "string",
        "pattern": "^[0-9]{1,16}~[A-Za-z0-9_.:@+-]{1,128}$",
        "description": "The next page of the inbox: the `next` its page before gave",
    },
}


# One server-sent event: its data is one AG-UI event as JSON.
SSE_EVENT: Final = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "event": {"type": "string"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string", "pattern": "^[A-Z_]+$"}},
            },
        },
    },
}


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document, as a JSON-ready dict."""
    responses: list[type[BaseModel]] = [schemas.ErrorBody]
    responses += sorted({op.response for op in OPERATIONS.values() if op.response}, key=str)
    modes: list[tuple[type[BaseModel], JsonSchemaMode]] = [(RunAgentInput, "validation")]
    modes += [(model, "serialization") for model in responses]
    _, definitions = models_json_schema(modes, ref_template=REF)
    components = definitions.get("$defs", {})
    # AG-UI allows any string; Interlock's threads and runs are keys, and says so.
    for field_name in ("threadId", "runId"):
        components["RunAgentInput"]["properties"][field_name]["pattern"] = ID_PATTERN
    paths: dict[str, Any] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Interlock",
            "version": VERSION,
            "description": "Pause a Strands agent to ask a person; resume it exactly once.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A Cognito ID token (deployed) or a development token (local)",
                }
            },
        },
    }


def _operation(route: Route) -> dict[str, Any]:
    operation = OPERATIONS[(route.method, route.path)]
    spec: dict[str, Any] = {
        "operationId": f"{route.method.lower()}_{route.path.strip('/').replace('/', '_')}",
        "summary": route.summary,
        "parameters": _parameters(route, operation),
        "responses": {"200": _success(operation), "4XX": _error("Refused; nothing was changed")},
    }
    if route.method == "POST" and route.authorized:
        spec["responses"]["503"] = _error("The resumed run failed after its claim; released")
    if operation.body is not None:
        spec["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _ref(operation.body)}}},
        }
    if not spec["parameters"]:
        del spec["parameters"]
    if not route.authorized:
        spec["security"] = []  # signed by the platform instead
    return spec


def _parameters(route: Route, operation: Operation) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in route.path.split("/") if part.startswith("{")]
    path = [
        {"name": n, "in": "path", "required": True, "schema": PATH_PARAMETERS[n]} for n in names
    ]
    query = [
        {"name": n, "in": "query", "required": False, "schema": QUERY_PARAMETERS[n]}
        for n in operation.query
    ]
    return path + query


def _success(operation: Operation) -> dict[str, Any]:
    if operation.response is None:
        return {
            "description": "AG-UI events (server-sent events), each one JSON event",
            "content": {"text/event-stream": {"schema": SSE_EVENT}},
        }
    return {
        "description": "OK",
        "content": {"application/json": {"schema": {"$ref": _ref(operation.response)}}},
    }


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _ref(schemas.ErrorBody)}}},
    }


def _ref(model: type[BaseModel]) -> str:
    return REF.format(model=model.__name__)


def main() -> None:
    json.dump(document(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
