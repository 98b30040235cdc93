"""Admin Lambda: the pre-approved list everyone shares and the chat accounts' links.

A function of its own so that IAM, not only the code, keeps these rows to the
administrators' routes: no other role may write the `ADMIN` or `LINK#` partitions
(`infra.permissions`). Each route still checks the caller is an administrator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.logging import correlation_paths

from interlock import manage
from interlock.api.bodies import parse_body
from interlock.api.http import bind, caller_from, cors_config, json_response
from interlock.api.wiring import stores
from interlock.caller import Caller
from interlock.channels import Link
from interlock.timing import SystemClock

if TYPE_CHECKING:
    from interlock.api import schemas

logger = Logger()
tracer = Tracer(patch_modules=["boto3", "botocore"])
metrics = Metrics()
app = APIGatewayRestResolver(cors=cors_config())
clock = SystemClock()


def _caller() -> Caller:
    return caller_from(app.current_event.raw_event)


def preapprove(kind: str, name: str) -> Response[str]:
    from interlock.api import schemas

    subject = manage.preapprove(stores(), _caller(), kind, name, clock.now_ms())
    body = {"preapproved": {"kind": subject.kind, "name": subject.name}}
    return json_response(schemas.Preapproved.model_validate(body).wire())


def remove_preapproval(kind: str, name: str) -> Response[str]:
    from interlock.api import schemas

    subject = manage.remove_preapproval(stores(), _caller(), kind, name)
    body = {"revoked": {"kind": subject.kind, "name": subject.name}}
    return json_response(schemas.Revoked.model_validate(body).wire())


def link_account(channel: str, external_id: str) -> Response[str]:
    from interlock.api import schemas

    body = parse_body(schemas.LinkInput, app.current_event.body)
    wanted = Link(channel, external_id, body.userId, frozenset(body.roles), body.address)  # type: ignore[arg-type]
    linked = manage.link_account(stores(), _caller(), channel, external_id, wanted, clock.now_ms())
    return json_response(schemas.Linked(linked=_link(linked)).wire())


def unlink_account(channel: str, external_id: str) -> Response[str]:
    from interlock.api import schemas

    removed = manage.unlink_account(stores(), _caller(), channel, external_id)
    return json_response(schemas.Unlinked(unlinked=_link(removed)).wire())


def _link(link: Link) -> schemas.LinkView:
    from interlock.api import schemas

    return schemas.LinkView(
        channel=link.channel,
        externalId=link.external_id,
        userId=link.user_id,
        roles=sorted(link.roles),
        address=link.address,
    )


bind(
    app,
    "admin",
    {
        ("PUT", "/admin/approvals/{kind}/{name}"): preapprove,
        ("DELETE", "/admin/approvals/{kind}/{name}"): remove_preapproval,
        ("PUT", "/admin/links/{channel}/{external_id}"): link_account,
        ("DELETE", "/admin/links/{channel}/{external_id}"): unlink_account,
    },
)


# Never the event, whatever POWERTOOLS_LOGGER_LOG_EVENT says: its headers carry tokens.
@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False
)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
