"""The public API: REST API Gateway in front of the run, resume and requests functions.

Resources and methods are built from `interlock.api.routes.ROUTES`, the table each
handler registers its routes from, so a deployed route always has a handler and the
proxy event's `resource` is exactly the route's path. The expiry sweeper and the settle
function share the stack and the layer but not the API: a schedule invokes the sweeper,
which queues overdue requests for the settle function.

The API admits one browser origin, the card page's CloudFront URL (`infra.hosting`),
unless `interlock:allowedOrigin` names another.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aws_cdk import (
    Acknowledgment,
    Annotations,
    CfnOutput,
    Duration,
    Fn,
    RemovalPolicy,
    SecretValue,
    Stack,
    Token,
    Validations,
)
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from interlock.api.routes import FUNCTIONS, ROUTES, STREAMED, Function, Route

from .auth import Auth
from .bundling import lambda_architecture
from .functions import SIZING, InterlockFunction
from .hosting import SiteRefs
from .layer import LOCK, InterlockLayer
from .monitoring import Monitoring
from .regions import plan_region
from .settings import ANY_ORIGIN, Settings, check_model_region
from .settle import Settle
from .storage import StorageRefs
from .sweeper import Sweeper

STAGE_NAME: Final = "v1"
# A buffered REST integration may wait at most 29 s: enough for the requests function.
INTEGRATION_TIMEOUT: Final = Duration.seconds(29)
# A streaming one may wait up to 15 minutes for the stream to end: the run and resume
# methods wait as long as their function may run, so a turn is bounded by the function's
# timeout, not by the gateway's.
STREAM_TIMEOUT: Final = SIZING["run"].timeout
# Per stage, across all callers: generous for a team, yet a runaway client cannot run up
# a Bedrock bill faster than this.
THROTTLE_RATE_PER_S: Final = 25
THROTTLE_BURST: Final = 50
# How long a hand-over key whose stack deleted it waits before KMS deletes it (the
# shortest wait KMS allows): until then the deletion can be cancelled.
HAND_OVER_KEY_PENDING_WINDOW: Final = Duration.days(7)
ACCESS_LOG_RETENTION: Final = logs.RetentionDays.THREE_MONTHS
BODY_CONTENT_TYPE: Final = "application/json"
ALLOWED_HEADERS: Final = ("Authorization", "Content-Type")

# One JSON object per request: who (the Cognito sub), what, and how it went.
ACCESS_LOG_FIELDS: Final = {
    "requestId": apigw.AccessLogField.context_request_id(),
    "traceId": apigw.AccessLogField.context_xray_trace_id(),
    "time": apigw.AccessLogField.context_request_time_epoch(),
    "ip": apigw.AccessLogField.context_identity_source_ip(),
    "user": apigw.AccessLogField.context_authorizer_claims("sub"),
    "method": apigw.AccessLogField.context_http_method(),
    "resource": apigw.AccessLogField.context_resource_path(),
    "status": apigw.AccessLogField.context_status(),
    "length": apigw.AccessLogField.context_response_length(),
    "latencyMs": apigw.AccessLogField.context_response_latency(),
    "integrationStatus": apigw.AccessLogField.context_integration_status(),
    "integrationLatencyMs": apigw.AccessLogField.context_integration_latency(),
    "error": apigw.AccessLogField.context_error_message(),
    "validationError": apigw.AccessLogField.context_error_validation_error_string(),
}
# Errors API Gateway answers by itself, in the handlers' `{"error": {code, message}}`
# shape, so a client parses one error format: type -> (status override, code).
GATEWAY_ERRORS: Final[Mapping[apigw.ResponseType, tuple[str | None, str]]] = {
    apigw.ResponseType.UNAUTHORIZED: (None, "unauthorized"),
    apigw.ResponseType.ACCESS_DENIED: (None, "forbidden"),
    apigw.ResponseType.BAD_REQUEST_BODY: (None, "bad_request"),
    apigw.ResponseType.BAD_REQUEST_PARAMETERS: (None, "bad_request"),
    apigw.ResponseType.THROTTLED: (None, "limit_exceeded"),
    # Every method needs a token, so "missing authentication token" only ever means an
    # unknown path: say so.
    apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN: ("404", "not_found"),
    apigw.ResponseType.DEFAULT_4_XX: (None, "bad_request"),
    apigw.ResponseType.DEFAULT_5_XX: (None, "system_error"),
}


@dataclass(frozen=True)
class ApiRefs:
    """What the card page's `config.json` names, as a later stack reads it (named outputs).

    Attributes:
        api_url: The stage's base URL (`https://<id>.execute-api.<region>.amazonaws.com/v1/`).
        user_pool_id: The user pool.
        client_id: The card page's public client.
        sign_in_url: The hosted UI's base URL (`https://<prefix>.auth.<region>.amazoncognito.com`).
    """

    api_url: str
    user_pool_id: str
    client_id: str
    sign_in_url: str


class InterlockApiStack(Stack):
    """The functions, their layer, the user pool, the REST API and the sweeper's schedule.

    Stateless apart from the user pool (retained): it can be replaced freely while the
    storage stack keeps the data, read through that stack's outputs (`StorageRefs`).

    Attributes:
        functions: Each API handler's function construct, by route-table name.
        hand_over_key: The HMAC key the channels function signs each screened tap with,
            and the resume function verifies it with.
        resume_dead_letters: Where an asynchronous invocation of the resume function (a
            tap the channels function handed over) lands when Lambda gives up on it.
        settle: The settle function, its queue and the queue's dead letters.
        sweeper: The expiry sweeper (the finder): its function and its schedule.
        auth: The user pool, its hosted UI domain and its client.
        api: The REST API.
        allowed_origin: The browser origin the API admits (CORS).
        refs: The API and sign-in values for later stacks (they read this stack's outputs).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: StorageRefs,
        site: SiteRefs,
        sign_in_prefix: str,
        settings: Settings | None = None,
        **kwargs: Any,
    ) -> None:
        """Create the stack.

        Args:
            scope: The app or stage.
            construct_id: The stack id.
            storage: The table and the payload bucket, from the storage stack.
            site: The card page's distribution, from the hosting stack: the default CORS
                origin and the sign-in client's callback URL.
            sign_in_prefix: The hosted UI's domain prefix (`infra.auth.domain_prefix`).
            settings: The deployment settings; read from CDK context when omitted.
            **kwargs: Passed to `Stack` (env, stack_name, ...).
        """
        super().__init__(scope, construct_id, **kwargs)
        settings = settings or Settings.from_context(self.node)
        check_model_region(settings.model, self.region)
        region = plan_region(
            None if Token.is_unresolved(self.region) else self.region,
            settings.architecture,
            own_adapter=settings.web_adapter_layer is not None,
        )
        if region.note:
            Annotations.of(self).add_info(region.note)
        self.allowed_origin = settings.allowed_origin or site.origin
        architecture = lambda_architecture(settings.architecture)
        layer = InterlockLayer(self, "Layer", architecture=architecture).layer_version
        # The user's agent ships as its own layer, beside Interlock's: only the functions
        # that run it (run, resume, settle) carry it. Lambda unpacks it over Interlock's,
        # so its requirements are resolved with Interlock's pins and ship none of them.
        agent_layer = InterlockLayer(
            self,
            "AgentLayer",
            requirements=settings.agent.requirements,
            package_dir=settings.agent.package_dir,
            description=f"The agent {settings.agent.reference} and its requirements.",
            architecture=architecture,
            beside=LOCK,
        ).layer_version
        self.channel_secrets = _channel_secrets(self, settings)
        self.model_secret = _model_secret(self, settings)
        self.hand_over_key = _hand_over_key(self, retain=settings.retain_data)
        # Before the functions: the run and resume functions verify ID tokens themselves,
        # so they name the pool and its clients (the pool names no function).
        self.auth = Auth(
            self,
            "Auth",
            site_url=site.url,
            domain_prefix=sign_in_prefix,
            retain=settings.retain_data,
        )
        page_url = page_url_for(settings.allowed_origin, site.url)
        self.functions: dict[Function, InterlockFunction] = {}
        # Resume first: the run function hands it the resumes posted to the one endpoint,
        # and the channels function the taps it screened.
        for name in sorted(FUNCTIONS, key=lambda n: n != "resume"):
            self.functions[name] = InterlockFunction(
                self,
                name.capitalize(),
                name=name,
                layer=layer,
                agent_layer=agent_layer,
                storage=storage,
                settings=settings,
                # The channels function answers platforms, never a browser.
                allowed_origin=None if name == "channels" else self.allowed_origin,
                forward_to=(
                    self.functions["resume"].function if name in ("run", "channels") else None
                ),
                # The administrators' routes post to no platform.
                channel_secrets=None if name == "admin" else self.channel_secrets,
                page_url=page_url,
                model_secret=self.model_secret,
                snap_start_offered=region.snap_start,
                hand_over_key=self.hand_over_key,
                issuer=self.auth.issuer,
            )
            self.functions[name].acknowledge_no_lambda_dlq(_NO_LAMBDA_DLQ[name])
        # The channels function hands each screened tap to the resume function with an
        # asynchronous invoke: once Lambda gives up on one, it lands here (alarmed)
        # instead of vanishing with the person's answer. The Web Adapter passes the app's
        # own error responses on as successful invocations, so what lands here timed
        # out, crashed or could not start.
        self.resume_dead_letters = self.functions["resume"].keep_failed_invocations()
        self.settle = Settle(
            self,
            "Settle",
            layer=layer,
            agent_layer=agent_layer,
            storage=storage,
            settings=settings,
            channel_secrets=self.channel_secrets,
            page_url=page_url,
            model_secret=self.model_secret,
        )
        self.sweeper = Sweeper(
            self,
            "Sweeper",
            layer=layer,
            storage=storage,
            settings=settings,
            settle_queue=self.settle.queue,
        )
        self.api, access_logs = _rest_api(self, self.allowed_origin, settings.access_logs)
        if settings.access_logs == "create-role":
            # REST API access logs need the account's API Gateway CloudWatch role; in an
            # account that never set one, the stage would fail to create without it.
            account = _account_logging_role(self)
            self.api.deployment_stage.node.add_dependency(account)
        _add_routes(self.api, self.functions, self.auth)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            api=self.api,
            stage=STAGE_NAME,
            access_logs=access_logs,
            functions={
                **{name: f.function for name, f in self.functions.items()},
                "sweeper": self.sweeper.function,
                "settle": self.settle.function,
            },
            dead_letters={
                "sweeper-dead-letters": self.sweeper.dead_letters,
                "settle-dead-letters": self.settle.dead_letters,
                "resume-dead-letters": self.resume_dead_letters,
            },
            queues={"settle-queue": self.settle.queue},
            model=settings.model,
        )
        # One URL output, under a name scripts can rely on, instead of the generated one.
        self.api.node.try_remove_child("Endpoint")
        outputs = {
            "api_url": ("ApiUrl", self.api.url),
            "user_pool_id": ("UserPoolId", self.auth.user_pool.user_pool_id),
            "client_id": ("UserPoolClientId", self.auth.client.user_pool_client_id),
            "sign_in_url": ("SignInUrl", self.auth.domain.base_url()),
        }
        for output_name, value in outputs.values():
            CfnOutput(self, output_name, value=value)
        self.refs = ApiRefs(
            **{
                field: Fn.get_stack_output(self.stack_name, output_name)
                for field, (output_name, _) in outputs.items()
            }
        )
        _acknowledge(self, logged=access_logs is not None)


# Why each function behind the API needs no Lambda dead-letter queue (cdk-nag's
# Serverless-LambdaDLQ), which would keep failed asynchronous invocations alone.
_ASYNC_ONLY: Final = "A Lambda dead-letter queue keeps failed asynchronous invocations alone."
_STREAMED_FAILURE: Final = (
    "API Gateway invokes it synchronously (a streamed response): a failure reaches the "
    "caller, as an error status or as a stream that ends early."
)
_NO_LAMBDA_DLQ: Final[Mapping[Function, str]] = {
    "run": f"{_STREAMED_FAILURE} Nothing else invokes it. {_ASYNC_ONLY}",
    "resume": (
        f"{_STREAMED_FAILURE} The run function hands a resume over the same way (a "
        "streamed invoke). Its one asynchronous caller, the channels function handing "
        "over a tap, is covered by an on-failure destination: its own dead-letter queue, "
        f"which keeps the error with the event. {_ASYNC_ONLY}"
    ),
    "requests": (
        "API Gateway invokes it synchronously: a failure reaches the caller as an error "
        f"status. Nothing else invokes it. {_ASYNC_ONLY}"
    ),
    "admin": (
        "API Gateway invokes it synchronously: a failure reaches the administrator as an "
        f"error status. Nothing else invokes it. {_ASYNC_ONLY}"
    ),
    "channels": (
        "API Gateway invokes it synchronously for a platform's webhook delivery: a failure "
        f"is answered to the platform with an error status. Nothing else invokes it. "
        f"{_ASYNC_ONLY}"
    ),
}


# What API Gateway needs to write access logs to CloudWatch Logs (the actions of AWS's
# managed policy for this role, written out so the role carries no managed policy).
_API_GATEWAY_LOG_ACTIONS: Final = (
    "logs:CreateLogGroup",
    "logs:CreateLogStream",
    "logs:DescribeLogGroups",
    "logs:DescribeLogStreams",
    "logs:PutLogEvents",
    "logs:GetLogEvents",
    "logs:FilterLogEvents",
)


def _account_logging_role(scope: Construct) -> apigw.CfnAccount:
    """The account-wide role API Gateway logs with, and the setting that names it.

    Retained when the stack is deleted: the account setting outlives the stack, and a
    deleted role would break the access logs of every other API in the account.
    """
    role = iam.Role(
        scope,
        "ApiGatewayLogsRole",
        assumed_by=iam.ServicePrincipal("apigateway.amazonaws.com"),
        description="Lets API Gateway write this account's API access logs.",
        inline_policies={
            "Logs": iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(actions=list(_API_GATEWAY_LOG_ACTIONS), resources=["*"])
                ]
            )
        },
    )
    role.apply_removal_policy(RemovalPolicy.RETAIN)
    Validations.of(role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason=(
                "The account's API Gateway logging role: API Gateway writes to log groups of "
                "every API in the account, which no resource list can name in advance."
            ),
        )
    )
    account = apigw.CfnAccount(scope, "ApiGatewayAccount", cloud_watch_role_arn=role.role_arn)
    account.apply_removal_policy(RemovalPolicy.RETAIN)
    return account


# What each channel's secret holds (JSON): operators fill in the values the platform
# gave them (`aws secretsmanager put-secret-value`); until then the channel is off.
_SECRET_TEMPLATES: Final = {
    "slack": {"botToken": "", "signingSecret": ""},
    "telegram": {"botToken": "", "webhookSecret": ""},
}


def _model_secret(stack: Stack, settings: Settings) -> secretsmanager.ISecret | None:
    """For an `openai:` model, the secret its key is read from: created with a placeholder,
    filled in by an operator (`aws secretsmanager put-secret-value`); until then `none` is
    sent."""
    if settings.model.provider != "openai":
        return None
    secret = secretsmanager.Secret(
        stack,
        "ModelKeySecret",
        description="The API key of Interlock's OpenAI-compatible model endpoint (plain text).",
        # A placeholder (the value may not be empty): an endpoint that checks no key takes it.
        secret_string_value=SecretValue.unsafe_plain_text("none"),
    )
    Validations.of(secret).acknowledge(
        Acknowledgment(
            id="AwsSolutions-SMG4",
            reason=(
                "The key is issued by the model's provider and can only be rotated there; "
                "an operator puts the new value here."
            ),
        )
    )
    CfnOutput(stack, "ModelKeySecretName", value=secret.secret_name)
    return secret


def _hand_over_key(stack: Stack, *, retain: bool) -> kms.Key:
    """The HMAC key a screened tap is signed with by the channels function and verified
    with by the resume function, which applies a tap only if it verifies.

    Its material never leaves KMS; each role's policy allows one end alone
    (`infra.permissions.hand_over_statements`). KMS rotates no HMAC key. Kept with the
    stage's data (`interlock:removalPolicy`).
    """
    return kms.Key(
        stack,
        "HandOverKey",
        description="Signs the taps Interlock's channels function hands to its resume function.",
        key_spec=kms.KeySpec.HMAC_256,
        key_usage=kms.KeyUsage.GENERATE_VERIFY_MAC,
        pending_window=HAND_OVER_KEY_PENDING_WINDOW,
        removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
    )


def _channel_secrets(stack: Stack, settings: Settings) -> dict[str, secretsmanager.ISecret]:
    secrets: dict[str, secretsmanager.ISecret] = {}
    for channel in settings.channels:
        secret = secretsmanager.Secret(
            stack,
            f"{channel.capitalize()}Secret",
            description=f"Interlock's {channel} tokens: {', '.join(_SECRET_TEMPLATES[channel])}.",
            secret_object_value={
                key: SecretValue.unsafe_plain_text(value)
                for key, value in _SECRET_TEMPLATES[channel].items()
            },
        )
        Validations.of(secret).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SMG4",
                reason=(
                    f"The {channel} bot token and signing secret are issued by the platform "
                    "and can only be rotated there; an operator puts the new value here."
                ),
            )
        )
        CfnOutput(stack, f"{channel.capitalize()}SecretName", value=secret.secret_name)
        secrets[channel] = secret
    return secrets


def _rest_api(
    scope: Construct, allowed_origin: str, logging: str
) -> tuple[apigw.RestApi, logs.LogGroup | None]:
    access_logs = (
        None
        if logging == "off"
        else logs.LogGroup(scope, "AccessLogs", retention=ACCESS_LOG_RETENTION)
    )
    api = apigw.RestApi(
        scope,
        "Api",
        rest_api_name=Stack.of(scope).stack_name,
        description="Interlock: runs, resumes and open requests of agent chats.",
        endpoint_types=[apigw.EndpointType.REGIONAL],
        # The account-wide logging role is the stack's own (`_account_logging_role`), with
        # an inline policy; CDK's would carry a managed one.
        cloud_watch_role=False,
        deploy_options=apigw.StageOptions(
            stage_name=STAGE_NAME,
            tracing_enabled=True,
            access_log_destination=(
                apigw.LogGroupLogDestination(access_logs) if access_logs else None
            ),
            access_log_format=(
                apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS)) if access_logs else None
            ),
            throttling_rate_limit=THROTTLE_RATE_PER_S,
            throttling_burst_limit=THROTTLE_BURST,
        ),
        default_cors_preflight_options=apigw.CorsOptions(
            allow_origins=[allowed_origin],
            allow_methods=sorted({route.method for route in ROUTES} | {"OPTIONS"}),
            allow_headers=list(ALLOWED_HEADERS),
            max_age=Duration.hours(1),
        ),
    )
    for response_type, (status, code) in GATEWAY_ERRORS.items():
        api.add_gateway_response(
            f"Error-{response_type.response_type}",
            type=response_type,
            status_code=status,
            # Without it a browser hides the status from the card page's script.
            response_headers={"Access-Control-Allow-Origin": f"'{allowed_origin}'"},
            templates={BODY_CONTENT_TYPE: _error_template(code)},
        )
    return api, access_logs


def _error_template(code: str) -> str:
    body = json.dumps({"error": {"code": code, "message": "MESSAGE"}}, separators=(",", ":"))
    # The variable is a JSON string literal already, quotes and escapes included.
    return body.replace('"MESSAGE"', "$context.error.messageString")


def _add_routes(
    api: apigw.RestApi, functions: Mapping[Function, InterlockFunction], auth: Auth
) -> None:
    authorizer = apigw.CognitoUserPoolsAuthorizer(
        api, "Authorizer", cognito_user_pools=[auth.user_pool]
    )
    integrations = {
        name: apigw.LambdaIntegration(
            # A SnapStart function's alias: only a published version restores a snapshot.
            construct.invocable,
            proxy=True,
            timeout=STREAM_TIMEOUT if name in STREAMED else INTEGRATION_TIMEOUT,
            response_transfer_mode=(
                apigw.ResponseTransferMode.STREAM
                if name in STREAMED
                else apigw.ResponseTransferMode.BUFFERED
            ),
            # The console's test button bypasses the authorizer: no permission for it.
            allow_test_invoke=False,
        )
        for name, construct in functions.items()
    }
    with_body = api.add_request_validator(
        "ValidateBody", validate_request_body=True, validate_request_parameters=True
    )
    parameters_only = api.add_request_validator(
        "ValidateParameters", validate_request_parameters=True
    )
    # Just enough to refuse a body that names no chat before a function starts; the
    # handler validates the full AG-UI input.
    thread_input = api.add_model(
        "ThreadInput",
        content_type=BODY_CONTENT_TYPE,
        schema=apigw.JsonSchema(
            schema=apigw.JsonSchemaVersion.DRAFT4,
            title="ThreadInput",
            type=apigw.JsonSchemaType.OBJECT,
            required=["threadId"],
            properties={
                "threadId": apigw.JsonSchema(type=apigw.JsonSchemaType.STRING, min_length=1)
            },
        ),
    )
    for route in ROUTES:
        # AG-UI bodies name their thread; a platform's delivery has its own format.
        has_body = route.method == "POST" and route.authorized
        method = api.root.resource_for_path(route.path).add_method(
            route.method,
            integrations[route.function],
            authorization_type=(
                apigw.AuthorizationType.COGNITO
                if route.authorized
                else apigw.AuthorizationType.NONE
            ),
            authorizer=authorizer if route.authorized else None,
            request_validator=with_body if has_body else parameters_only,
            request_models={BODY_CONTENT_TYPE: thread_input} if has_body else None,
            request_parameters={
                f"method.request.path.{name}": True for name in path_parameters(route)
            },
        )
        if not route.authorized:
            for finding in ("AwsSolutions-APIG4", "AwsSolutions-COG4"):
                Validations.of(method).acknowledge(
                    Acknowledgment(
                        id=finding,
                        reason=(
                            "A chat platform's webhook: the platform sends no Cognito token. "
                            "The handler verifies each delivery (Slack's HMAC signature with "
                            "a fresh timestamp, Telegram's secret token) before reading it."
                        ),
                    )
                )


def path_parameters(route: Route) -> list[str]:
    """The names of a route's `{parameters}`, in path order."""
    return re.findall(r"{(\w+)}", route.path)


def _acknowledge(stack: InterlockApiStack, *, logged: bool) -> None:
    stage = stack.api.deployment_stage
    if not logged:
        for finding in ("AwsSolutions-APIG1", "Serverless-APIGWAccessLogging"):
            Validations.of(stage).acknowledge(
                Acknowledgment(
                    id=finding,
                    reason=(
                        "Off by default: a REST API writes access logs only through the "
                        "account's API Gateway CloudWatch role, an account-wide setting a "
                        "first deployment should not change. Turn them on with "
                        "interlock:accessLogs=on (the account has the role) or create-role."
                    ),
                )
            )
    Validations.of(stage).acknowledge(
        Acknowledgment(
            id="AwsSolutions-APIG3",
            reason=(
                "Every method requires a Cognito token and the stage is throttled; a WAF web "
                "ACL adds a monthly charge per API. Associate one per deployment if the "
                "API is exposed to untrusted networks at scale."
            ),
        )
    )
    Validations.of(stage).acknowledge(
        Acknowledgment(
            id="AwsSolutions-APIG6",
            reason=(
                "The functions log and trace each call (and JSON access logs, when "
                "switched on, record every request); execution logs would add a full "
                "copy of every request and response body, resume secrets included."
            ),
        )
    )


def page_url_for(allowed_origin: str | None, site_url: str) -> str:
    """The card page's URL that channel posts link to: the configured origin, unless it
    is `*` (any origin may call the API, which names no page), then the stack's own."""
    if allowed_origin and allowed_origin != ANY_ORIGIN:
        return allowed_origin
    return site_url
