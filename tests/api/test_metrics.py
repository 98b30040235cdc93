"""The handlers publish their metrics as CloudWatch EMF through Powertools."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.support import auth, resume_body, run_body, stream


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")

    def read() -> dict[str, list[Any]]:
        metrics: dict[str, list[Any]] = {}
        for line in capsys.readouterr().out.splitlines():
            if not line.startswith("{") or "_aws" not in line:
                continue
            blob = json.loads(line)
            for directive in blob["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    dims = {d: blob.get(d) for group in directive["Dimensions"] for d in group}
                    metrics.setdefault(metric["Name"], []).append((blob[metric["Name"]], dims))
        return metrics

    return read


def test_resume_publishes_wait_time_and_the_decision(api: Any, published: Any) -> None:
    client, key = api
    paused = stream(
        client.post("/runs", data=run_body("c1", "download the table"), headers=auth(key))
    )
    interrupt = paused[-1].outcome.interrupts[0]
    stream(
        client.post(
            "/resume", headers=auth(key), data=resume_body("c1", interrupt, {"decision": "approve"})
        )
    )

    metrics = published()

    assert metrics["Turns"][0][0] == [1.0]
    assert "Interrupts" in metrics and "Resumes" in metrics
    assert "UserWaitMs" in metrics
    ((_, dims),) = metrics["Decisions"]
    assert dims.get("decision") == "approved"


def test_cancelling_publishes_a_cancellation(api: Any, published: Any) -> None:
    client, key = api
    stream(client.post("/runs", data=run_body("c1", "write a summary"), headers=auth(key)))
    assert client.delete("/chats/c1/request", headers=auth(key)).status_code == 200
    assert "Cancellations" in published()


def test_the_sweeper_queues_an_overdue_request_and_the_settle_lambda_settles_it(
    moto_api: Any, published: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    from interlock.adapters.queue import create_settle_queues
    from interlock.api import wiring
    from local.sqs_poller import LambdaSqsPoller

    # Given an overdue request, and the settle queue the two functions share
    client, key = moto_api
    stream(client.post("/runs", data=run_body("c1", "download the table"), headers=auth(key)))
    boto3.client("dynamodb").update_item(
        TableName="api-table",
        Key={"pk": {"S": "CHAT#c1"}, "sk": {"S": "REQUEST"}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": "1"}},
    )
    sqs = boto3.client("sqs")
    url, _ = create_settle_queues(sqs, "settle", visibility_timeout_s=1800)
    monkeypatch.setenv("INTERLOCK_SETTLE_QUEUE_URL", url)
    wiring.settle_queue.cache_clear()

    # When the scheduled sweeper runs, then the settle function takes its message
    try:
        found = _handler("sweeper").lambda_handler({"source": "aws.events"}, _Context())
        poller = LambdaSqsPoller(sqs, url, _handler("settle").lambda_handler, context=_Context())
        poller.poll_once()
    finally:
        wiring.settle_queue.cache_clear()  # made once per container: this one is the mock's

    # Then the request was queued once and settled, and each function counted its part
    assert (found["found"], found["enqueued"]) == (1, 1)
    assert (poller.counts.records, poller.counts.deleted, poller.counts.failed) == (1, 1, 0)
    metrics = published()
    assert metrics["SettlesQueued"][0][0] == [1.0]
    assert metrics["Timeouts"][0][0] == [1.0]
    view = client.get("/chats/c1/request", headers=auth(key)).json
    assert (view["state"], view["decision"]) == ("done", "timed_out")


def _handler(name: str) -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "functions" / name / "handler.py"
    spec = importlib.util.spec_from_file_location(f"{name}_handler", path)
    assert spec and spec.loader
    handler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handler)
    return handler


class _Context:
    function_name = "interlock-sweeper"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:sweeper"
    aws_request_id = "sweep-1"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000
