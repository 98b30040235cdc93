"""One AG-UI endpoint: a run whose body carries `resume` is handed to the resume function.

Only the resume function may claim a request (its role alone holds the claim's
permissions), so the run function never answers a resume itself. Deployed, it invokes
the resume function with response streaming, giving it the request as API Gateway would,
the person's token included, and relays the answer as it streams. The resume function
verifies that token itself (`interlock.api.identity`): the context the run function
hands it is no evidence of who answers. Locally one process serves both routes, so
there is nothing to hand over.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict
from typing import Any, Final

from interlock import errors
from interlock.api.live import Opened
from interlock.channels import Tap

RESUME_PATH: Final = "/resume"
# The Lambda HTTP integration response format: a JSON prelude (status and headers),
# eight NUL bytes, then the body as it streams. The Web Adapter writes it.
_PRELUDE_END: Final = b"\0" * 8
_MAX_PRELUDE: Final = 64 * 1024


def resume_event(
    context: Mapping[str, Any],
    body: str,
    accept: str = "application/json",
    authorization: str | None = None,
) -> dict[str, Any]:
    """The API Gateway proxy event of a resume: the same body, what the client accepts
    (an event stream hears refusals as `RUN_ERROR`) and the person's own token, which
    the resume function verifies itself (it believes no context it is handed)."""
    stage = context.get("stage")
    request_context = {
        **context,
        "resourcePath": RESUME_PATH,
        "httpMethod": "POST",
        "path": f"/{stage}{RESUME_PATH}" if stage else RESUME_PATH,
    }
    headers = {"Content-Type": "application/json", "Accept": accept}
    if authorization:
        headers["Authorization"] = authorization
    return {
        "resource": RESUME_PATH,
        "path": RESUME_PATH,
        "httpMethod": "POST",
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": request_context,
        "body": body,
        "isBase64Encoded": False,
    }


# An HTTP method as the adapter's `http::Method` parses one: an RFC 9110 token.
_METHOD: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_STRINGS_OR_NULL: Final = ("resource", "path", "body")
_MAPS_OR_NULL: Final = (
    "headers",
    "multiValueHeaders",
    "queryStringParameters",
    "multiValueQueryStringParameters",
    "pathParameters",
    "stageVariables",
)


def rest_event_problem(event: Any) -> str | None:
    """Why the Lambda Web Adapter would not read `event` as an API Gateway REST request,
    or None when it would.

    The adapter (v0.9.1, on `lambda_http` 0.14) tries the REST proxy event first, then
    HTTP API, ALB and WebSocket events, and passes anything else through to
    `AWS_LWA_PASS_THROUGH_PATH` (`/events`) as a plain body. So a hand-over it cannot read
    as REST is not refused: it is routed to the tap path. This is its REST event's
    contract (`aws_lambda_events::apigw::ApiGatewayProxyRequest`): `httpMethod` at the
    top and in `requestContext`, which must be an object; `requestContext.identity` may be
    absent but not null; every other field may be absent or null, but where present it
    must have its type.
    """
    if not isinstance(event, dict):
        return "the event is not a JSON object"
    if not _is_method(event.get("httpMethod")):
        return "no httpMethod"
    context = event.get("requestContext")
    if not isinstance(context, dict):
        return "no requestContext object"
    if not _is_method(context.get("httpMethod")):
        return "no requestContext.httpMethod"
    for name in _STRINGS_OR_NULL:
        if event.get(name) is not None and not isinstance(event[name], str):
            return f"{name} is not a string"
    for name in _MAPS_OR_NULL:
        if event.get(name) is not None and not isinstance(event[name], dict):
            return f"{name} is not an object"
    if not isinstance(event.get("isBase64Encoded", False), bool | None):
        return "isBase64Encoded is not a boolean"
    epoch = context.get("requestTimeEpoch", 0)
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        return "requestContext.requestTimeEpoch is not a whole number"
    # `identity` may be absent, but not null: serde's default covers a missing field only.
    identity = context.get("identity", {})
    if not isinstance(identity, dict) or any(
        value is not None and not isinstance(value, str) for value in identity.values()
    ):
        return "requestContext.identity is not an object of strings"
    if context.get("authorizer") is not None and not isinstance(context["authorizer"], dict):
        return "requestContext.authorizer is not an object"
    return None


def _is_method(value: Any) -> bool:
    return isinstance(value, str) and _METHOD.fullmatch(value) is not None


class HandOverMisrouted(RuntimeError):
    """A hand-over the adapter would route to the wrong path.

    A bug, never a person's refusal: it is not an `InterlockError`, so it is logged with
    its traceback and answered as an opaque 500, and counted (`MisroutedHandOvers`,
    alarmed).
    """


class LambdaForward:
    """The hand-over as an `InvokeWithResponseStream` of the resume function.

    Args:
        client: A boto3 Lambda client (injected).
        function_name: The resume function's name or ARN.
    """

    def __init__(self, client: Any, function_name: str) -> None:
        self._client = client
        self._function = function_name

    def __call__(self, event: dict[str, Any]) -> Opened:
        """Invoke; returns the answer's status, headers and body chunks as they stream.

        Raises:
            StoreError: the invoke failed, or the function failed before it answered.
        """
        try:
            response = self._client.invoke_with_response_stream(
                FunctionName=self._function, Payload=json.dumps(event).encode()
            )
        except Exception as exc:  # botocore's errors: the hand-over itself failed
            raise errors.StoreError(f"the resume could not be handed over: {exc}") from exc
        return split_prelude(_payload(response["EventStream"]))


def _payload(stream: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    for event in stream:
        if chunk := event.get("PayloadChunk"):
            yield chunk["Payload"]
        elif (done := event.get("InvokeComplete")) and done.get("ErrorCode"):
            raise errors.StoreError("the resume function failed before it answered")


def split_prelude(chunks: Iterator[bytes]) -> Opened:
    """Read the prelude off a streamed HTTP integration response.

    Raises:
        StoreError: the stream ended, or grew too long, before its prelude did.
    """
    head = b""
    for chunk in chunks:
        head += chunk
        if _PRELUDE_END in head:
            break
        if len(head) > _MAX_PRELUDE:
            raise errors.StoreError("the resume function's answer has no prelude")
    prelude, found, rest = head.partition(_PRELUDE_END)
    if not found:
        raise errors.StoreError("the resume function ended before it answered")
    meta = json.loads(prelude)
    headers = [
        (name.lower().encode(), str(value).encode())
        for name, value in (meta.get("headers") or {}).items()
        if not name.lower().startswith("access-control-")  # the run function's own
    ]

    def body() -> Iterator[bytes]:
        if rest:
            yield rest
        yield from chunks

    return int(meta.get("statusCode", 500)), headers, body()


TAP_EVENT: Final = "interlockTap"
TAP_MAC: Final = "mac"


def tap_event(tap: Tap, sign: Callable[[Mapping[str, Any]], str]) -> dict[str, Any]:
    """A screened tap as the event the resume function is invoked with, signed with
    the hand-over key (`interlock.adapters.handover`)."""
    body = asdict(tap)
    return {TAP_EVENT: body, TAP_MAC: sign(body)}


def read_tap_event(event: Any) -> tuple[Tap, dict[str, Any], str | None]:
    """The tap an event carries, the body its MAC covers, and the MAC (None: unsigned).

    Raises:
        InvalidInput: not a tap event.
    """
    body = event.get(TAP_EVENT) if isinstance(event, dict) else None
    if not isinstance(body, dict):
        raise errors.InvalidInput("not a tap event")
    try:
        tap = Tap(**body)
    except TypeError:
        raise errors.InvalidInput("not a tap event") from None
    mac = event.get(TAP_MAC)
    return tap, body, mac if isinstance(mac, str) else None
