"""Channels Lambda: the Slack and Telegram webhooks.

No Cognito token comes with a platform's delivery: each proves itself (Slack's signature
over the raw body, Telegram's secret token) before anything is read. Then a replayed
delivery is dropped, the tap is screened (the card still open, then the tapper linked
and allowed: `interlock.respond`), the platform is answered at once, and the answer (or
a Dismiss, which cancels the request on its user's word) is applied asynchronously by
the resume function, the only one that may claim.

It never runs an agent, so it never imports strands and starts fast.
"""

from __future__ import annotations

import base64
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.metrics import MetricUnit

from interlock.adapters import slack, telegram
from interlock.api import snapstart
from interlock.api.bodies import bounded_json
from interlock.api.errors import BadRequest, Unauthorized
from interlock.api.http import bind, json_response
from interlock.api.wiring import channel_secret, hand_over_tap, notifier, stores
from interlock.channels import ANSWER_ALL, EDIT, FORM, ChannelName, Tap, group_problems
from interlock.errors import InvalidInput
from interlock.respond import TapResult, screen_tap
from interlock.timing import SystemClock

logger = Logger()
# Only AWS calls are traced: an HTTP subsegment would record a platform URL, and a
# Telegram URL carries the bot token.
tracer = Tracer(patch_modules=["boto3", "botocore"])
metrics = Metrics()
app = APIGatewayRestResolver()
clock = SystemClock()
# Resumed from a SnapStart snapshot: see infra.snapstart.
snapstart.register()


def slack_interaction() -> Response[str]:
    secret = _secret("slack", "signingSecret")
    body = _raw_body()
    headers = {k.lower(): v for k, v in (app.current_event.headers or {}).items()}
    if not slack.verified(secret, headers, body, clock.now_ms() // 1000):
        raise Unauthorized("the delivery is not signed by Slack")
    delivery, tap, trigger = slack.read_interaction(body)
    if tap is None or not _first("slack", delivery):
        return _ok()
    screened = screen_tap(stores(), tap, clock.now_ms())
    if isinstance(screened, TapResult):
        _told(tap, screened)
        return _ok()
    if tap.choice in (FORM, ANSWER_ALL, EDIT) and trigger:
        # A typed answer: the form opens now (Slack allows it for 3 s after the tap);
        # its submission comes back here as a tap of its own.
        channel = notifier().channels["slack"]
        assert isinstance(channel, slack.SlackChannel)
        try:
            channel.open_form(trigger, tap, screened.request)
        except InvalidInput as bad:
            _told(tap, TapResult("refused", f"{bad}."))
        return _ok()
    if tap.choice == ANSWER_ALL and tap.payload is not None:
        # The group form's answers are checked while it is still open, so a broken rule
        # is shown beside its card and nothing is lost.
        problems = group_problems(screened.request, tap.payload)
        if problems:
            return json_response(slack.form_errors(screened.request, problems))
    return _accepted(tap)


def telegram_update() -> Response[str]:
    secret = _secret("telegram", "webhookSecret")
    headers = {k.lower(): v for k, v in (app.current_event.headers or {}).items()}
    if not telegram.verified(secret, headers.get(telegram.SECRET_HEADER)):
        raise Unauthorized("the delivery does not carry the webhook's secret token")
    delivery, tap = telegram.read_update(bounded_json(_raw_body()))
    if tap is None or not _first("telegram", delivery):
        return _ok()
    screened = screen_tap(stores(), tap, clock.now_ms())
    if isinstance(screened, TapResult):
        _told(tap, screened)
        return _ok()
    return _accepted(tap)


def _secret(channel: ChannelName, name: str) -> str:
    secrets = channel_secret(channel)
    if secrets is None or not secrets.get(name):
        # Nothing here can verify the delivery.
        raise Unauthorized(f"{channel} is not configured")
    return secrets[name]


def _raw_body() -> str:
    event = app.current_event
    body = event.body or ""
    try:
        return base64.b64decode(body, validate=True).decode() if event.is_base64_encoded else body
    except ValueError:  # not base64, or not UTF-8 once decoded
        raise BadRequest("the delivery's body is not readable text") from None


def _first(channel: ChannelName, delivery: str) -> bool:
    if stores().channels.first_delivery(channel, delivery, clock.now_ms()):
        return True
    metrics.add_metric(name="DeliveriesReplayed", unit=MetricUnit.Count, value=1)
    return False


def _told(tap: Tap, result: TapResult) -> None:
    metrics.add_metric(name=f"Taps_{result.outcome}", unit=MetricUnit.Count, value=1)
    notifier().tell(tap, result.text)


def _accepted(tap: Tap) -> Response[str]:
    metrics.add_metric(name="TapsAccepted", unit=MetricUnit.Count, value=1)
    hand_over_tap(tap)
    return _ok()


def _ok() -> Response[str]:
    # Both platforms want a quick 2xx; what became of the tap is told to the tapper.
    return json_response({})


bind(
    app,
    "channels",
    {
        ("POST", "/channels/slack/interactions"): slack_interaction,
        ("POST", "/channels/telegram/webhook"): telegram_update,
    },
)


@logger.inject_lambda_context(log_event=False)  # never the event: it carries secrets
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
