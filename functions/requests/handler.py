"""Requests Lambda: the open request, the chat's approvals, turns and audit trail, the inbox.

It never runs an agent, so it never imports strands and starts fast.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit

from interlock import manage
from interlock.api import snapstart
from interlock.api.bodies import query_number
from interlock.api.http import bind, caller_from, cors_config, json_response
from interlock.api.views import iso, request_view
from interlock.api.wiring import config, notifier, stores
from interlock.caller import Caller
from interlock.channels import channel_card
from interlock.timing import SystemClock

if TYPE_CHECKING:
    # The response models (pydantic) are imported by the routes that render them, so
    # the handler's import loads no pydantic; a snapshot loads them before it is taken.
    from interlock.api import schemas
    from interlock.records import Approval

logger = Logger()
# Only AWS calls are traced: an HTTP subsegment would record a platform URL, and a
# Telegram URL carries the bot token.
tracer = Tracer(patch_modules=["boto3", "botocore"])
metrics = Metrics()
app = APIGatewayRestResolver(cors=cors_config())
clock = SystemClock()
# Resumed from a SnapStart snapshot: see infra.snapstart. The snapshot holds what the
# first request loads, as it would if this module imported it.
snapstart.register(warm=("interlock.api.schemas", "interlock.answers"))


def _caller() -> Caller:
    return caller_from(app.current_event.raw_event)


def _after() -> int:
    return query_number(app.current_event.get_query_string_value("after", None), "after")


def get_request(chat_id: str) -> Response[str]:
    now = clock.now_ms()
    found = manage.open_request(stores(), _caller(), chat_id, now)
    return json_response(request_view(found.request, now, found.secret))


def cancel_request(chat_id: str) -> Response[str]:
    now = clock.now_ms()
    caller = _caller()
    cancelled = manage.cancel_request(stores(), caller, chat_id, now, config().version)
    metrics.add_metric(name="Cancellations", unit=MetricUnit.Count, value=1)
    notifier().settled(chat_id, cancelled.interrupt_ids, "cancelled", caller.user_id, "api")
    return json_response(request_view(cancelled, now, None))


def list_turns(chat_id: str) -> Response[str]:
    from interlock.api import schemas

    turns = manage.turns(stores(), _caller(), chat_id, _after())
    return json_response(schemas.Turns.model_validate({"turns": turns}).wire())


def list_approvals(chat_id: str) -> Response[str]:
    from interlock.api import schemas

    found = manage.approvals(stores(), _caller(), chat_id, clock.now_ms())
    views = {key: [_approval(a) for a in rows] for key, rows in found.items()}
    return json_response(schemas.Approvals.model_validate(views).wire())


def _approval(approval: Approval) -> schemas.ApprovalView:
    from interlock.api import schemas

    return schemas.ApprovalView(
        kind=approval.subject.kind,
        name=approval.subject.name,
        cardId=approval.card_id,
        grantedAt=approval.granted_at,
        grantedBy=approval.granted_by,
    )


def revoke_approval(chat_id: str, kind: str, name: str) -> Response[str]:
    from interlock.api import schemas

    manage.revoke(stores(), _caller(), chat_id, kind, name, clock.now_ms(), config().version)
    revoked = schemas.Revoked.model_validate({"revoked": {"kind": kind, "name": name}})
    return json_response(revoked.wire())


def list_inbox() -> Response[str]:
    from interlock.api import schemas

    now = clock.now_ms()
    after = app.current_event.get_query_string_value("page", None)
    page = manage.inbox(stores(), _caller(), now, after)
    items = [
        schemas.InboxItem(
            chatId=e.chat_id,
            interruptId=e.interrupt_id,
            kind=e.kind,
            type=str(e.card.get("type", "request")),
            title=str(e.card.get("reason", "The agent needs your decision."))[:300],
            details=[d for d in channel_card(e.card).details if not d.startswith("Risk:")][:4],
            risk=e.card.get("risk"),
            state=e.state.value,  # type: ignore[arg-type]
            createdAt=iso(e.created_at),
            expiresAt=iso(e.expires_at),
            questions=e.questions,
        )
        for e in page.entries
    ]
    return json_response(schemas.Inbox(requests=items, next=page.next).wire())


def list_events(chat_id: str) -> Response[str]:
    from interlock.api import schemas

    events = manage.trail(stores(), _caller(), chat_id, _after(), limit=200)
    body = schemas.Events.model_validate({"events": [asdict(e) for e in events]})
    return json_response(body.wire())


bind(
    app,
    "requests",
    {
        ("GET", "/chats/{chat_id}/request"): get_request,
        ("DELETE", "/chats/{chat_id}/request"): cancel_request,
        ("GET", "/chats/{chat_id}/turns"): list_turns,
        ("GET", "/chats/{chat_id}/approvals"): list_approvals,
        ("DELETE", "/chats/{chat_id}/approvals/{kind}/{name}"): revoke_approval,
        ("GET", "/chats/{chat_id}/events"): list_events,
        ("GET", "/inbox"): list_inbox,
    },
)


# Never the event, whatever POWERTOOLS_LOGGER_LOG_EVENT says: its headers carry tokens.
@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False
)
@tracer.capture_lambda_handler(capture_response=False)  # responses carry resume secrets
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
