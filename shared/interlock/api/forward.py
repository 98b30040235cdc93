"""One AG-UI endpoint: a run whose body carries `resume` is handed to the resume function.

Only the resume function may claim a request (its role alone holds the claim's
permissions), so the run function never answers a resume itself. It hands the request,
as API Gateway gave it, to the resume function and returns that function's response
unchanged. Deployed, the hand-over is a synchronous Lambda invoke; the local server
plugs in the resume handler it has already loaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from interlock import errors

Forward = Callable[[dict[str, Any]], dict[str, Any]]
"""Hands an API Gateway proxy event (already addressed by `as_resume`) to the resume
function; returns its proxy result."""

RESUME_PATH: Final = "/resume"


def as_resume(event: dict[str, Any]) -> dict[str, Any]:
    """The same request, addressed to the resume route."""
    context = dict(event.get("requestContext") or {})
    stage = context.get("stage")
    context.update(
        resourcePath=RESUME_PATH, path=f"/{stage}{RESUME_PATH}" if stage else RESUME_PATH
    )
    return {**event, "resource": RESUME_PATH, "path": RESUME_PATH, "requestContext": context}


class LambdaForward:
    """The hand-over as a synchronous invoke of the resume function.

    Args:
        client: A boto3 Lambda client (injected).
        function_name: The resume function's name or ARN.
    """

    def __init__(self, client: Any, function_name: str) -> None:
        self._client = client
        self._function = function_name

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._client.invoke(
                FunctionName=self._function,
                InvocationType="RequestResponse",
                Payload=json.dumps(event).encode(),
            )
        except Exception as exc:  # botocore's errors: the hand-over itself failed
            raise errors.StoreError(f"the resume could not be handed over: {exc}") from exc
        payload = response["Payload"].read()
        if response.get("FunctionError"):
            raise errors.StoreError("the resume function failed before it answered")
        result: dict[str, Any] = json.loads(payload)
        return result
