"""Resume Lambda: answer the chat's open request and return the resumed run's events."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from interlock.api.agui import encode, run_events
from interlock.api.http import bind, caller_from, cors_config, sse_response
from interlock.api.models import parse_resume
from interlock.api.wiring import runtime
from interlock.errors import ResumeInProgress
from interlock.resume import resume_replies

logger = Logger()
tracer = Tracer()
metrics = Metrics()
app = APIGatewayRestResolver(cors=cors_config())


def resume() -> Response[str]:
    request = parse_resume(app.current_event.body)
    try:
        result = resume_replies(
            runtime(),
            caller_from(app.current_event.raw_event),
            request.chat_id,
            secret=request.secret,
            replies=request.replies,
        )
    except ResumeInProgress:
        metrics.add_metric(name="ClaimConflicts", unit=MetricUnit.Count, value=1)
        raise
    metrics.add_metric(
        name="Replays" if result.outcome == "replayed" else "Resumes",
        unit=MetricUnit.Count,
        value=1,
    )
    if result.waited_ms is not None:
        metrics.add_metric(name="UserWaitMs", unit=MetricUnit.Milliseconds, value=result.waited_ms)
    if result.decision and result.outcome != "replayed":
        # One metric per decision label gives approval, rejection (plain or with
        # feedback), cancellation and answer rates side by side.
        with single_metric(
            name="Decisions",
            unit=MetricUnit.Count,
            value=1,
            default_dimensions=metrics.default_dimensions,
        ) as metric:
            metric.add_dimension(name="decision", value=result.decision)
    return sse_response(encode(run_events(request.chat_id, request.run_id, result)))


bind(app, "resume", {("POST", "/resume"): resume})


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler(capture_response=False)  # responses carry resume secrets
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
