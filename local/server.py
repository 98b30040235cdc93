"""Interlock on one machine: an embedded moto, the real handlers, the demo agent.

Every request carries the API Gateway request context the deployed API would make, with
the authorizer's claims filled from a signed development token. The streaming routes
(run, resume) go to the same ASGI app the deployed functions run under the Lambda Web
Adapter, with that context in the adapter's header; the others become the REST proxy
event the deployed API sends and go to the same `functions/<name>/handler.py` that runs
in Lambda. Routes come from the same table the CDK stack is built from.

    .venv/bin/python -m local.server            # or: ./dev serve
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import json
import os
import re
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from a2wsgi import ASGIMiddleware
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from local.emulator import Emulator
from local.persist import LocalState, StateBusy, adopt_shared_state, dev_key, hold_state

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared")]

from interlock.api.routes import FUNCTIONS, ROUTES, STREAMED, Function, Route  # noqa: E402
from interlock.config import DEFAULT_AGENT, Env, deployment  # noqa: E402
from local import devtokens  # noqa: E402  (it reads the layer's identity rules)

STAGE = "v1"
SESSION_PATH = "/local/session"
OPENAPI_PATH = "/openapi.json"
# Local state and the development signing key, beside the checkout (ignored by git): a
# directory of its own for each agent served (`state_directory`).
STATE_DIR = ".interlock"
TABLE = "interlock"
BUCKET = "interlock-data"
# How often the local sweeper runs; deployed, the schedule says (`sweep_every_minutes`).
SWEEP_EVERY_S = 30.0


@dataclass(frozen=True)
class LambdaContext:
    """The attributes Powertools reads from a Lambda context."""

    function_name: str
    aws_request_id: str
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:local"


def _pattern(route: Route) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", route.path) + "$")


_ROUTES = [(route, _pattern(route)) for route in ROUTES]
_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
WSGIApp = Callable[[dict[str, Any], Any], Any]


def _load(function: str) -> ModuleType:
    path = ROOT / "functions" / function / "handler.py"
    spec = importlib.util.spec_from_file_location(f"interlock_function_{function}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LocalApi:
    """A WSGI app that serves the route table with the Lambda handlers.

    Args:
        key: The key development tokens are signed with.
        static_dir: Served at `/` (the card page), if it exists.
    """

    def __init__(
        self,
        key: bytes,
        static_dir: Path | None = None,
        on_write: Callable[[], None] | None = None,
    ) -> None:
        from interlock.api import stream, wiring

        # The handlers build their stores from the environment once per process, as in
        # Lambda; a new local API may follow a `configure` with another endpoint.
        wiring.config.cache_clear()
        wiring.stores.cache_clear()
        wiring.runtime.cache_clear()
        wiring.notifier.cache_clear()
        self.key = key
        self._modules = {name: _load(name) for name in FUNCTIONS if name not in STREAMED}
        # A Lambda environment serves one request at a time, and Powertools keeps the
        # request being routed on a class attribute every resolver shares: one at a time
        # here too, or two reads at once could be routed, and answered, as each other.
        self._serving = threading.Lock()
        # One process serves both streaming functions (no hand-over between them).
        os.environ.pop(Env.FUNCTION, None)
        self._stream: Any = ASGIMiddleware(stream.create_app())  # type: ignore[arg-type]
        self._static = static_dir
        self._on_write = on_write
        self._saving = threading.Lock()
        # Deployed, the channels function hands a tap to the resume function with an
        # asynchronous invoke; here a worker thread applies it, after the webhook answered.
        wiring.use_local_taps(self._hand_over)
        # The resume path verifies the person's token itself, as the deployed resume
        # function does against the user pool: here against the development key.
        wiring.use_local_tokens(devtokens.DevTokens(key))

    def _hand_over(self, tap: Any) -> None:
        threading.Thread(target=self._apply, args=(tap,), daemon=True).start()

    def _apply(self, tap: Any) -> None:
        from interlock.api import wiring
        from interlock.respond import apply_tap

        try:
            apply_tap(wiring.runtime(), tap)
        finally:
            self._save()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        return self.respond(request)(environ, start_response)

    def respond(self, request: Request) -> WSGIApp:
        path = request.path.removeprefix(f"/{STAGE}") or "/"
        if path == SESSION_PATH:
            return self._session(request)
        if path == OPENAPI_PATH and request.method == "GET":
            from interlock.api.openapi import document

            return _json(200, document())
        matches = [(r, m) for r, p in _ROUTES if (m := p.match(path))]
        if not matches:
            return self._static_file(path)
        match = next(((r, m) for r, m in matches if r.method == request.method), None)
        if match is None:
            return _json(405, {"error": {"code": "method_not_allowed", "message": "no route"}})
        route, found = match
        # A webhook carries no token (the platform signs it instead): no authorizer.
        claims = self._claims(request) if route.authorized else {}
        if claims is None:
            return _json(401, {"error": {"code": "unauthorized", "message": "Unauthorized"}})
        context = _request_context(request, route, path, claims)
        if route.function in STREAMED:
            return self._streamed(path, context, saves=request.method != "GET")
        event = _proxy_event(request, route, path, found.groupdict(), context)
        try:
            return _from_proxy_result(self._invoke(route.function, event))
        finally:
            if request.method != "GET":
                self._save()

    def _streamed(self, path: str, context: dict[str, Any], *, saves: bool) -> WSGIApp:
        """The streaming app, given the request context as the Web Adapter gives it (in
        its header, replacing any the client sent); saved once the stream has ended."""

        def app(environ: dict[str, Any], start_response: Any) -> Any:
            environ = {
                **environ,
                "PATH_INFO": path,
                "HTTP_X_AMZN_REQUEST_CONTEXT": json.dumps(context),
            }
            chunks = self._stream(environ, start_response)
            try:
                yield from chunks
            finally:
                if saves:
                    self._save()

        return app

    def _save(self) -> None:
        if self._on_write is not None:
            with self._saving:
                self._on_write()

    def _invoke(self, function: Function, event: dict[str, Any]) -> dict[str, Any]:
        """Call one function's handler with a proxy event, as Lambda would."""
        context = LambdaContext(f"interlock-{function}", event["requestContext"]["requestId"])
        module = self._modules[function]
        with self._serving:
            try:
                result: dict[str, Any] = module.lambda_handler(event, context)
            finally:
                # Powertools keeps unpublished metrics when publishing is disabled (as it
                # is locally); a long-running server must drop them or they pile up.
                module.metrics.clear_metrics()
        return result

    def _claims(self, request: Request) -> dict[str, Any] | None:
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ").strip()
        try:
            return devtokens.claims(self.key, token) if token else None
        except devtokens.TokenError:
            return None

    def _session(self, request: Request) -> Response:
        """A development token for the card page: local mode's stand-in for signing in.

        Outside the route table on purpose: the deployed page signs in with Cognito and
        reads the API's URL from a `config.json` next to it. Anyone who can reach this
        server may ask for any user, as anyone reading its console already could.

        Handed out only to a request that names a loopback host (and, when a browser
        says where the page came from, a loopback origin): a page elsewhere could point
        its own name at 127.0.0.1 (DNS rebinding) and read the token as same-origin,
        but its requests would still carry its own name.
        """
        if not _loopback_request(request):
            return _json(403, {"error": {"code": "forbidden", "message": LOOPBACK_ONLY}})
        if request.method != "GET":
            return _json(405, {"error": {"code": "method_not_allowed", "message": "GET only"}})
        user = request.args.get("user", "alice")
        groups = [g for g in request.args.get("groups", "reporter").split(",") if g]
        if not all(_NAME.fullmatch(name) for name in [user, *groups]):
            return _json(400, {"error": {"code": "bad_request", "message": "bad user or group"}})
        token = devtokens.issue(self.key, user, groups)
        body = {"token": token, "user": user, "groups": groups, "apiBase": ""}
        response = _json(200, body)
        response.headers["Cache-Control"] = "no-store"
        return response

    def _static_file(self, path: str) -> Response:
        if self._static is None:
            return _json(404, {"error": {"code": "not_found", "message": "no such route"}})
        name = "index.html" if path == "/" else path.lstrip("/")
        target = (self._static / name).resolve()
        if not target.is_file() or self._static.resolve() not in target.parents:
            return _json(404, {"error": {"code": "not_found", "message": "no such file"}})
        types = {
            ".html": "text/html",
            ".js": "text/javascript",
            ".css": "text/css",
            ".json": "application/json",
            ".svg": "image/svg+xml",
            ".png": "image/png",
        }
        return Response(target.read_bytes(), mimetype=types.get(target.suffix, "text/plain"))


LOOPBACK_ONLY: Final = (
    "the local session is only handed out on the loopback address "
    "(open the page on localhost, 127.0.0.1 or [::1])"
)
_PORT = re.compile(r"[0-9]{1,5}")


def _loopback_request(request: Request) -> bool:
    """Whether the request comes from this machine and its Host header, and its Origin
    header if it has one, name a loopback host. The headers are read as sent: werkzeug's
    own `host` falls back to the server's bound address when none is sent."""
    if not _loopback_peer(request.remote_addr):
        return False  # another machine (a server bound to 0.0.0.0): whatever it says
    host = request.headers.get("Host")
    if host is None or not loopback_host(host):
        return False
    origin = request.headers.get("Origin")
    return origin is None or _loopback_origin(origin)


def _loopback_peer(address: str | None) -> bool:
    """Whether the connection itself comes from this machine's loopback."""
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _loopback_origin(origin: str) -> bool:
    """Whether an Origin header (`scheme://host[:port]`, nothing more) names a loopback
    host; an opaque origin (`null`) does not."""
    scheme, separator, host = origin.partition("://")
    return bool(separator) and scheme in ("http", "https") and loopback_host(host)


def loopback_host(host: str) -> bool:
    """Whether `host` (a Host header's `name[:port]`) names this machine's loopback:
    `localhost`, an address in 127.0.0.0/8, or `[::1]`, with any port or none.

    Only these exact spellings: a name that merely resolves to loopback is what a
    rebinding page would use, and a bare `::1` is no Host header at all.
    """
    split = _split_host(host)
    if split is None:
        return False
    name, port = split
    return (port is None or _valid_port(port)) and _loopback_name(name)


def _split_host(host: str) -> tuple[str, str | None] | None:
    """`(name, port)` of `name[:port]`, an IPv6 address keeping its brackets; the port
    is None when there is none; None when it reads as neither."""
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return None
        name = host[: end + 1]
    else:
        name = host.partition(":")[0]
    rest = host[len(name) :]
    if rest and not rest.startswith(":"):
        return None
    return name, rest[1:] if rest else None


def _valid_port(text: str) -> bool:
    return bool(_PORT.fullmatch(text)) and int(text) <= 65535


def _loopback_name(name: str) -> bool:
    """Whether a host name (as `_split_host` gives it) is a loopback one."""
    try:
        if name.startswith("["):
            # A scoped address (`::1%lo`) is not equal to `::1`: refused too.
            return ipaddress.IPv6Address(name[1:-1]) == ipaddress.IPv6Address("::1")
        if name.lower() == "localhost":
            return True
        return ipaddress.IPv4Address(name) in ipaddress.IPv4Network("127.0.0.0/8")
    except ValueError:  # neither an address nor `localhost`: some other name
        return False


def _request_context(
    request: Request, route: Route, path: str, claims: dict[str, Any]
) -> dict[str, Any]:
    """The request context API Gateway makes, the authorizer's claims included."""
    return {
        "resourcePath": route.path,
        "httpMethod": request.method,
        "path": f"/{STAGE}{path}",
        "stage": STAGE,
        "requestId": str(uuid.uuid4()),
        "identity": {"sourceIp": request.remote_addr},
        **({"authorizer": {"claims": claims}} if claims else {}),
    }


def _proxy_event(
    request: Request, route: Route, path: str, params: dict[str, str], context: dict[str, Any]
) -> dict[str, Any]:
    headers = dict(request.headers.items())
    query = request.args.to_dict() or None
    return {
        "resource": route.path,
        "path": path,
        "httpMethod": request.method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: request.args.getlist(k) for k in query or {}}
        or None,
        "pathParameters": params or None,
        "stageVariables": None,
        "requestContext": context,
        "body": request.get_data(as_text=True) or None,
        "isBase64Encoded": False,
    }


def _from_proxy_result(result: dict[str, Any]) -> Response:
    """The HTTP response API Gateway would make of a Lambda proxy result."""
    headers = list((result.get("headers") or {}).items())
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers += [(name, value) for value in values]
    body = result.get("body") or ""
    if result.get("isBase64Encoded"):
        import base64

        return Response(base64.b64decode(body), status=result["statusCode"], headers=headers)
    return Response(body, status=result["statusCode"], headers=headers)


def _json(status: int, body: Any) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def configure(endpoint: str, table: str, bucket: str, agent: str | None = None) -> None:
    """Point the handlers' wiring at the emulator and the agent (the demo analyst
    unless `agent` or `INTERLOCK_AGENT` names another)."""
    if agent:
        os.environ[Env.AGENT] = agent
    os.environ.setdefault(Env.MODEL, "scripted")
    os.environ.setdefault(Env.FETCH, "demo")
    # Only Interlock's own services go to the emulator; Bedrock (and whatever else the
    # user's agent calls) reaches the real service with the machine's own credentials,
    # or the local Bedrock when INTERLOCK_BEDROCK_URL names one.
    os.environ.update({f"AWS_ENDPOINT_URL_{service}": endpoint for service in EMULATED})
    if bedrock := deployment().bedrock_url:
        os.environ["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] = bedrock
    if not _has_credentials():
        # The emulator takes any; a real service would refuse these, as it should.
        os.environ.update(AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.update(
        {Env.TABLE: table, Env.BUCKET: bucket},
        POWERTOOLS_SERVICE_NAME="interlock",
        POWERTOOLS_METRICS_NAMESPACE="Interlock",
        POWERTOOLS_TRACE_DISABLED="true",
        POWERTOOLS_METRICS_DISABLED=os.environ.get("POWERTOOLS_METRICS_DISABLED", "true"),
        POWERTOOLS_LOG_LEVEL=os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
    )


EMULATED: Final = ("DYNAMODB", "S3", "SQS", "SECRETS_MANAGER", "SSM", "LAMBDA")
"""The AWS services local mode serves from the emulator (botocore's per-service
endpoint settings, `AWS_ENDPOINT_URL_<service id>`)."""


def _has_credentials() -> bool:
    """Whether the machine has AWS credentials (without asking an instance's metadata
    service, which is slow to time out off EC2)."""
    import boto3

    previous = os.environ.get("AWS_EC2_METADATA_DISABLED")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    try:
        return boto3.Session().get_credentials() is not None
    finally:
        if previous is None:
            os.environ.pop("AWS_EC2_METADATA_DISABLED")
        else:
            os.environ["AWS_EC2_METADATA_DISABLED"] = previous


def create_storage_if_missing(table: str, bucket: str) -> None:
    import boto3

    from interlock.adapters.schema import create_storage

    dynamodb, s3 = boto3.client("dynamodb"), boto3.client("s3")
    try:
        dynamodb.describe_table(TableName=table)  # one call, whatever else the server holds
    except dynamodb.exceptions.ResourceNotFoundException:
        create_storage(dynamodb, s3, table, bucket)


class Sweeping:
    """The sweeper on its schedule, as EventBridge runs it deployed: every `every_s`, one
    pass that finds what is overdue, stranded or due (requests, lapsed claims, channel
    notices) and settles each (`interlock.sweeper.sweep`: the finder and the settle
    consumer in one process). A pass that fails is logged and the next one tries again.

    Args:
        every_s: Seconds between passes.
        after: Called after a pass that found something (the local state is saved).
    """

    def __init__(self, every_s: float, after: Callable[[], None] | None = None) -> None:
        self._every_s = every_s
        self._after = after
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweeper", daemon=True)

    def start(self) -> Sweeping:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        from interlock.api import wiring
        from interlock.sweeper import sweep
        from interlock.timing import SystemClock

        clock = SystemClock()
        while not self._stop.wait(self._every_s):
            try:
                report = sweep(wiring.runtime(), clock.now_ms())
            except Exception as exc:  # the next pass tries again, as the schedule would
                print(f"sweeper pass failed: {type(exc).__name__}", file=sys.stderr, flush=True)
                continue
            if report.found and self._after is not None:
                self._after()


def state_directory(agent: str, root: Path = ROOT) -> Path:
    """Where the local state of `agent` (`package.module:factory`) is kept by default:
    `.interlock/<agent>` in the checkout, so agents served from one checkout neither
    resume each other's cards nor overwrite each other's chats."""
    return root / STATE_DIR / (re.sub(r"[^A-Za-z0-9_.-]+", "-", agent).strip("-.") or "agent")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve Interlock locally.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--aws-endpoint", help="use this moto server instead of an embedded one")
    parser.add_argument("--table", default=TABLE)
    parser.add_argument("--bucket", default=BUCKET)
    parser.add_argument(
        "--agent", help="the agent to serve, package.module:factory (default: the analyst)"
    )
    parser.add_argument(
        "--roles", default="reporter", help="roles of the printed token, comma-separated"
    )
    parser.add_argument(
        "--state", type=Path, help="where local state is kept (default: .interlock/<agent>)"
    )
    parser.add_argument("--fresh", action="store_true", help="start with no saved state")
    parser.add_argument(
        "--sweep-every",
        type=float,
        default=SWEEP_EVERY_S,
        help="seconds between sweeper passes, which settle what nobody answered in time (0: never)",
    )
    args = parser.parse_args(argv)
    from interlock.config import unknown_variables

    for unknown in unknown_variables(os.environ):
        print(f"interlock: warning: {unknown}", file=sys.stderr, flush=True)
    if problem := _setup_problem(args.agent):
        sys.exit(f"interlock: {problem}")
    agent = args.agent or deployment().agent
    if args.state is None:
        args.state = state_directory(agent)
        if agent == DEFAULT_AGENT:
            # Earlier versions kept the demo's state in `.interlock/` itself.
            adopt_shared_state(ROOT / STATE_DIR, args.state)
    if not args.aws_endpoint:
        # Only the embedded emulator's state is saved, and only one server may save it.
        # The lock's descriptor stays open, and the lock held, until this process ends.
        try:
            hold_state(args.state)
        except StateBusy as busy:
            sys.exit(f"interlock: {busy}")

    emulator = None if args.aws_endpoint else Emulator().start()
    endpoint = args.aws_endpoint or emulator.endpoint  # type: ignore[union-attr]
    configure(endpoint, args.table, args.bucket, args.agent)
    create_storage_if_missing(args.table, args.bucket)
    state = None
    if emulator is not None:
        # The embedded emulator forgets everything when the process ends: keep it on disk.
        import boto3

        state = LocalState(
            args.state, boto3.client("dynamodb"), boto3.client("s3"), args.table, args.bucket
        )
        if args.fresh:
            state.path.unlink(missing_ok=True)
        restored = state.restore()
        if restored:
            print(f"Restored {restored} items from {args.state} (--fresh starts over)", flush=True)
    given = deployment().dev_key
    key = bytes.fromhex(given) if given else dev_key(args.state)
    app = LocalApi(key, static_dir=ROOT / "web", on_write=state.save if state else None)
    # Build the agent once now: a broken agent module fails here, not on a first run.
    from interlock.api import wiring
    from interlock.errors import InvalidInput

    try:
        wiring.runtime()
    except (ValueError, InvalidInput, OSError) as exc:  # it cannot be built, or configured
        sys.exit(f"interlock: {exc}")
    server = make_server(args.host, args.port, app, threaded=True)
    url = f"http://{server.host}:{server.port}"
    _announce(url, key, args.roles.split(","))
    sweeping = (
        Sweeping(args.sweep_every, after=state.save if state else None).start()
        if args.sweep_every > 0
        else None
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        if sweeping is not None:
            sweeping.stop()
        if emulator:
            emulator.stop()


def _setup_problem(agent: str | None) -> str | None:
    """What is wrong with the settings, found before anything starts (no emulator, no
    Strands import), in one line; None when they look right. `agent` is the one named
    on the command line, if any (it wins over `INTERLOCK_AGENT`)."""
    from interlock.config import ModelSpec

    try:
        ModelSpec.parse(os.environ.get(Env.MODEL, "scripted"))
    except ValueError as exc:
        return f"{Env.MODEL}: {exc}"
    try:
        settings = deployment()
    except ValueError as exc:  # a malformed value, named with its variable
        return str(exc)
    if problem := _behaviour_problem(settings.agent_config_file):
        return problem
    if settings.dev_key is not None and not re.fullmatch(r"(?:[0-9a-fA-F]{2})+", settings.dev_key):
        return f"{Env.DEV_KEY} must be a key in hex"
    agent = agent or settings.agent
    module, _, factory = agent.partition(":")
    if not module or not factory:
        return f"an agent is named 'package.module:factory', not {agent!r}"
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return (
            f"no module {module!r} for the agent {agent!r} (is it on PYTHONPATH, or in the "
            "directory ./dev serve was started from?)"
        )
    return None


def _behaviour_problem(document_file: str | None) -> str | None:
    """What is wrong with the behaviour settings (the environment's, then the per-agent
    document's when a file names it), as the server would assemble them."""
    from interlock.config import assemble
    from interlock.errors import InvalidInput

    document = None
    if document_file:
        try:
            document = json.loads(Path(document_file).read_text())
        except (OSError, ValueError) as exc:
            return f"{Env.AGENT_CONFIG_FILE}: {document_file} cannot be read: {exc}"
        if not isinstance(document, dict):
            return f"{Env.AGENT_CONFIG_FILE}: {document_file} is not a JSON object"
    try:
        assemble({Env.MODEL: "scripted", **os.environ}, document)
    except InvalidInput as exc:
        return str(exc)
    return None


def _announce(url: str, key: bytes, roles: list[str]) -> None:
    token = devtokens.issue(key, "alice", roles)
    agent = deployment().agent
    # The demo's prompt pauses for approval; another agent is asked what it can do (the
    # tools stand-in answers with the tools it can call).
    demo = agent == DEFAULT_AGENT
    prompt = "Please download the reference table" if demo else "What can you do?"
    body = json.dumps(
        {
            "threadId": "demo",
            "runId": "r1",
            "messages": [{"id": "m1", "role": "user", "content": prompt}],
        }
    )
    print(f"Interlock is serving {agent} on {url}  (embedded moto)", flush=True)
    who = ", ".join(roles)
    print(f"Open {url}/ for the card page. A token for user alice ({who}):", flush=True)
    print(f"  export TOKEN={token}", flush=True)
    print("Start a turn that pauses for approval:" if demo else "Start a turn:", flush=True)
    print(f"  curl -sN -H \"Authorization: Bearer $TOKEN\" -d '{body}' {url}/runs", flush=True)
    print("Answer it (any time, even after restarting this server):", flush=True)
    print(f"  .venv/bin/python -m local.answer demo approve --url {url}", flush=True)
    print(f"READY {url}", flush=True)


if __name__ == "__main__":
    main()
