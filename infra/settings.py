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
# Any origin: the API authenticates with a bearer token in the Authorization header, never
# with cookies, so a foreign page gains nothing a direct HTTP client would not have.
DEFAULT_ALLOWED_ORIGIN: Final = "*"

# A Bedrock model or system-defined inference profile id, as `interlock.runtime.agent`
# passes it to Bedrock: ids only, so the roles can be scoped to exactly one model.
_MODEL_ID = re.compile(r"[a-z0-9-]+(\.[A-Za-z0-9_-]+)+(:[A-Za-z0-9_.-]+)*")


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
        allowed_origin: The browser origin allowed to call the API (CORS).
    """

    model: ModelChoice
    request_ttl_s: int
    lease_ms: int
    allowed_origin: str

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


def _origin(raw: object) -> str:
    if raw is None:
        return DEFAULT_ALLOWED_ORIGIN
    origin = str(raw).rstrip("/")
    if origin != "*" and not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:\d+)?", origin):
        raise ValueError(f"{ALLOWED_ORIGIN_KEY} must be '*' or scheme://host[:port], not {raw!r}")
    return origin
