"""One process of a notice crash cell: post a request's card (`open`) or edit it
(`settle`) on Slack, under a fault: SIGKILLed before or after the n-th AWS call (or
that call failing), or SIGKILLed on either side of the platform's own call.

Forked by a zygote (`tests/faults/zygote.py`), one child per cell; it holds nothing but
the addresses of the moto server and of the Slack fake, so whatever survives is in the
table.
"""

from __future__ import annotations

import os
import signal
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


# Made once in the zygote: every child inherits the loaded service models.
_SESSION = boto3.session.Session(region_name="us-east-1")
for _service in ("dynamodb", "s3"):
    _SESSION.client(_service, endpoint_url="http://127.0.0.1:9")


def child_main(spec: dict[str, Any]) -> None:
    """One cell: post or edit the card under the spec's fault."""
    dynamodb = _SESSION.client("dynamodb", endpoint_url=spec["endpoint"])
    s3 = _SESSION.client("s3", endpoint_url=spec["endpoint"])
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
