"""The run function's hand-over of a resume: boto3's `InvokeWithResponseStream` against
a fake Lambda endpoint on 127.0.0.1 that speaks the real event-stream framing (the
client code is the deployed path's), and the run app relaying what streams back."""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import boto3
import pytest
from starlette.testclient import TestClient

from interlock import errors
from interlock.api.forward import LambdaForward, resume_event, split_prelude

CONTEXT = {
    "stage": "v1",
    "path": "/v1/runs",
    "resourcePath": "/runs",
    "requestId": "req-1",
    "authorizer": {"claims": {"sub": "alice", "cognito:groups": "reporter"}},
}
PRELUDE = {"statusCode": 200, "headers": {"content-type": "text/event-stream"}}
BODY = [b"data: one\n\n", b": keepalive\n\n", b"data: two\n\n"]


def frame(event_type: str, payload: bytes, content_type: str) -> bytes:
    """One message of AWS's event-stream encoding (prelude, headers, payload, CRCs)."""
    headers = b""
    for name, value in (
        (":event-type", event_type),
        (":message-type", "event"),
        (":content-type", content_type),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + len(raw).to_bytes(2, "big") + raw
    total = 12 + len(headers) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(headers).to_bytes(4, "big")
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + headers + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


class FakeLambda(BaseHTTPRequestHandler):
    """Lambda's streaming invoke: the function `interlock-resume` answers in the HTTP
    integration format, split mid-prelude; `broken` fails before answering."""

    calls: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        payload = json.loads(self.rfile.read(length))
        name = self.path.split("/functions/")[1].split("/")[0]
        FakeLambda.calls.append((name, payload))
        if name == "missing":
            self.send_response(404)
            self.send_header("x-amzn-ErrorType", "ResourceNotFoundException")
            self.end_headers()
            self.wfile.write(b'{"Type":"User","message":"Function not found"}')
            return
        if name == "broken":
            done = json.dumps({"ErrorCode": "Unhandled", "ErrorDetails": "boom"}).encode()
            frames = [frame("InvokeComplete", done, "application/json")]
        else:
            stream = json.dumps(PRELUDE).encode() + b"\0" * 8 + b"".join(BODY)
            cut = len(json.dumps(PRELUDE)) // 2  # the prelude arrives in two pieces
            pieces = [stream[:cut], stream[cut : cut + 40], stream[cut + 40 :]]
            frames = [frame("PayloadChunk", p, "application/octet-stream") for p in pieces]
            frames.append(frame("InvokeComplete", b"{}", "application/json"))
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("Content-Length", str(sum(len(f) for f in frames)))
        self.end_headers()
        for f in frames:
            self.wfile.write(f)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def lambda_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLambda)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeLambda.calls = []
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def lambda_client(endpoint: str) -> Any:
    return boto3.client(
        "lambda",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_a_resume_reaches_the_resume_function_as_api_gateway_would_send_it(
    lambda_endpoint: str,
) -> None:
    status, headers, body = LambdaForward(lambda_client(lambda_endpoint), "interlock-resume")(
        resume_event(CONTEXT, '{"threadId": "c1"}')
    )

    assert status == 200 and (b"content-type", b"text/event-stream") in headers
    assert b"".join(body) == b"".join(BODY)
    ((name, event),) = FakeLambda.calls
    assert name == "interlock-resume"
    assert (event["resource"], event["path"], event["httpMethod"]) == ("/resume",) * 2 + ("POST",)
    assert event["requestContext"]["path"] == "/v1/resume"
    # The caller is the one the authorizer established for the run request, unchanged.
    assert event["requestContext"]["authorizer"] == CONTEXT["authorizer"]
    assert event["body"] == '{"threadId": "c1"}'


def test_a_resume_function_that_fails_or_is_missing_is_a_system_error(
    lambda_endpoint: str,
) -> None:
    client = lambda_client(lambda_endpoint)
    with pytest.raises(errors.StoreError, match="failed before it answered"):
        LambdaForward(client, "broken")(resume_event(CONTEXT, "{}"))
    with pytest.raises(errors.StoreError, match="could not be handed over"):
        LambdaForward(client, "missing")(resume_event(CONTEXT, "{}"))


def test_a_stream_without_its_prelude_is_refused() -> None:
    with pytest.raises(errors.StoreError, match="ended before it answered"):
        split_prelude(iter([b'{"statusCode": 200}']))


def test_the_run_function_relays_a_resume_as_it_streams(
    lambda_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interlock.api.stream import create_app

    monkeypatch.setenv("INTERLOCK_FUNCTION", "run")
    monkeypatch.setenv("INTERLOCK_RESUME_FUNCTION", "interlock-resume")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Interlock")
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", lambda_endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    answer = {
        "threadId": "c1",
        "runId": "r2",
        "state": {},
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "resume": [{"interruptId": "i1", "status": "resolved", "payload": {}}],
    }
    from interlock.api.wiring import lambda_client

    lambda_client.cache_clear()  # made once per container: this one points at the fake
    app = create_app()  # no lifespan: the relay needs no agent
    response = TestClient(app).post(
        "/runs",
        json=answer,
        headers={"x-amzn-request-context": json.dumps(CONTEXT)},
    )

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.content == b"".join(BODY)
    ((_, event),) = FakeLambda.calls
    assert json.loads(event["body"]) == answer
    assert event["requestContext"]["authorizer"]["claims"]["sub"] == "alice"


def test_the_streaming_app_refuses_a_request_without_the_authorizers_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from interlock.api.stream import create_app

    monkeypatch.setenv("INTERLOCK_FUNCTION", "run")
    response = TestClient(create_app()).post("/runs", json={"threadId": "c1"})

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


class _AcceptingKey:
    """A hand-over key that signs and verifies everything: this test is about what
    follows a valid signature (`tests/unit/test_hand_over_trust.py` is about the key)."""

    def sign(self, tap: Any) -> str:
        return "c2lnbmVk"

    def verify(self, tap: Any, mac: str) -> bool:
        return True


ACCEPTING = _AcceptingKey()


def test_a_tap_hand_over_that_raises_is_a_failed_invocation_not_a_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import interlock.api.stream as stream
    import interlock.respond as respond
    from interlock.api.forward import tap_event
    from interlock.channels import Tap

    def broken(rt: object, tap: Tap) -> None:
        raise RuntimeError("the store fell over")

    monkeypatch.setenv("INTERLOCK_FUNCTION", "resume")
    monkeypatch.setattr(respond, "apply_tap", broken)
    monkeypatch.setattr(stream, "runtime", lambda: None)
    monkeypatch.setattr(stream, "hand_over_key", lambda: ACCEPTING)
    tap = Tap("slack", "U1", "c1", "abcd", "resolved", None, choice="approve")

    response = TestClient(stream.create_app()).post(
        stream.EVENTS_PATH, json=tap_event(tap, ACCEPTING.sign)
    )

    # The one status the adapter is told to fail the invocation on (so Lambda retries)
    assert response.status_code == stream.HAND_OVER_FAILED == 502
    assert "approve" not in response.text


class _UnreachableKey:
    """A hand-over key whose KMS cannot be reached."""

    def sign(self, tap: Any) -> str:
        return "c2lnbmVk"

    def verify(self, tap: Any, mac: str) -> bool:
        raise ConnectionError("KMS is unreachable")


def test_a_tap_whose_signature_cannot_be_checked_is_a_failed_invocation_not_a_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import interlock.api.stream as stream
    import interlock.respond as respond
    from interlock.api.forward import tap_event
    from interlock.channels import Tap

    applied: list[Tap] = []
    monkeypatch.setenv("INTERLOCK_FUNCTION", "resume")
    monkeypatch.setattr(respond, "apply_tap", lambda rt, tap: applied.append(tap))
    monkeypatch.setattr(stream, "runtime", lambda: None)
    monkeypatch.setattr(stream, "hand_over_key", lambda: _UnreachableKey())
    tap = Tap("slack", "U1", "c1", "abcd", "resolved", None, choice="a")

    response = TestClient(stream.create_app()).post(
        stream.EVENTS_PATH, json=tap_event(tap, _UnreachableKey().sign)
    )

    # Failed, so Lambda retries it (a 403 would drop the person's tap for good)
    assert response.status_code == stream.HAND_OVER_FAILED
    assert applied == []
