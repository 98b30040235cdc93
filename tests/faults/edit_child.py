"""One process of an edit crash cell, forked by a zygote (`tests/faults/zygote.py`):

- `open`: post a request's card (on Slack or Telegram), SIGKILLed on either side of the
  platform's call;
- `end`: end the request (`how`: its answer's finish, a cancel, an expiry, or a chain to
  the run's next card) and edit its card, as the process that ends it does, under a
  fault at the n-th AWS call from the ending's own write on;
- `recover`: the settle step's recovery of a claim whose worker died, which finds the
  run's snapshot gone and ends the request, SIGKILLed around that ending's write.

It holds nothing but the addresses of the moto server and of the platform's fake, so
whatever survives is in the table.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import boto3

from interlock.adapters.factory import build_stores
from interlock.adapters.slack import SlackChannel
from interlock.adapters.telegram import TelegramChannel
from interlock.adapters.webclient import JsonHttp
from interlock.channels import Channel
from interlock.deps import Runtime, TurnLimits
from interlock.notify import NOTIFY_HOLD_MS, Notifier
from interlock.records import StoredSnapshot, new_request
from interlock.sweeper import SweepReport, settle_counted
from interlock.timing import ManualClock
from tests.faults.injector import FaultPlan


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _dying(channel: Any, when: str) -> Any:
    """`channel`, its posts dying on one side of the platform's call."""
    post = channel.post

    def dying_post(*args: Any, **kwargs: Any) -> Any:
        if when == "kill_before":
            _die()
        ref = post(*args, **kwargs)
        if when == "kill_after":
            _die()
        return ref

    channel.post = dying_post
    return channel


# Made once in the zygote: every child inherits the loaded service models.
_SESSION = boto3.session.Session(region_name="us-east-1")
for _service in ("dynamodb", "s3"):
    _SESSION.client(_service, endpoint_url="http://127.0.0.1:9")


def channel_for(spec: dict[str, Any]) -> Channel:
    if spec["channel"] == "telegram":
        return TelegramChannel(JsonHttp(spec["url"]), spec["token"])
    return SlackChannel(JsonHttp(spec["url"], {"Authorization": f"Bearer {spec['token']}"}))


def child_main(spec: dict[str, Any]) -> None:
    """One cell: post, end or recover under the spec's fault."""
    dynamodb = _SESSION.client("dynamodb", endpoint_url=spec["endpoint"])
    s3 = _SESSION.client("s3", endpoint_url=spec["endpoint"])
    stores = build_stores(dynamodb, s3, spec["table"], spec["bucket"])
    now_ms = int(spec["now_ms"])
    channel = _dying(channel_for(spec), spec.get("platform", ""))
    notifier = Notifier(
        stores.channels, {spec["channel"]: channel}, lambda: now_ms, requests=stores.requests
    )
    chat = spec["chat"]
    request = stores.requests.get(chat, now_ms)
    assert request is not None
    fault = FaultPlan(at=spec.get("at", -1), mode=spec.get("mode", "none"), op=spec.get("op"))
    if spec["action"] == "open":
        fault.attach(dynamodb)
        notifier.opened(request)
        return
    if spec["action"] == "recover":
        runtime = Runtime(
            stores,
            lambda: None,  # type: ignore[arg-type,return-value]  # never built: no snapshot
            clock=ManualClock(now_ms),
            limits=TurnLimits(heartbeat_s=60),
            worker_id="settle-1",
            agent=lambda inputs: None,  # type: ignore[arg-type,return-value]
            notifier=notifier,
        )
        fault.attach(dynamodb)
        settle_counted(runtime, chat, SweepReport())
        return
    how = spec["how"]
    # The fault counts from the ending's own write on.
    fault.attach(dynamodb)
    if how == "cancel":
        stores.requests.cancel(request, "cancelled by alice", now_ms)
        notifier.settled(chat, request.interrupt_ids, "cancelled", "alice", "api")
    elif how == "expire":
        stores.requests.expire(request, "its time ran out", now_ms)
        notifier.settled(chat, request.interrupt_ids, "expired", None, "its time ran out")
    elif how == "finish":
        stores.requests.finish(request, answer_key="answers/a", decision="approved", now_ms=now_ms)
        notifier.settled(chat, request.interrupt_ids, "approved", "alice", "slack")
    else:  # chain: the run asked again; its next card replaces this one
        successor, _ = new_request(
            stores.policy,
            chat_id=chat,
            interrupt_id=spec["next"],
            kind="approval",
            card={"reason": "send it again"},
            user_id=request.user_id,
            turn_seq=request.turn_seq,
            now_ms=now_ms,
            snapshot=StoredSnapshot(f"snapshots/{chat}/next", 1, "d"),
            notify_due_ms=now_ms + NOTIFY_HOLD_MS,
        )
        stores.requests.chain(request, successor)
        notifier.settled(chat, request.interrupt_ids, "approved", "alice", "slack")
        notifier.opened(successor)
