"""One Lambda function per handler folder, each with its own role and log group.

The handler code is only `functions/<name>/`; the `interlock` package and every
dependency come from the shared layer, so the functions run the same library build and a
handler change uploads a few kilobytes. The two functions that stream (run and resume,
`interlock.api.routes.STREAMED`) share `functions/stream/`: the ASGI app of
`interlock.api.stream` under the AWS Lambda Web Adapter, which AWS publishes as a layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from aws_cdk import Acknowledgment, Aws, Duration, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from interlock.api.routes import STREAMED
from interlock.config import Env

from .assets import FUNCTIONS_DIR
from .auth import TokenIssuer
from .bundling import lambda_architecture
from .layer import RUNTIME
from .permissions import (
    ACCESS,
    WILDCARD_REASONS,
    FunctionName,
    config_statements,
    data_statements,
    forward_statements,
    hand_over_statements,
    model_statements,
    runtime_statements,
    secret_statements,
    star_reason,
    wildcard_findings,
)
from .regions import published_adapter
from .settings import Settings
from .snapstart import invocable, snap_start
from .storage import StorageRefs
from .tools import ToolAccess

HANDLER: Final = "handler.lambda_handler"
STREAM_DIR: Final = FUNCTIONS_DIR / "stream"
# The Web Adapter runs the handler as a program: the script that starts the ASGI server.
STREAM_HANDLER: Final = "run.sh"
WEB_ADAPTER_PORT: Final = "8080"
# Long enough to look back over a month of incidents; Lambda logs hold chat excerpts, so
# they should not outlive the data they describe by much.
LOG_RETENTION: Final = logs.RetentionDays.ONE_MONTH
# The longest SQS keeps a message: a failed invocation waits two weeks to be looked at.
DEAD_LETTER_RETENTION: Final = Duration.days(14)
SERVICE_NAME: Final = "interlock"
METRICS_NAMESPACE: Final = "Interlock"
# The hand-over key's ARN, for the function that signs a screened tap and the one that
# verifies it (`Access.hand_over`).
HAND_OVER_KEY_VARIABLE: Final = "INTERLOCK_HAND_OVER_KEY"
# The user pool and its sign-in clients, for the functions that verify a person's ID
# token themselves against the pool's published keys (fetched from Cognito's public
# endpoint: the functions run outside any VPC, so they reach it directly).
USER_POOL_ID_VARIABLE: Final = "INTERLOCK_USER_POOL_ID"
USER_POOL_CLIENT_IDS_VARIABLE: Final = "INTERLOCK_USER_POOL_CLIENT_IDS"
TOKEN_VERIFIERS: Final[frozenset[FunctionName]] = frozenset({"run", "resume"})


@dataclass(frozen=True)
class Sizing:
    """How long a function may run and how much memory (and so CPU) it gets."""

    timeout: Duration
    memory_mb: int


SIZING: Final[Mapping[FunctionName, Sizing]] = {
    # An agent turn: several model calls and tool runs. The memory buys CPU for importing
    # Strands and (de)serializing snapshots, not for holding data.
    "run": Sizing(Duration.minutes(5), 1024),
    "resume": Sizing(Duration.minutes(5), 1024),
    # A few DynamoDB calls and at most one small S3 read.
    "requests": Sizing(Duration.seconds(10), 256),
    # A put or a delete, or a link's transaction.
    "admin": Sizing(Duration.seconds(10), 256),
    # The expiry finder: eight index queries and a batch send per ten overdue requests.
    "sweeper": Sizing(Duration.minutes(1), 256),
    # Resumes each overdue run of its batch, one after another, as resume does one.
    "settle": Sizing(Duration.minutes(5), 1024),
    # Verifies a webhook delivery and screens a tap: two reads and a put. Platforms want
    # an answer within seconds (Slack: 3 s).
    "channels": Sizing(Duration.seconds(10), 256),
}


class InterlockFunction(Construct):
    """A handler folder deployed as a function with the layer, its own role and logs.

    Attributes:
        name: Which handler it runs.
        function: The Lambda function.
        invocable: What its callers invoke: the function, or for one that restores from
            a SnapStart snapshot (`infra.snapstart`), an alias of its published version.
        role: Its execution role, holding exactly the statements of `infra.permissions`.
        log_group: Where the function logs, with a bounded retention.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: FunctionName,
        layer: lambda_.ILayerVersion,
        storage: StorageRefs,
        settings: Settings,
        agent_layer: lambda_.ILayerVersion | None = None,
        allowed_origin: str | None = None,
        forward_to: lambda_.IFunction | None = None,
        channel_secrets: Mapping[str, secretsmanager.ISecret] | None = None,
        page_url: str | None = None,
        model_secret: secretsmanager.ISecret | None = None,
        snap_start_offered: bool = True,
        hand_over_key: kms.IKey | None = None,
        issuer: TokenIssuer | None = None,
    ) -> None:
        """Create the function.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            name: Which handler: also the key into `ACCESS` and `SIZING`.
            layer: The layer carrying `interlock` and its dependencies.
            storage: The table and bucket, named to the handler in `INTERLOCK_TABLE` and
                `INTERLOCK_BUCKET`.
            settings: The deployment's settings.
            agent_layer: The layer carrying the user's agent, for the functions that run
                it (`Access.invokes_model`); the others never load it.
            forward_to: The resume function, for the run function (a run body that
                answers interrupts) and the channels function (a screened tap): only it
                may claim a request.
            channel_secrets: The configured channels' secrets, by channel: every
                function that posts, edits or verifies reads them.
            page_url: The card page's URL, linked from every posted card.
            model_secret: The OpenAI-compatible endpoint's key, for the functions that
                run the agent (an `openai:` model); None for a Bedrock or scripted one.
            allowed_origin: The browser origin the handler's responses admit (CORS), for
                a function behind the API; None for one that answers no browser.
            snap_start_offered: Whether the stack's region offers SnapStart
                (`infra.regions`); where it does not, no function restores from one.
            hand_over_key: The HMAC key a screened tap is handed over with: named to, and
                usable by, only the function at one end of the hand-over
                (`Access.hand_over`), for its end alone.
            issuer: The user pool and its sign-in clients: named to the functions that
                verify a person's ID token themselves (`TOKEN_VERIFIERS`).
        """
        super().__init__(scope, construct_id)
        self.name = name
        access, sizing = ACCESS[name], SIZING[name]
        self.log_group = logs.LogGroup(self, "Logs", retention=LOG_RETENTION)
        statements = [
            *data_statements(access, storage),
            *(model_statements(Stack.of(self), settings.model) if access.invokes_model else []),
            *config_statements(Stack.of(self), settings.agent_config_parameter),
            *runtime_statements(self.log_group),
            *(forward_statements(forward_to) if forward_to else []),
            *secret_statements(list((channel_secrets or {}).values())),
            *(
                secret_statements([model_secret], sid="ModelKeySecret")
                if model_secret and access.invokes_model
                else []
            ),
            *(
                hand_over_statements(hand_over_key, access.hand_over)
                if hand_over_key and access.hand_over
                else []
            ),
            # The agent's own tools' needs, only where the agent runs (`infra.tools`).
            *(
                settings.tools.checked_statements(
                    Stack.of(self), [storage.table_arn, storage.bucket_arn]
                )
                if access.invokes_model
                else []
            ),
        ]
        # Kept: a subclass adds the statements of what it creates itself (the sweeper's
        # dead-letter queue, the settle queue); the frozen role takes nothing else.
        self.policy = iam.PolicyDocument(statements=statements)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Runs the Interlock {name} function.",
            inline_policies={"Access": self.policy},
        )
        streams = name in STREAMED
        # The functions that run no agent get none of its tools' needs.
        tools = settings.tools if access.invokes_model else ToolAccess()
        layers = [layer, agent_layer] if agent_layer and access.invokes_model else [layer]
        if streams:
            layers.append(web_adapter_layer(self, settings))
        self.function = lambda_.Function(
            self,
            "Function",
            code=lambda_.Code.from_asset(
                str(STREAM_DIR if streams else FUNCTIONS_DIR / name),
                exclude=["__pycache__", "*.pyc"],
            ),
            handler=STREAM_HANDLER if streams else HANDLER,
            runtime=RUNTIME,
            architecture=lambda_architecture(settings.architecture),
            layers=layers,
            memory_size=max(sizing.memory_mb, tools.memory_mb or 0),
            timeout=_longer(sizing.timeout, tools.timeout),
            vpc=tools.vpc,
            vpc_subnets=tools.vpc_subnets if tools.vpc else None,
            security_groups=tools.security_groups if tools.vpc else None,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            # JSON records (Powertools writes JSON; the platform's own lines follow), and
            # the platform's level set alongside the application's.
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=_APPLICATION_LEVELS[settings.log_level],
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            # Frozen: anything CDK would add (such as X-Ray statements in a default policy)
            # is already in the inline policy above, and nothing else may slip in.
            role=self.role.without_policy_updates(),
            environment={
                **environment(name, storage, settings, allowed_origin),
                **(STREAM_ENVIRONMENT | {Env.FUNCTION: name} if streams else {}),
                **({Env.RESUME_FUNCTION: forward_to.function_name} if forward_to else {}),
                **channel_environment(channel_secrets or {}, page_url),
                **(
                    {Env.OPENAI_KEY_SECRET: model_secret.secret_name}
                    if model_secret and access.invokes_model
                    else {}
                ),
                **(
                    {HAND_OVER_KEY_VARIABLE: hand_over_key.key_arn}
                    if hand_over_key and access.hand_over
                    else {}
                ),
                **(issuer_environment(issuer) if issuer and name in TOKEN_VERIFIERS else {}),
                **tools.environment,
            },
            description=f"Interlock {name}: thin handler over the interlock layer.",
            snap_start=snap_start(name, offered=snap_start_offered),
        )
        self.invocable = invocable(self, name, self.function, offered=snap_start_offered)
        reasons: dict[str | None, str] = dict(WILDCARD_REASONS)
        reasons.update((sid, why) for sid, why in tools.wildcard_reasons.items())
        for finding, reason in wildcard_findings(Stack.of(self), statements, reasons).items():
            Validations.of(self.role).acknowledge(Acknowledgment(id=finding, reason=reason))
        if starred := star_reason(statements, reasons):
            Validations.of(self.role).acknowledge(
                Acknowledgment(id="Serverless-LambdaStarPermissions", reason=starred)
            )
        for finding in ("AwsSolutions-L1", "Serverless-LambdaLatestVersion"):
            Validations.of(self.function).acknowledge(
                Acknowledgment(id=finding, reason=RUNTIME_REASON)
            )

    def acknowledge_no_lambda_dlq(self, reason: str) -> None:
        """Explain why the function has no Lambda dead-letter queue (cdk-nag's
        Serverless-LambdaDLQ): who invokes it, and where a failed invocation ends instead.

        Args:
            reason: How its callers invoke it and what becomes of a failure.
        """
        Validations.of(self.function).acknowledge(
            Acknowledgment(id="Serverless-LambdaDLQ", reason=reason)
        )

    def keep_failed_invocations(
        self, *, retry_attempts: int | None = None, max_event_age: Duration | None = None
    ) -> sqs.Queue:
        """Send each asynchronous invocation Lambda gives up on to a dead-letter queue of
        the function's own: an on-failure destination, which keeps the event with the
        error that ended it (a Lambda dead-letter queue would keep the event alone).

        Lambda gives up on an invocation that failed (an error the runtime reports, a
        timeout, a crash) after `retry_attempts` retries, or that waited longer than
        `max_event_age`; Lambda's defaults (two retries, six hours) when None.

        Args:
            retry_attempts: How often Lambda retries a failed invocation.
            max_event_age: How long an invocation may wait to be run.

        Returns:
            The dead-letter queue: encrypted, SSL only, its messages kept two weeks.
        """
        queue = dead_letter_queue(self, f"the {self.name} function's")
        # Lambda sends to a destination with the function's own role, which is frozen.
        self.policy.add_statements(
            iam.PolicyStatement(
                sid="DeadLetters", actions=["sqs:SendMessage"], resources=[queue.queue_arn]
            )
        )
        self.function.configure_async_invoke(
            retry_attempts=retry_attempts,
            max_event_age=max_event_age,
            on_failure=destinations.SqsDestination(queue),
        )
        return queue


RUNTIME_REASON: Final = (
    "The layer's wheels are installed for CPython 3.12 (infra.layer) and a function must "
    "run the Python its layer was built for: both move to a newer runtime together, once "
    "the pinned dependencies are checked on it."
)


_APPLICATION_LEVELS: Final = {
    "DEBUG": lambda_.ApplicationLogLevel.DEBUG,
    "INFO": lambda_.ApplicationLogLevel.INFO,
    "WARNING": lambda_.ApplicationLogLevel.WARN,
    "ERROR": lambda_.ApplicationLogLevel.ERROR,
}

STREAM_ENVIRONMENT: Final = {
    # The adapter starts first (the runtime's exec wrapper), runs `run.sh`, waits for the
    # app to listen, then turns each invocation into an HTTP request to it.
    "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
    # Answers stream back through API Gateway as they are written.
    "AWS_LWA_INVOKE_MODE": "response_stream",
    "AWS_LWA_PORT": WEB_ADAPTER_PORT,
    # Invocations that are not HTTP requests (a tap handed over for the resume function
    # to apply) reach the app as a POST here; API Gateway never routes to it.
    "AWS_LWA_PASS_THROUGH_PATH": "/events",
    # A tap the app could not apply answers 502 (`api.stream.HAND_OVER_FAILED`, which no
    # other route answers): the adapter (since 0.9.0) then fails the invocation, so Lambda
    # retries the asynchronous hand-over and finally sends it to the on-failure queue.
    "AWS_LWA_ERROR_STATUS_CODES": "502",
    # The X-Ray SDK traces one invocation per process, which a long-lived web server is
    # not; the function's active tracing still records every invocation.
    "POWERTOOLS_TRACE_DISABLED": "true",
}


def dead_letter_queue(scope: Construct, of: str) -> sqs.Queue:
    """`scope`'s dead-letter queue ("DeadLetters"): encrypted, SSL only, its messages kept
    two weeks; `of` says whose it is ("the settle queue's"), for the findings that a
    dead-letter queue has no dead-letter queue of its own."""
    queue = sqs.Queue(
        scope,
        "DeadLetters",
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=DEAD_LETTER_RETENTION,
    )
    for finding in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
        Validations.of(queue).acknowledge(
            Acknowledgment(
                id=finding, reason=f"This is {of} dead-letter queue; it has none of its own."
            )
        )
    return queue


def channel_environment(
    secrets: Mapping[str, secretsmanager.ISecret], page_url: str | None
) -> dict[str, str]:
    """Which secrets hold the channels' tokens (by name: values are read at run time)."""
    names = {"slack": Env.SLACK_SECRET, "telegram": Env.TELEGRAM_SECRET}
    variables = {names[channel]: secret.secret_name for channel, secret in secrets.items()}
    if secrets and page_url:
        variables[Env.PAGE_URL] = page_url
    return variables


def issuer_environment(issuer: TokenIssuer) -> dict[str, str]:
    """The pool a person's ID token must come from, and the clients it may be issued to
    (comma-separated): a token is checked against the pool's published keys."""
    return {
        USER_POOL_ID_VARIABLE: issuer.user_pool_id,
        USER_POOL_CLIENT_IDS_VARIABLE: ",".join(issuer.client_ids),
    }


def web_adapter_layer(scope: Construct, settings: Settings) -> lambda_.ILayerVersion:
    """The Lambda Web Adapter layer: the setting's ARN, or the layer AWS publishes in the
    stack's region for the functions' architecture (`infra.regions.REGIONS`)."""
    arn = settings.web_adapter_layer or published_adapter(
        Stack.of(scope).region, settings.architecture
    ).arn(Aws.PARTITION, Aws.REGION)
    return lambda_.LayerVersion.from_layer_version_arn(scope, "WebAdapter", arn)


def environment(
    name: FunctionName,
    storage: StorageRefs,
    settings: Settings,
    allowed_origin: str | None = None,
) -> dict[str, str]:
    """The variables the handler and `interlock.api.wiring` read."""
    variables = {
        "INTERLOCK_TABLE": storage.table_name,
        "INTERLOCK_BUCKET": storage.bucket_name,
        # Every function builds its stores with this policy (the requests function and
        # the settle function also judge expiry and leases), so all of them must agree.
        "INTERLOCK_REQUEST_TTL_S": str(settings.request_ttl_s),
        "INTERLOCK_LEASE_MS": str(settings.lease_ms),
        "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
        "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
        "POWERTOOLS_LOG_LEVEL": settings.log_level,
    }
    if allowed_origin is not None:
        # For the CORS headers of the handler's own responses: API Gateway adds them only
        # to preflight and gateway-generated responses, not to Lambda proxy responses.
        # The sweeper and the settle function answer no browser, so they are given none.
        variables["INTERLOCK_ALLOWED_ORIGIN"] = allowed_origin
    if ACCESS[name].invokes_model:
        variables["INTERLOCK_MODEL"] = settings.model.spec
        variables["INTERLOCK_AGENT"] = settings.agent.reference
    if settings.agent_config_parameter is not None:
        # Every function assembles its configuration at start-up, the per-agent document
        # included (`interlock.api.wiring.config`).
        variables["INTERLOCK_AGENT_CONFIG_PARAM"] = settings.agent_config_parameter
    return variables


def _longer(own: Duration, wanted: Duration | None) -> Duration:
    """The function's own timeout, or the tools' when that is longer."""
    return wanted if wanted and wanted.to_seconds() > own.to_seconds() else own
