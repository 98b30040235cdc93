"""The run function's hand-over of a resume, through boto3's Lambda client, to a fake
Lambda invoke endpoint on 127.0.0.1 (the client code is the deployed path's)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import boto3
import pytest

from interlock import errors
from interlock.api.forward import LambdaForward, as_resume

PROXY_RESULT = {"statusCode": 200, "headers": {"Content-Type": "text/event-stream"}, "body": "x"}


class FakeLambda(BaseHTTPRequestHandler):
    """Lambda's Invoke API: records each call; fails the function named `broken`."""

    calls: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        payload = json.loads(self.rfile.read(length))
        name = self.path.split("/functions/")[1].split("/")[0]
        FakeLambda.calls.append((name, payload))
        body = json.dumps(PROXY_RESULT if name != "broken" else {"errorMessage": "boom"})
        self.send_response(200)
        if name == "broken":
            self.send_header("X-Amz-Function-Error", "Unhandled")
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def lambda_client() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLambda)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeLambda.calls = []
    try:
        yield boto3.client(
            "lambda",
            endpoint_url=f"http://127.0.0.1:{server.server_port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
    finally:
        server.shutdown()
        server.server_close()


def run_event() -> dict[str, Any]:
    return {
        "resource": "/runs",
        "path": "/runs",
        "httpMethod": "POST",
        "requestContext": {"stage": "v1", "path": "/v1/runs", "resourcePath": "/runs"},
        "body": "{}",
    }


def test_a_resume_posted_to_the_run_endpoint_reaches_the_resume_function_whole(
    lambda_client: Any,
) -> None:
    result = LambdaForward(lambda_client, "interlock-resume")(as_resume(run_event()))

    assert result == PROXY_RESULT
    ((name, event),) = FakeLambda.calls
    assert name == "interlock-resume"
    assert (event["resource"], event["path"]) == ("/resume", "/resume")
    assert event["requestContext"]["path"] == "/v1/resume"
    assert event["body"] == "{}"


def test_a_resume_function_that_fails_is_a_system_error(lambda_client: Any) -> None:
    with pytest.raises(errors.StoreError, match="failed before it answered"):
        LambdaForward(lambda_client, "broken")(as_resume(run_event()))
