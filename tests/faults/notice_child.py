"""One process of a notice crash cell: post a request's card (`open`) or edit it
(`settle`) on Slack, under a fault: SIGKILLed before or after the n-th AWS call (or
that call failing), or SIGKILLed on either side of the platform's own call.

Run as `python -m tests.faults.notice_child '<spec json>'`; it holds nothing but the
addresses of the moto server and of the Slack fake, so whatever survives is in the table.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import boto3

from interlock.adapters.factory import build_stores
from interlock.adapters.slack import SlackChannel
from interlock.adapters.webclient import JsonHttp
from interlock.notify import Notifier
from tests.faults.injector import FaultPlan


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class _Dying(SlackChannel):
    """Slack, but the process dies on one side of the platform call."""

    def __init__(self, http: JsonHttp, when: str) -> None:
        super().__init__(http)
        self._when = when

    def post(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self._around(super().post, *args, **kwargs)

    def settle(self, *args: Any, **kwargs: Any) -> None:
        self._around(super().settle, *args, **kwargs)

    def _around(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        if self._when == "kill_before":
            _die()
        result = call(*args, **kwargs)
        if self._when == "kill_after":
            _die()
        return result


def main(spec: dict[str, Any]) -> None:
    session = boto3.session.Session(region_name="us-east-1")
    dynamodb = session.client("dynamodb", endpoint_url=spec["endpoint"])
    s3 = session.client("s3", endpoint_url=spec["endpoint"])
    stores = build_stores(dynamodb, s3, spec["table"], spec["bucket"])
    http = JsonHttp(spec["slack"], {"Authorization": f"Bearer {spec['token']}"})
    channel = _Dying(http, spec["platform"])
    now_ms = int(spec["now_ms"])
    notifier = Notifier(
        stores.channels, {"slack": channel}, lambda: now_ms, requests=stores.requests
    )
    request = stores.requests.get(spec["chat"], now_ms)
    # The fault counts the notifier's calls alone, from here on.
    FaultPlan(at=spec["at"], mode=spec["mode"]).attach(dynamodb)
    if spec["action"] == "open":
        assert request is not None
        notifier.opened(request)
    else:
        notifier.settled(spec["chat"], [spec["interrupt"]], "cancelled", "alice", "api")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
