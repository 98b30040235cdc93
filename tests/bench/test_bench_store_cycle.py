"""The store benchmark keeps running and its countable targets keep holding."""

from __future__ import annotations

from typing import Any

from bench.store_cycle import Meter, run_cycle
from interlock.adapters.factory import build_stores


def test_store_cycle_meets_its_call_targets(server_aws: dict[str, Any]) -> None:
    stores = build_stores(
        server_aws["dynamodb"], server_aws["s3"], server_aws["table"], server_aws["bucket"]
    )
    meter = Meter()
    meter.attach(server_aws["dynamodb"])
    meter.attach(server_aws["s3"])

    figures = run_cycle(stores, meter)

    # Even the demo-sized snapshot is an S3 object, PUT before its pointer
    assert figures["pause"]["calls"] == {"s3.PutObject": 1, "dynamodb.PutItem": 1}
    assert figures["resume_decision_win"]["dynamodb_round_trips"] == 2
    assert figures["resume_decision_lose"]["dynamodb_round_trips"] == 2
    assert figures["resume_decision_lose"]["loser_error"].startswith("ResumeInProgress")
    assert all(figures["targets"][k] for k in ("pause_writes_met", "decision_met"))
