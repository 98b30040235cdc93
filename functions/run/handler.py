"""Run Lambda: start a turn in a chat and return its AG-UI event stream."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit

from interlock.api.agui import encode, run_events
from interlock.api.forward import as_resume
from interlock.api.http import bind, caller_from, cors_config, proxy_response, sse_response
from interlock.api.models import carries_resume, parse_run
from interlock.api.wiring import resume_forward, runtime
from interlock.turns import run_turn

logger = Logger()
tracer = Tracer()
metrics = Metrics()
app = APIGatewayRestResolver(cors=cors_config())


def start_run() -> Response[str]:
    """Start a turn; a body that answers interrupts goes to the resume function, so a
    client needs one URL for both (AG-UI's `HttpAgent` posts every run to one)."""
    if carries_resume(app.current_event.body):
        metrics.add_metric(name="ResumesForwarded", unit=MetricUnit.Count, value=1)
        return proxy_response(resume_forward()(as_resume(app.current_event.raw_event)))
    request = parse_run(app.current_event.body)
    result = run_turn(
        runtime(), caller_from(app.current_event.raw_event), request.chat_id, request.prompt
    )
    metrics.add_metric(name="Turns", unit=MetricUnit.Count, value=1)
    if result.offer is not None:
        metrics.add_metric(name="Interrupts", unit=MetricUnit.Count, value=1)
    return sse_response(encode(run_events(request.chat_id, request.run_id, result)))


bind(app, "run", {("POST", "/runs"): start_run})


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler(capture_response=False)  # responses carry resume secrets
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
