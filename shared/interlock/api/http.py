"""What every handler shares: identity from the authorizer, responses, route binding."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from interlock import errors
from interlock.api.errors import NotFound, Unauthorized, error_body
from interlock.api.identity import GROUP_NAME
from interlock.api.routes import Function, routes_of
from interlock.caller import Caller
from interlock.config import deployment

if TYPE_CHECKING:
    # Imported where used: the streaming app shares `caller_from` and the headers but
    # never the Powertools resolver (a cold-start cost of tens of milliseconds).
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver, CORSConfig, Response

JSON = "application/json"
ALLOWED_HEADERS = ("Authorization", "Content-Type")


def cors_config() -> CORSConfig:
    """CORS for the card page's origin (`INTERLOCK_ALLOWED_ORIGIN`; same-origin if unset).

    API Gateway answers preflights itself but not the handlers' responses, so the
    handlers must add the headers for a browser to read them.
    """
    from aws_lambda_powertools.event_handler import CORSConfig

    return CORSConfig(
        allow_origin=deployment().allowed_origin,
        allow_headers=list(ALLOWED_HEADERS),
    )


def caller_from(event: Any) -> Caller:
    """The caller as the API Gateway Cognito authorizer established it.

    Identity and roles come only from `requestContext.authorizer.claims`; a body or a
    tool argument can never name the user.
    """
    context = event.get("requestContext") or {}
    claims = (context.get("authorizer") or {}).get("claims") or {}
    user = claims.get("sub")
    if not isinstance(user, str) or not user:
        raise Unauthorized("no authenticated user on this request")
    return Caller(
        user_id=user,
        roles=_groups(claims.get("cognito:groups")),
        trace_id=context.get("requestId"),
    )


def _groups(raw: Any) -> frozenset[str]:
    """The caller's groups from `cognito:groups`, in each form it arrives in:

    - a JSON list of names: a direct invocation (and local mode), which pass the
      claims as objects;
    - one bare name (`reporter`), or names separated by commas (`admin,reporter`): API
      Gateway REST's Cognito authorizer, which flattens the token's list into text;
    - bracketed names separated by single spaces (`[admin reporter]`, or `[admin]` for
      one): an HTTP API's JWT authorizer.

    No group name may hold a comma, a space or a bracket (`GROUP_NAME`), so each form
    reads exactly one way. None, an empty string or an empty list: no groups.

    Raises:
        Forbidden: any other shape, or a name that breaks `GROUP_NAME` (an empty one
            between two separators included): refused outright rather than guessed at.
    """
    if raw is None or raw == "" or raw == []:
        return frozenset()
    if isinstance(raw, list):
        names = raw
    elif not isinstance(raw, str):
        names = [raw]  # kept whole, to be refused below
    elif raw.startswith("[") and raw.endswith("]"):
        names = raw[1:-1].split(" ")
    else:
        names = raw.split(",")
    unreadable = [n for n in names if not (isinstance(n, str) and GROUP_NAME.fullmatch(n))]
    if unreadable:
        raise errors.Forbidden(
            "this account's groups cannot be read unambiguously: group names may hold "
            "letters, digits and . _ @ : - only"
        )
    return frozenset(names)


def json_response(body: Any, status: int = 200) -> Response[str]:
    """A JSON response. Never cached: every body is one user's, some carry a secret."""
    from aws_lambda_powertools.event_handler import Response

    return Response(
        status, JSON, json.dumps(body, separators=(",", ":")), headers={"Cache-Control": "no-store"}
    )


def bind(
    app: APIGatewayRestResolver,
    function: Function,
    handlers: Mapping[tuple[str, str], Callable[..., Response[str]]],
) -> None:
    """Register exactly the routes the route table gives `function`, and the error map.

    Raises:
        ValueError: the handlers and the route table disagree.
    """
    wanted = {(r.method, r.path) for r in routes_of(function)}
    if set(handlers) != wanted:
        raise ValueError(f"{function} handlers {sorted(handlers)} != routes {sorted(wanted)}")
    for (method, path), handler in handlers.items():
        app.route(path.replace("{", "<").replace("}", ">"), method=method)(handler)

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def _on_error(exc: Exception) -> Response[str]:
        status, body = error_body(exc)
        return json_response(body, status)

    @app.not_found
    def _not_found(exc: Exception) -> Response[str]:
        status, body = error_body(NotFound("no such route"))
        return json_response(body, status)
