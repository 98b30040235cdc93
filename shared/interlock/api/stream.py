"""The run and resume functions: one ASGI app that streams AG-UI events as they happen.

Deployed, each of the two functions runs this app under the AWS Lambda Web Adapter
(`functions/stream/run.sh` starts it under uvicorn: `interlock.api.serve`)
behind an API Gateway method whose responses stream. The
adapter turns the invocation into an HTTP request and puts the API Gateway request
context, the authorizer's claims included, in the `x-amzn-request-context` header,
replacing any header of that name a client sent; identity is read from there only.
`INTERLOCK_FUNCTION` names which of the two this process is; unset (the local server),
it serves both.

    POST /runs     a new turn; a body that answers interrupts is a resume (AG-UI's
                   `HttpAgent` posts every run to one URL)
    POST /resume   the answer to a chat's open request
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from interlock import errors
from interlock.api.errors import BadRequest, Unauthorized, error_body
from interlock.api.forward import (
    HandOverMisrouted,
    LambdaForward,
    read_tap_event,
    rest_event_problem,
    resume_event,
)
from interlock.api.http import ALLOWED_HEADERS, caller_from
from interlock.api.live import Standing, Work, relay, respond_live, send_json
from interlock.api.routes import Function, routes_of
from interlock.api.wiring import hand_over_key, lambda_client, runtime, tokens
from interlock.caller import Caller
from interlock.config import deployment
from interlock.outcomes import TurnResult

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput

    from interlock.api.agui import RunStream

logger = Logger()


@cache
def metrics() -> Metrics:
    """The app's metrics, made when the app is (the namespace is read from the
    environment then, as a handler module's would be when Lambda loads it)."""
    return Metrics()


CONTEXT_HEADER: Final = "x-amzn-request-context"

Endpoint = Callable[[Request], Awaitable[Response]]


class Live(Response):
    """A response that runs `work` and streams it (see `interlock.api.live`)."""

    def __init__(
        self,
        work: Work,
        stream: RunStream,
        observe: Callable[[TurnResult | BaseException], None],
        in_band: bool = False,
        told: frozenset[str] = frozenset(),
        standing: Standing | None = None,
    ) -> None:
        super().__init__()
        self._work, self._stream, self._observe = work, stream, observe
        self._in_band, self._told, self._standing = in_band, told, standing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await respond_live(
            send,
            self._work,
            self._stream,
            heartbeat_s=heartbeat_s(),
            observe=self._published,
            in_band=self._in_band,
            told=self._told,
            standing=self._standing,
        )

    def _published(self, outcome: TurnResult | BaseException) -> None:
        # Published before the last event is written: once a client has read the end
        # of the run, its metrics are out.
        self._observe(outcome)
        _publish()


class Relayed(Response):
    """The resume function's streamed answer, relayed as it arrives."""

    def __init__(self, forward: LambdaForward, event: dict[str, Any]) -> None:
        super().__init__()
        self._open = partial(forward, event)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        _publish()
        await relay(send, self._open)


class Refusal(Response):
    """An HTTP error with the JSON error body, before anything started."""

    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self._status, self._body = error_body(exc)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, self._status, self._body)


def heartbeat_s() -> float:
    """Seconds of silence after which the stream sends a heartbeat."""
    return deployment().heartbeat_s


def _answering(endpoint: Endpoint) -> Endpoint:
    """Refuse with the JSON error body whatever the endpoint raises before it streams."""

    async def answer(request: Request) -> Response:
        context = _request_context(request)
        logger.append_keys(correlation_id=context.get("requestId") if context else None)
        try:
            return await endpoint(request)
        except Exception as exc:
            return Refusal(exc)

    return answer


@_answering
async def start_run(request: Request) -> Response:
    """A new turn, or (its body answers interrupts) the resume of one."""
    # AG-UI's models (some 60 ms to build) load with the first run or resume, not at
    # start: a tap handed to the resume function (`/events`) streams nothing.
    from interlock.api.agui import RunStream
    from interlock.api.models import carries_resume, parse_run

    caller, body = _caller(request), await _body(request)
    if carries_resume(body):
        metrics().add_metric(name="ResumesForwarded", unit=MetricUnit.Count, value=1)
        return await _forward(request, caller, body)
    run = parse_run(body)
    stream = RunStream(run.chat_id, run.run_id, run.input)
    if run.prompt is None:
        # No new message: the client asks where the thread stands (it lost its stream,
        # or it is new here). The open interrupt, if any, is offered again.
        return Live(partial(resync_for, caller, run.chat_id), stream, _count_turn, in_band(request))
    work = partial(run_turn_for, caller, run.chat_id, run.prompt)
    return Live(work, stream, _count_turn, in_band(request))


@_answering
async def resume(request: Request) -> Response:
    """The answer to a chat's open request; the paused run continues."""
    return _resume(_answerer(request), await _body(request), in_band(request))


def in_band(request: Request) -> bool:
    """Whether the client reads an event stream, so that a refusal by the interrupt
    rules reaches it as `RUN_ERROR` (AG-UI's way), not as an HTTP error."""
    return "text/event-stream" in request.headers.get("accept", "")


def _resume(caller: Caller, body: str, in_band: bool = False) -> Response:
    from interlock.api.agui import RunStream  # see start_run
    from interlock.api.models import parse_resume
    from interlock.resume import resume_replies

    answer = parse_resume(body)

    def work(progress: Any) -> TurnResult:
        return resume_replies(
            runtime(),
            caller,
            answer.chat_id,
            secret=answer.secret_of(),
            replies=answer.replies,
            progress=progress,
        )

    stream = RunStream(answer.chat_id, answer.run_id, answer.input)
    # A refused answer's run finishes where the thread stands, so that the client lets
    # go of the interrupt it answered.
    standing = partial(standing_for, caller, answer.chat_id, answer.secret)
    told = told_results(answer.input)
    return Live(work, stream, _count_resume, in_band, told=told, standing=standing)


def told_results(run_input: RunAgentInput) -> frozenset[str]:
    """The tool calls whose results a client's input carries: the results the run that
    paused told it, which the resumed run does not tell again."""
    from ag_ui.core import ToolMessage  # loaded already, with the input

    return frozenset(m.tool_call_id for m in run_input.messages if isinstance(m, ToolMessage))


def run_turn_for(caller: Caller, chat_id: str, prompt: str, progress: Any) -> TurnResult:
    from interlock.turns import run_turn

    return run_turn(runtime(), caller, chat_id, prompt, progress)


def resync_for(caller: Caller, chat_id: str, progress: Any) -> TurnResult:
    from interlock.resync import resync

    return resync(runtime(), caller, chat_id)


def standing_for(caller: Caller, chat_id: str, secret: str | None) -> TurnResult | None:
    from interlock.resync import standing

    return standing(runtime(), caller, chat_id, secret)


async def _forward(request: Request, caller: Caller, body: str) -> Response:
    """Hand a resume to the function that may claim; in one process, answer it here."""
    if name := deployment().resume_function:
        context = _request_context(request) or {}
        accept = request.headers.get("accept", "application/json")
        event = resume_event(context, body, accept, request.headers.get("authorization"))
        if problem := rest_event_problem(event):
            _misrouted()
            raise HandOverMisrouted(f"the adapter would not read this resume as REST: {problem}")
        return Relayed(LambdaForward(lambda_client(), name), event)
    if "resume" in serving():
        return _resume(_answerer(request), body, in_band(request))
    raise errors.InvalidInput("this deployment takes answers at /resume")


def _request_context(request: Request) -> dict[str, Any] | None:
    raw = request.headers.get(CONTEXT_HEADER)
    if not raw:
        return None
    try:
        context = json.loads(raw)
    except ValueError:
        return None
    return context if isinstance(context, dict) else None


def _caller(request: Request) -> Caller:
    context = _request_context(request)
    if context is None:
        raise Unauthorized("no authenticated user on this request")
    return caller_from({"requestContext": context})


def _answerer(request: Request) -> Caller:
    """Who answers: the person whose own token the request carries, verified here.

    Never the request context: a direct invoke of this function (the run function's
    hand-over, or any code its role lets invoke) can put any claims there.
    """
    from interlock.api.identity import verified_caller

    context = _request_context(request) or {}
    trace_id = context.get("requestId")
    return verified_caller(
        tokens(),
        request.headers.get("authorization"),
        trace_id if isinstance(trace_id, str) else None,
    )


async def _body(request: Request) -> str:
    try:
        return (await request.body()).decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the body must be UTF-8 JSON") from None


def _count_turn(outcome: TurnResult | BaseException) -> None:
    if isinstance(outcome, BaseException):
        return
    metrics().add_metric(name="Turns", unit=MetricUnit.Count, value=1)
    if outcome.offer is not None:
        metrics().add_metric(name="Interrupts", unit=MetricUnit.Count, value=1)


def _count_resume(outcome: TurnResult | BaseException) -> None:
    if isinstance(outcome, errors.ResumeInProgress):
        metrics().add_metric(name="ClaimConflicts", unit=MetricUnit.Count, value=1)
    if isinstance(outcome, BaseException):
        return
    name = "Replays" if outcome.outcome == "replayed" else "Resumes"
    metrics().add_metric(name=name, unit=MetricUnit.Count, value=1)
    if outcome.waited_ms is not None:
        waited = outcome.waited_ms
        metrics().add_metric(name="UserWaitMs", unit=MetricUnit.Milliseconds, value=waited)
    if outcome.decision and outcome.outcome != "replayed" and not is_metrics_disabled():
        # One metric per decision label gives approval, rejection (plain or with
        # feedback), cancellation and answer rates side by side.
        with single_metric(
            name="Decisions",
            unit=MetricUnit.Count,
            value=1,
            default_dimensions=metrics().default_dimensions,
        ) as metric:
            metric.add_dimension(name="decision", value=outcome.decision)


def _misrouted() -> None:
    metrics().add_metric(name="MisroutedHandOvers", unit=MetricUnit.Count, value=1)
    _publish()


def _publish() -> None:
    """Publish this request's metrics as EMF (there is no Lambda handler to do it)."""
    try:
        if metrics().metric_set:
            metrics().flush_metrics()
    except Exception:  # a metric that cannot be published must not fail the request
        logger.exception("metrics could not be published")
    finally:
        metrics().clear_metrics()  # publishing disabled (locally): drop them, do not pile up


EVENTS_PATH: Final = "/events"
"""Where the Web Adapter delivers an invocation that is not an HTTP request (its
pass-through path): the resume function's taps, from the channels function."""


# The status of a tap hand-over that failed. No route of the app answers it otherwise,
# so the adapter can fail exactly these invocations (`infra.functions.STREAM_ENVIRONMENT`).
HAND_OVER_FAILED: Final = 502
# A hand-over whose signature does not verify: refused for good, never retried.
FORGED_HAND_OVER: Final = 403


async def apply_tap_event(request: Request) -> Response:
    """Apply a tap the channels function screened, signed and handed over
    (`interlock.respond`, `interlock.adapters.handover`).

    Only a direct invoke reaches this path: API Gateway sends this function `/resume`
    requests alone. Other roles may invoke this function too, so nothing unsigned is
    applied.
    """
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse

    from interlock.respond import apply_tap

    try:
        tap, signed, mac = read_tap_event(json.loads(await request.body()))
    except (ValueError, errors.InvalidInput):
        # Nobody's refusal: an invocation the adapter passed through that is no tap (a
        # resume it could not read as REST, say). Failed, so Lambda sees an error.
        logger.error("a hand-over reached the tap path and is not a tap")
        _misrouted()
        return JSONResponse({"error": "not a tap event"}, HAND_OVER_FAILED)
    key = hand_over_key()
    try:
        genuine = (
            key is not None and mac is not None and await run_in_threadpool(key.verify, signed, mac)
        )
    except Exception as failed:
        # KMS could not say (throttled, unreachable): not a verdict on the tap. Failed, so
        # Lambda retries it and then hands it to the on-failure queue, whose alarm has it.
        logger.exception("a tap hand-over could not be verified: %s", type(failed).__name__)
        metrics().add_metric(name="TapHandOverFailures", unit=MetricUnit.Count, value=1)
        _publish()
        return JSONResponse({"error": "the tap could not be verified"}, HAND_OVER_FAILED)
    if not genuine:
        # Not from the channels function: only its role may sign. Answered (not failed),
        # so Lambda does not retry it; counted and alarmed.
        logger.error("a tap hand-over without a valid signature was refused")
        metrics().add_metric(name="ForgedHandOvers", unit=MetricUnit.Count, value=1)
        _publish()
        return JSONResponse({"error": "the hand-over is not signed"}, FORGED_HAND_OVER)
    try:
        result = await run_in_threadpool(apply_tap, runtime(), tap)
    except Exception as failed:
        # Not a refusal the tapper was told: the tap is not applied yet. The adapter turns
        # this status into a failed invocation (AWS_LWA_ERROR_STATUS_CODES), so Lambda
        # retries it and then hands it to the on-failure queue, whose alarm has it.
        logger.exception("tap hand-over failed: %s", type(failed).__name__)
        metrics().add_metric(name="TapHandOverFailures", unit=MetricUnit.Count, value=1)
        _publish()
        return JSONResponse({"error": "the tap could not be applied"}, HAND_OVER_FAILED)
    metrics().add_metric(name=f"Taps_{result.outcome}", unit=MetricUnit.Count, value=1)
    _publish()
    return JSONResponse({"outcome": result.outcome})


ENDPOINTS: Final[dict[Function, Endpoint]] = {"run": start_run, "resume": resume}


def serving() -> tuple[Function, ...]:
    """The functions this process is: `INTERLOCK_FUNCTION`, or both."""
    name = deployment().function
    return tuple(ENDPOINTS) if name is None else (name,)


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    # Built before the first request: a broken agent fails the start, not a turn.
    runtime()
    yield


def create_app() -> Starlette:
    """The app for the functions `serving()` names."""
    metrics.cache_clear()
    routes = [
        Route(route.path, ENDPOINTS[function], methods=[route.method])
        for function in serving()
        for route in routes_of(function)
    ]
    if "resume" in serving():
        routes.append(Route(EVENTS_PATH, apply_tap_event, methods=["POST"]))
    middleware = []
    if origin := deployment().allowed_origin:
        # API Gateway answers preflights; these responses need the headers too.
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=[origin],
                allow_methods=["POST"],
                allow_headers=list(ALLOWED_HEADERS),
            )
        )
    return Starlette(routes=routes, middleware=middleware, lifespan=_lifespan)
