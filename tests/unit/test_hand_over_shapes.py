"""The hand-overs, held to the Lambda Web Adapter's own contract.

The adapter (v0.9.1) reads an invocation with `lambda_http` 0.14: as an API Gateway REST
proxy event if it can, else (HTTP API, ALB and WebSocket aside) it posts the payload to
`/events` as it is. So a resume handed over to the resume function must read as REST,
or it lands on the tap path; a tap handed over must not, or it is routed as a request.
`rest_event_problem` spells that rule out (`aws_lambda_events::apigw::ApiGatewayProxyRequest`:
which fields are required, which typed); these tests hold it to the event shapes of the
adapter's runtime's fixtures (its `example-apigw-*-request.json`: written again here in
their shape, with values of our own), and the hand-overs to it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from interlock.api.forward import rest_event_problem, resume_event, tap_event
from interlock.channels import Tap

# API Gateway's REST proxy event for a method behind a Cognito user pool authorizer.
REST_EVENT: dict[str, Any] = {
    "resource": "/runs",
    "path": "/runs",
    "httpMethod": "POST",
    "headers": {"Accept": "text/event-stream", "Content-Type": "application/json"},
    "multiValueHeaders": {"Accept": ["text/event-stream"], "Content-Type": ["application/json"]},
    "queryStringParameters": None,
    "multiValueQueryStringParameters": None,
    "pathParameters": None,
    "stageVariables": None,
    "requestContext": {
        "accountId": "123456789012",
        "apiId": "a1b2c3d4e5",
        "authorizer": {"claims": {"sub": "alice", "cognito:groups": "reporter", "token_use": "id"}},
        "domainName": "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com",
        "domainPrefix": "a1b2c3d4e5",
        "extendedRequestId": "Xyz1=",
        "httpMethod": "POST",
        "identity": {"sourceIp": "203.0.113.7", "userAgent": "node", "accountId": None},
        "path": "/v1/runs",
        "protocol": "HTTP/1.1",
        "requestId": "c0ffee00-0000-4000-8000-000000000001",
        "requestTime": "02/Dec/2026:03:00:00 +0000",
        "requestTimeEpoch": 1796180400000,
        "resourceId": "abc123",
        "resourcePath": "/runs",
        "stage": "v1",
    },
    "body": '{"threadId": "c1"}',
    "isBase64Encoded": False,
}
# The same context as the adapter hands it to the app in `x-amzn-request-context`: its
# own serialization, with every absent option written as null.
SERIALIZED_CONTEXT: dict[str, Any] = {
    **{key: None for key in ("resourceId", "domainPrefix", "protocol")},
    **{k: v for k, v in REST_EVENT["requestContext"].items() if k != "extendedRequestId"},
    "identity": {
        key: None
        for key in (
            "cognitoIdentityPoolId",
            "accountId",
            "cognitoIdentityId",
            "caller",
            "apiKey",
            "apiKeyId",
            "accessKey",
            "cognitoAuthenticationType",
            "cognitoAuthenticationProvider",
            "userArn",
            "user",
        )
    }
    | {"sourceIp": "203.0.113.7", "userAgent": "node"},
}


def test_api_gateways_rest_events_read_as_rest() -> None:
    assert rest_event_problem(REST_EVENT) is None
    # As the console's test tool sends one: no headers, no authorizer, nothing optional
    bare = {"httpMethod": "GET", "requestContext": {"httpMethod": "GET"}}
    assert rest_event_problem(bare) is None


def test_a_resume_hand_over_reads_as_rest_with_the_callers_context_unchanged() -> None:
    for accept in ("application/json", "text/event-stream"):
        event = resume_event(SERIALIZED_CONTEXT, '{"threadId": "c1"}', accept)
        assert rest_event_problem(json.loads(json.dumps(event))) is None
        assert event["requestContext"]["authorizer"] == REST_EVENT["requestContext"]["authorizer"]
        assert event["requestContext"]["requestTimeEpoch"] == 1796180400000


def test_a_tap_hand_over_is_passed_through_to_the_tap_path() -> None:
    tap = Tap("telegram", "1001", "c1", "f1", "resolved", None, choice="a")
    assert rest_event_problem(tap_event(tap, lambda body: "c2lnbmVk")) is not None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda e: e.pop("httpMethod"), "no httpMethod"),
        (lambda e: e.update(httpMethod="PO ST"), "no httpMethod"),
        (lambda e: e.pop("requestContext"), "no requestContext object"),
        (lambda e: e["requestContext"].pop("httpMethod"), "no requestContext.httpMethod"),
        (lambda e: e["requestContext"].update(requestTimeEpoch="1796180400000"), "whole number"),
        (lambda e: e["requestContext"]["identity"].update(sourceIp=7), "identity"),
        (lambda e: e["requestContext"].update(identity=None), "identity"),
        (lambda e: e["requestContext"].update(authorizer=["claims"]), "authorizer"),
        (lambda e: e.update(headers=[["Accept", "*/*"]]), "headers is not an object"),
        (lambda e: e.update(body={"threadId": "c1"}), "body is not a string"),
        (lambda e: e.update(isBase64Encoded="false"), "isBase64Encoded"),
    ],
)
def test_each_shape_the_adapter_would_not_read_as_rest_is_named(change: Any, problem: str) -> None:
    event = copy.deepcopy(REST_EVENT)
    change(event)
    assert problem in (rest_event_problem(event) or "")


def _run_app(monkeypatch: pytest.MonkeyPatch, function: str) -> TestClient:
    from interlock.api.stream import create_app

    monkeypatch.setenv("INTERLOCK_FUNCTION", function)
    monkeypatch.setenv("INTERLOCK_RESUME_FUNCTION", "interlock-resume")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Interlock")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    return TestClient(create_app(), raise_server_exceptions=False)


def _metrics(out: str) -> list[str]:
    names = []
    for line in out.splitlines():
        if line.startswith("{") and "_aws" in line:
            blob = json.loads(line)
            names += [m["Name"] for d in blob["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]]
    return names


def test_a_resume_the_adapter_would_misroute_is_never_handed_over(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a run request whose context would make the hand-over unreadable as REST
    broken = {**SERIALIZED_CONTEXT, "requestTimeEpoch": "soon"}
    answer = {"threadId": "c1", "runId": "r2", "messages": [], "state": {}}
    answer["resume"] = [{"interruptId": "i1", "status": "resolved", "payload": {}}]

    response = _run_app(monkeypatch, "run").post(
        "/runs", json=answer, headers={"x-amzn-request-context": json.dumps(broken)}
    )

    # Then it fails as the system's error, counted for its alarm: not a person's refusal,
    # and nothing reached the resume function (whose client was never made)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "system_error"
    assert "MisroutedHandOvers" in _metrics(capsys.readouterr().out)


def test_anything_but_a_tap_on_the_tap_path_is_a_failed_invocation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the resume function's app, reached on the adapter's pass-through path by a
    # resume the adapter could not read as REST
    response = _run_app(monkeypatch, "resume").post("/events", json=REST_EVENT)

    # Then the invocation fails (502: AWS_LWA_ERROR_STATUS_CODES makes it Lambda's error,
    # so it is retried and alarmed), never answered as a refusal
    assert response.status_code == 502
    assert "MisroutedHandOvers" in _metrics(capsys.readouterr().out)
