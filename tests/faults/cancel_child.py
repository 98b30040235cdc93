"""One process of a cancel crash cell: a person approves and its worker dies right after
the claim (`approve`), or the person cancels (`cancel`), under a fault: SIGKILLed before
or after the n-th AWS call, or that call answering unclearly.

Forked by a zygote (`tests/faults/zygote.py`); it holds nothing but the addresses of the
moto server, so whatever survives is in the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3

from interlock import manage
from interlock.adapters.factory import build_stores
from interlock.resume import resume_turn
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, TurnLimits
from tests.agent.support import Models
from tests.faults.injector import FaultPlan

_SESSION = boto3.session.Session(region_name="us-east-1")
for _service in ("dynamodb", "s3"):
    _SESSION.client(_service, endpoint_url="http://127.0.0.1:9")


def child_main(spec: dict[str, Any]) -> None:
    """One cell's phase under the spec's fault."""
    config = boto3.session.Config(retries={"max_attempts": 1})
    dynamodb = _SESSION.client("dynamodb", endpoint_url=spec["endpoint"], config=config)
    s3 = _SESSION.client("s3", endpoint_url=spec["endpoint"], config=config)
    stores = build_stores(dynamodb, s3, spec["table"], spec["bucket"])
    downloads = Path(spec["downloads"])

    def fetch(url: str) -> str:
        with downloads.open("a") as log:
            log.write(url + "\n")
        return "id,value\n1,42"

    rt = Runtime(
        stores,
        Models(),
        clock=ManualClock(int(spec["now_ms"])),
        fetch=fetch,
        limits=TurnLimits(heartbeat_s=600),
        worker_id=f"{spec['action']}-child",
    )
    caller = Caller(spec["user"], frozenset({"reporter"}), trace_id="cancel-cell")
    FaultPlan(at=spec["at"], mode=spec["mode"], op=spec.get("op"), nth=0).attach(dynamodb, s3)
    if spec["action"] == "approve":
        resume_turn(
            rt,
            caller,
            spec["chat"],
            interrupt_id=spec["interrupt_id"],
            secret=spec["secret"],
            status="resolved",
            payload={"decision": "approve"},
        )
    else:
        manage.cancel_request(stores, caller, spec["chat"], int(spec["now_ms"]))
