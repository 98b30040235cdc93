"""Deployment settings read from CDK context, with the defaults a first deploy needs.

Each can be set per deployment without editing code, for example
`npx cdk deploy -c interlock:leaseMs=60000`. Values given on the command line arrive as
strings and values in `cdk.json` as JSON, so both are accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from constructs import Node
from pydantic import ValidationError

from interlock.channels import CHANNELS, ChannelName
from interlock.config import DEFAULT_AGENT, DEFAULT_MODEL_ID, InterlockConfig, ModelSpec
from interlock.errors import validation_message
from interlock.timing import DAY_S, StorePolicy

from .assets import EXAMPLES_DIR
from .storage import UPGRADE_INDEXES
from .tools import ToolAccess

_STORE_DEFAULTS: Final = StorePolicy()

MODEL_KEY: Final = "interlock:model"
REQUEST_TTL_KEY: Final = "interlock:requestTtlSeconds"
LEASE_KEY: Final = "interlock:leaseMs"
ALLOWED_ORIGIN_KEY: Final = "interlock:allowedOrigin"
SWEEP_EVERY_KEY: Final = "interlock:sweepEveryMinutes"
AGENT_CONFIG_KEY: Final = "interlock:agentConfigParameter"
AUTH_DOMAIN_PREFIX_KEY: Final = "interlock:authDomainPrefix"
ACCESS_LOGS_KEY: Final = "interlock:accessLogs"
ACCESS_LOGS: Final = ("off", "on", "create-role")
# Replaced by `interlock:accessLogs`: named, it is refused with the replacement.
_RETIRED_ACCOUNT_ROLE_KEY: Final = "interlock:apiGatewayAccountRole"
STAGE_KEY: Final = "interlock:stage"
# A stage names its stacks (`Interlock<Stage>Api`): lowercase, short, starting with a letter.
_STAGE = re.compile(r"[a-z][a-z0-9]{0,11}")
REMOVAL_POLICY_KEY: Final = "interlock:removalPolicy"
# Stages whose data outlives their stacks unless told otherwise; any other named stage
# (dev, test, a pull request's) is torn down with its data.
RETAINING_STAGES: Final = frozenset({"", "prod"})
# Set only while upgrading a table that lacks some of the indexes (UPGRADING.md).
UPGRADE_STEP_KEY: Final = "interlock:upgradeStep"
WEB_ADAPTER_LAYER_KEY: Final = "interlock:webAdapterLayer"
ARCHITECTURE_KEY: Final = "interlock:architecture"
CHANNELS_KEY: Final = "interlock:channels"
LOG_LEVEL_KEY: Final = "interlock:logLevel"
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")
# A published Lambda layer version: arn:<partition>:lambda:<region>:<account>:layer:<name>:<n>
_LAYER_ARN = re.compile(r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+")
AGENT_KEY: Final = "interlock:agent"
AGENT_PACKAGE_KEY: Final = "interlock:agentPackage"
AGENT_REQUIREMENTS_KEY: Final = "interlock:agentRequirements"

DEFAULT_AGENT_PACKAGE: Final = EXAMPLES_DIR
DEFAULT_AGENT_REQUIREMENTS: Final = DEFAULT_AGENT_PACKAGE / "requirements.txt"
_AGENT_REFERENCE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")

DEFAULT_MODEL: Final = f"bedrock:{DEFAULT_MODEL_ID}"
# The store's own defaults (a day to answer a card, a 30 s lease), so a deployment that
# sets nothing behaves like local mode and the tests.
DEFAULT_REQUEST_TTL_S: Final = _STORE_DEFAULTS.request_ttl_s
DEFAULT_LEASE_MS: Final = _STORE_DEFAULTS.lease_ms
# The store clamps a request's life to end before its snapshot's lifecycle expiry: a
# longer setting would be silently cut short, so it is refused here instead.
MAX_REQUEST_TTL_S: Final = (
    _STORE_DEFAULTS.snapshot_lifecycle_days * DAY_S - _STORE_DEFAULTS.lifecycle_margin_s
)
# Unset: the deployment's own card page (its CloudFront URL) is the one origin allowed.
# "*" is safe to set too: the API authenticates with a bearer token in the Authorization
# header, never with cookies, so a foreign page gains nothing a direct client would not.
ANY_ORIGIN: Final = "*"
# An overdue request waits up to one interval for its timeout policy to settle it: the
# agent's turn ends, or the card moves to another role's queue, at most this late.
DEFAULT_SWEEP_EVERY_MINUTES: Final = 1
MAX_SWEEP_EVERY_MINUTES: Final = 60

# An SSM parameter name in this account and region: a plain name, or a hierarchy that
# starts with "/". Names only (no ARN, no wildcard), so each role reads exactly one.
_PARAMETER_NAME = re.compile(r"[A-Za-z0-9_.-]+|(/[A-Za-z0-9_.-]+)+")
# A Cognito domain prefix: lowercase letters, digits and inner hyphens, at most 63, and
# none of the words Cognito reserves.
_DOMAIN_PREFIX = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_RESERVED_IN_PREFIX: Final = ("aws", "amazon", "cognito")


# The model setting is read by the runtime's own parser, so both accept the same values.
ModelChoice = ModelSpec


@dataclass(frozen=True)
class AgentChoice:
    """The user's agent: its factory, and the code and requirements shipped with it.

    Attributes:
        reference: `package.module:factory`, as `INTERLOCK_AGENT` names it.
        package_dir: The top-level package the reference starts with; it ships as its
            own layer next to Interlock's.
        requirements: Pinned pip requirements of that package, bundled into its layer.
    """

    reference: str
    package_dir: Path
    requirements: Path

    @classmethod
    def from_context(cls, node: Node) -> AgentChoice:
        """Read the agent's three settings, checking they agree with each other.

        Raises:
            ValueError: a malformed reference, a missing directory or file, or a package
                directory that is not the reference's top-level package.
        """
        return cls.of(
            str(node.try_get_context(AGENT_KEY) or DEFAULT_AGENT),
            Path(str(node.try_get_context(AGENT_PACKAGE_KEY) or DEFAULT_AGENT_PACKAGE)),
            Path(str(node.try_get_context(AGENT_REQUIREMENTS_KEY) or DEFAULT_AGENT_REQUIREMENTS)),
        )

    @classmethod
    def of(cls, reference: str, package_dir: Path, requirements: Path) -> AgentChoice:
        """An agent given in code (a team's own app passes it to `build`), checked as
        the context's three settings are.

        Raises:
            ValueError: a malformed reference, a missing directory or file, or a package
                directory that is not the reference's top-level package.
        """
        if not _AGENT_REFERENCE.fullmatch(reference):
            raise ValueError(f"{AGENT_KEY} must be 'package.module:factory', not {reference!r}")
        if not (package_dir / "__init__.py").is_file():
            raise ValueError(f"{AGENT_PACKAGE_KEY}: {package_dir} is not a Python package")
        if package_dir.name != reference.split(".")[0].split(":")[0]:
            raise ValueError(
                f"{AGENT_PACKAGE_KEY} must be the package {reference!r} starts with, "
                f"not {package_dir.name!r}"
            )
        if not requirements.is_file():
            raise ValueError(f"{AGENT_REQUIREMENTS_KEY}: {requirements} is not a file")
        return cls(reference, package_dir.resolve(), requirements.resolve())


@dataclass(frozen=True)
class Settings:
    """What may differ between deployments of the same code.

    Attributes:
        model: The agent's model.
        request_ttl_s: How long an open request waits for its answer.
        lease_ms: How long a claim on a request lasts without a heartbeat.
        allowed_origin: The browser origin allowed to call the API (CORS), or None for
            the card page's own CloudFront URL.
        sweep_every_minutes: How often the sweeper looks for overdue requests.
        agent_config_parameter: The SSM parameter holding the per-agent configuration
            document, or None to run on the defaults and the environment alone.
        auth_domain_prefix: The prefix of the Cognito hosted sign-in domain, or None for
            one derived from the stack and the account (`infra.auth.domain_prefix`).
        agent: The user's agent and the code shipped with it.
        access_logs: The API's access logs. A REST API logs only through its account's
            API Gateway CloudWatch role, an account-wide setting: `off` (the default)
            touches nothing; `on` logs through the role the account already has;
            `create-role` has the stack create that role and set it for the whole
            account (kept after `cdk destroy`, since other APIs may log through it).
        stage: Names this deployment's stacks, so several share an account and region;
            empty for the default names.
        retain_data: Whether the table, buckets, user pool, log groups and KMS keys
            outlive the stacks (on by default for the unnamed and `prod` stages, off for
            any other stage).
        web_adapter_layer: The Lambda Web Adapter layer's ARN, or None for the published
            one of this region and architecture (`infra.functions`).
        channels: The chat platforms cards are posted to and answered from (each gets a
            secret for its tokens, which operators fill in).
        log_level: The functions' log level (their logs are JSON either way).
        architecture: The functions' architecture, `arm64` (Graviton: cheaper per
            GB-second) or `x86_64` (where the Web Adapter has no arm64 layer).
        tools: What the agent's own tools need (`infra.tools`), given in code.
        upgrade_step: While upgrading a table that lacks `infra.storage.UPGRADE_INDEXES`,
            how many of them this deploy of the storage stack has (one more each step:
            CloudFormation creates one index per update); None for all of them.
    """

    model: ModelChoice
    request_ttl_s: int
    lease_ms: int
    allowed_origin: str | None
    sweep_every_minutes: int
    agent_config_parameter: str | None
    auth_domain_prefix: str | None
    agent: AgentChoice
    access_logs: str = "off"
    stage: str = ""
    retain_data: bool = True
    web_adapter_layer: str | None = None
    channels: tuple[ChannelName, ...] = ()
    log_level: str = "INFO"
    architecture: str = "arm64"
    tools: ToolAccess = field(default_factory=ToolAccess)
    upgrade_step: int | None = None

    @classmethod
    def from_context(cls, node: Node) -> Settings:
        """The settings from `node`'s context, each falling back to its default.

        Raises:
            ValueError: a value that is present but unusable.
        """
        model = _model(node.try_get_context(MODEL_KEY))
        request_ttl_s = _positive(node, REQUEST_TTL_KEY, DEFAULT_REQUEST_TTL_S, MAX_REQUEST_TTL_S)
        lease_ms = _positive(node, LEASE_KEY, DEFAULT_LEASE_MS)
        # The runtime's own model holds the bounds: what it would refuse at cold start
        # fails the synth instead.
        _runtime_accepts(model=model.spec, request_ttl_s=request_ttl_s, lease_ms=lease_ms)
        return cls(
            model=model,
            request_ttl_s=request_ttl_s,
            lease_ms=lease_ms,
            allowed_origin=_origin(node.try_get_context(ALLOWED_ORIGIN_KEY)),
            sweep_every_minutes=_positive(
                node, SWEEP_EVERY_KEY, DEFAULT_SWEEP_EVERY_MINUTES, MAX_SWEEP_EVERY_MINUTES
            ),
            agent_config_parameter=_parameter(node.try_get_context(AGENT_CONFIG_KEY)),
            auth_domain_prefix=_domain_prefix(node.try_get_context(AUTH_DOMAIN_PREFIX_KEY)),
            agent=AgentChoice.from_context(node),
            access_logs=_access_logs(node),
            stage=(stage := _stage(node.try_get_context(STAGE_KEY))),
            retain_data=_removal(node.try_get_context(REMOVAL_POLICY_KEY), stage),
            web_adapter_layer=_layer_arn(node.try_get_context(WEB_ADAPTER_LAYER_KEY)),
            channels=_channels(node.try_get_context(CHANNELS_KEY)),
            log_level=_log_level(node.try_get_context(LOG_LEVEL_KEY)),
            architecture=_architecture(node.try_get_context(ARCHITECTURE_KEY)),
            upgrade_step=_upgrade_step(node),
        )

    def stack_id(self, part: str) -> str:
        """The id (and name) of one of this deployment's stacks: `Interlock<Stage><part>`."""
        return f"Interlock{self.stage.capitalize()}{part}"


_KEYS: Final = {"model": MODEL_KEY, "request_ttl_s": REQUEST_TTL_KEY, "lease_ms": LEASE_KEY}


def _model(raw: object) -> ModelSpec:
    try:
        return ModelSpec.parse(str(raw or DEFAULT_MODEL))
    except ValueError as exc:
        raise ValueError(f"{MODEL_KEY}: {exc}") from None


def _runtime_accepts(**values: object) -> None:
    try:
        InterlockConfig.model_validate(values)
    except ValidationError as exc:
        key, _, problem = validation_message(exc).partition(": ")
        raise ValueError(f"{_KEYS.get(key, key)}: {problem} (the runtime's bound)") from None


def _positive(node: Node, key: str, default: int, maximum: int | None = None) -> int:
    raw = node.try_get_context(key)
    if raw is None:
        return default
    try:
        value = int(str(raw))
    except ValueError:
        raise ValueError(f"{key} must be a whole number, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{key} must be positive, not {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{key} must be at most {maximum}, not {value}")
    return value


def _stage(raw: object) -> str:
    if raw is None or raw == "":
        return ""
    if not _STAGE.fullmatch(str(raw)):
        raise ValueError(
            f"{STAGE_KEY} must be 1-12 lowercase letters and digits, starting with a letter, "
            f"not {raw!r}"
        )
    return str(raw)


def _log_level(raw: object) -> str:
    if raw is None or raw == "":
        return "INFO"
    level = str(raw).upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"{LOG_LEVEL_KEY} must be one of {', '.join(LOG_LEVELS)}, not {raw!r}")
    return level


def _channels(raw: object) -> tuple[ChannelName, ...]:
    if raw is None or raw == "":
        return ()
    names = raw if isinstance(raw, list) else str(raw).split(",")
    chosen = [str(n).strip() for n in names if str(n).strip()]
    unknown = sorted(set(chosen) - set(CHANNELS))
    if unknown:
        raise ValueError(f"{CHANNELS_KEY}: unknown channels {unknown}; use {', '.join(CHANNELS)}")
    return tuple(c for c in CHANNELS if c in chosen)


def _removal(raw: object, stage: str) -> bool:
    if raw is None or raw == "":
        return stage in RETAINING_STAGES
    if str(raw).lower() in ("retain", "destroy"):
        return str(raw).lower() == "retain"
    raise ValueError(f"{REMOVAL_POLICY_KEY} must be retain or destroy, not {raw!r}")


def _layer_arn(raw: object) -> str | None:
    if raw is None or raw == "":
        return None
    if not _LAYER_ARN.fullmatch(str(raw)):
        raise ValueError(f"{WEB_ADAPTER_LAYER_KEY} must be a layer version ARN, not {raw!r}")
    return str(raw)


# Where each geographic inference profile may be called from, by region prefix. A
# profile is called in the stack's region; Bedrock refuses one of another geography.
_PROFILE_REGIONS: Final = {
    "us": ("us-east-", "us-west-"),
    "us-gov": ("us-gov-",),
    "ca": ("ca-",),
    "eu": ("eu-",),
    "apac": ("ap-",),
    "jp": ("ap-northeast-1", "ap-northeast-3"),
    "au": ("ap-southeast-2", "ap-southeast-4"),
}


def check_model_region(model: ModelSpec, region: str) -> None:
    """Refuse, at synth, a geographic inference profile the stack's region cannot call.

    `global.` profiles and plain model ids are left to Bedrock; so is a region that is
    not known at synth (an environment-agnostic stack).

    Raises:
        ValueError: the profile belongs to another geography.
    """
    geography = model.model_id.partition(".")[0]
    prefixes = _PROFILE_REGIONS.get(geography)
    if model.provider != "bedrock" or prefixes is None or not re.fullmatch(r"[a-z0-9-]+", region):
        return
    if geography == "us" and region.startswith("us-gov-"):
        prefixes = ()
    if not region.startswith(prefixes):
        raise ValueError(
            f"{MODEL_KEY}: {model.model_id} is a {geography!r} inference profile, which "
            f"{region} cannot call; use its own geography's profile or a global. one"
        )


def _access_logs(node: Node) -> str:
    if node.try_get_context(_RETIRED_ACCOUNT_ROLE_KEY) is not None:
        raise ValueError(
            f"{_RETIRED_ACCOUNT_ROLE_KEY} is replaced by {ACCESS_LOGS_KEY}: "
            "create-role (the old true), on (the account already has the role) or off"
        )
    raw = node.try_get_context(ACCESS_LOGS_KEY)
    if raw is None or raw == "":
        return "off"
    if raw not in ACCESS_LOGS:
        raise ValueError(f"{ACCESS_LOGS_KEY} must be one of {', '.join(ACCESS_LOGS)}, not {raw!r}")
    return str(raw)


def _architecture(raw: object) -> str:
    if raw is None or raw == "":
        return "arm64"
    if raw not in ("arm64", "x86_64"):
        raise ValueError(f"{ARCHITECTURE_KEY} must be arm64 or x86_64, not {raw!r}")
    return str(raw)


def _upgrade_step(node: Node) -> int | None:
    if node.try_get_context(UPGRADE_STEP_KEY) in (None, ""):
        return None
    # The last index needs no step of its own: a plain deploy adds it.
    return _positive(node, UPGRADE_STEP_KEY, 0, len(UPGRADE_INDEXES) - 1)


def _flag(node: Node, key: str, *, default: bool) -> bool:
    raw = node.try_get_context(key)
    if raw is None or raw == "":
        return default
    if str(raw).lower() in ("true", "false"):
        return str(raw).lower() == "true"
    raise ValueError(f"{key} must be true or false, not {raw!r}")


def _origin(raw: object) -> str | None:
    if raw is None or raw == "":
        return None
    origin = str(raw).rstrip("/")
    if origin != ANY_ORIGIN and not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:\d+)?", origin):
        raise ValueError(f"{ALLOWED_ORIGIN_KEY} must be '*' or scheme://host[:port], not {raw!r}")
    return origin


def _parameter(raw: object) -> str | None:
    # `-c interlock:agentConfigParameter=` (empty) reads as unset, like leaving it out.
    if raw is None or raw == "":
        return None
    name = str(raw)
    if not _PARAMETER_NAME.fullmatch(name):
        raise ValueError(
            f"{AGENT_CONFIG_KEY} must be an SSM parameter name (name or /path/name), not {raw!r}"
        )
    return name


def _domain_prefix(raw: object) -> str | None:
    if raw is None or raw == "":
        return None
    prefix = str(raw)
    if not _DOMAIN_PREFIX.fullmatch(prefix) or any(w in prefix for w in _RESERVED_IN_PREFIX):
        raise ValueError(
            f"{AUTH_DOMAIN_PREFIX_KEY} must be 1-63 lowercase letters, digits and inner "
            f"hyphens without {', '.join(_RESERVED_IN_PREFIX)}, not {raw!r}"
        )
    return prefix
