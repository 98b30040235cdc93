"""Deployment settings read from CDK context, with the defaults a first deploy needs.

Each can be set per deployment without editing code, for example
`npx cdk deploy -c interlock:leaseMs=60000`. Values given on the command line arrive as
strings and values in `cdk.json` as JSON, so both are accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from constructs import Node

from interlock.timing import DAY_S, StorePolicy

_STORE_DEFAULTS: Final = StorePolicy()

MODEL_KEY: Final = "interlock:model"
REQUEST_TTL_KEY: Final = "interlock:requestTtlSeconds"
LEASE_KEY: Final = "interlock:leaseMs"
ALLOWED_ORIGIN_KEY: Final = "interlock:allowedOrigin"
SWEEP_EVERY_KEY: Final = "interlock:sweepEveryMinutes"
AGENT_CONFIG_KEY: Final = "interlock:agentConfigParameter"
AUTH_DOMAIN_PREFIX_KEY: Final = "interlock:authDomainPrefix"

DEFAULT_MODEL_ID: Final = "us.anthropic.claude-sonnet-4-20250514-v1:0"
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

# A Bedrock model or system-defined inference profile id, as `interlock.runtime.agent`
# passes it to Bedrock: ids only, so the roles can be scoped to exactly one model.
_MODEL_ID = re.compile(r"[a-z0-9-]+(\.[A-Za-z0-9_-]+)+(:[A-Za-z0-9_.-]+)*")
# An SSM parameter name in this account and region: a plain name, or a hierarchy that
# starts with "/". Names only (no ARN, no wildcard), so each role reads exactly one.
_PARAMETER_NAME = re.compile(r"[A-Za-z0-9_.-]+|(/[A-Za-z0-9_.-]+)+")
# A Cognito domain prefix: lowercase letters, digits and inner hyphens, at most 63, and
# none of the words Cognito reserves.
_DOMAIN_PREFIX = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_RESERVED_IN_PREFIX: Final = ("aws", "amazon", "cognito")


@dataclass(frozen=True)
class ModelChoice:
    """The model the agent functions use, as `INTERLOCK_MODEL` names it.

    Attributes:
        provider: "bedrock", or "scripted" for the demo stand-in that calls no model.
        model_id: The Bedrock model or inference profile id; empty when scripted.
    """

    provider: str
    model_id: str

    @classmethod
    def parse(cls, spec: str) -> ModelChoice:
        """Read `scripted`, `bedrock` (the default id) or `bedrock:<model id>`.

        Raises:
            ValueError: an unknown provider or a model id Bedrock would not accept.
        """
        provider, _, model_id = spec.partition(":")
        if provider == "scripted" and not model_id:
            return cls("scripted", "")
        if provider != "bedrock":
            raise ValueError(f"{MODEL_KEY} must be 'scripted' or 'bedrock[:id]', not {spec!r}")
        model_id = model_id or DEFAULT_MODEL_ID
        if not _MODEL_ID.fullmatch(model_id):
            raise ValueError(f"{MODEL_KEY}: {model_id!r} is not a Bedrock model id")
        return cls("bedrock", model_id)

    @property
    def spec(self) -> str:
        """The value of `INTERLOCK_MODEL`."""
        return f"{self.provider}:{self.model_id}" if self.model_id else self.provider


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
    """

    model: ModelChoice
    request_ttl_s: int
    lease_ms: int
    allowed_origin: str | None
    sweep_every_minutes: int
    agent_config_parameter: str | None
    auth_domain_prefix: str | None

    @classmethod
    def from_context(cls, node: Node) -> Settings:
        """The settings from `node`'s context, each falling back to its default.

        Raises:
            ValueError: a value that is present but unusable.
        """
        return cls(
            model=ModelChoice.parse(str(node.try_get_context(MODEL_KEY) or DEFAULT_MODEL)),
            request_ttl_s=_positive(
                node, REQUEST_TTL_KEY, DEFAULT_REQUEST_TTL_S, MAX_REQUEST_TTL_S
            ),
            lease_ms=_positive(node, LEASE_KEY, DEFAULT_LEASE_MS),
            allowed_origin=_origin(node.try_get_context(ALLOWED_ORIGIN_KEY)),
            sweep_every_minutes=_positive(
                node, SWEEP_EVERY_KEY, DEFAULT_SWEEP_EVERY_MINUTES, MAX_SWEEP_EVERY_MINUTES
            ),
            agent_config_parameter=_parameter(node.try_get_context(AGENT_CONFIG_KEY)),
            auth_domain_prefix=_domain_prefix(node.try_get_context(AUTH_DOMAIN_PREFIX_KEY)),
        )


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
