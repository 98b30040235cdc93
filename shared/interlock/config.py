"""The one source of settings: defaults → environment → per-agent → validated → frozen.

`InterlockConfig` is the validated model that local mode, the Lambda handlers and the
CDK app all read (the app validates a deployment's context with it, so a value the
runtime would refuse at cold start fails `cdk synth` instead). `Env` names every
`INTERLOCK_*` variable, and `ModelSpec` is the one parser of a model setting.

The result is immutable and carries a version (a digest of its canonical form) that is
recorded on every audit event, so any decision can be traced to the exact settings it
ran under. Secrets never belong here: a value under a secret-looking key is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from interlock.errors import InvalidInput, validation_message
from interlock.timing import StorePolicy


class Env:
    """The names of every `INTERLOCK_*` environment variable Interlock reads."""

    TABLE: Final = "INTERLOCK_TABLE"
    BUCKET: Final = "INTERLOCK_BUCKET"
    AGENT: Final = "INTERLOCK_AGENT"
    MODEL: Final = "INTERLOCK_MODEL"
    REQUEST_TTL_S: Final = "INTERLOCK_REQUEST_TTL_S"
    LEASE_MS: Final = "INTERLOCK_LEASE_MS"
    MAX_MODEL_CALLS: Final = "INTERLOCK_MAX_MODEL_CALLS"
    SAMPLE_RATE: Final = "INTERLOCK_SAMPLE_RATE"
    AGENT_CONFIG_FILE: Final = "INTERLOCK_AGENT_CONFIG_FILE"
    AGENT_CONFIG_PARAM: Final = "INTERLOCK_AGENT_CONFIG_PARAM"
    FETCH: Final = "INTERLOCK_FETCH"
    ALLOWED_ORIGIN: Final = "INTERLOCK_ALLOWED_ORIGIN"
    DEV_KEY: Final = "INTERLOCK_DEV_KEY"
    RESUME_FUNCTION: Final = "INTERLOCK_RESUME_FUNCTION"
    FUNCTION: Final = "INTERLOCK_FUNCTION"
    # The queue the expiry finder puts overdue requests on, one message each.
    SETTLE_QUEUE_URL: Final = "INTERLOCK_SETTLE_QUEUE_URL"
    # Channels: each is on when its secret is named (Secrets Manager, JSON).
    SLACK_SECRET: Final = "INTERLOCK_SLACK_SECRET"
    TELEGRAM_SECRET: Final = "INTERLOCK_TELEGRAM_SECRET"
    SLACK_API_URL: Final = "INTERLOCK_SLACK_API_URL"
    TELEGRAM_API_URL: Final = "INTERLOCK_TELEGRAM_API_URL"
    PAGE_URL: Final = "INTERLOCK_PAGE_URL"
    HEARTBEAT_S: Final = "INTERLOCK_HEARTBEAT_S"


# A global cross-region inference profile: callable from any commercial region that
# offers it, so the default fits wherever a stack is deployed.
DEFAULT_MODEL_ID: Final = "global.anthropic.claude-sonnet-4-5-20250929-v1:0"
# The demo analyst: served locally and deployed unless another agent is named.
DEFAULT_AGENT: Final = "examples.analyst:build"
# A Bedrock model or system-defined inference profile id: ids only, so the deployed
# roles can be scoped to exactly one model.
_PACE: Final = re.compile(r"(\d{1,5})/(\d{1,5})")
_MODEL_ID: Final = re.compile(r"[a-z0-9-]+(\.[A-Za-z0-9_-]+)+(:[A-Za-z0-9_.-]+)*")


@dataclass(frozen=True)
class ModelSpec:
    """A model setting: `scripted[:<think ms>/<chunk ms>]` (the stand-in where no LLM is
    reachable, optionally paced like a slow model) or `bedrock[:<model id>]`.

    Attributes:
        provider: "scripted" or "bedrock".
        model_id: The Bedrock model or inference profile id; empty when scripted.
        pace_ms: For the scripted model: a silence before each answer, and a pause
            between the words it streams (0, 0 answers at once).
    """

    provider: Literal["scripted", "bedrock"]
    model_id: str
    pace_ms: tuple[int, int] = (0, 0)

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        """Read a model setting.

        Raises:
            ValueError: an unknown provider, a malformed pace, or a model id Bedrock
                would not accept.
        """
        provider, _, model_id = spec.partition(":")
        if provider == "scripted":
            if not model_id:
                return cls("scripted", "")
            pace = _PACE.fullmatch(model_id)
            if pace is None:
                raise ValueError(
                    f"a scripted model's pace is '<think ms>/<chunk ms>', not {spec!r}"
                )
            return cls("scripted", "", (int(pace[1]), int(pace[2])))
        if provider != "bedrock":
            raise ValueError(f"the model must be 'scripted' or 'bedrock[:id]', not {spec!r}")
        model_id = model_id or DEFAULT_MODEL_ID
        if not _MODEL_ID.fullmatch(model_id):
            raise ValueError(f"{model_id!r} is not a Bedrock model id")
        return cls("bedrock", model_id)

    @property
    def spec(self) -> str:
        """The setting as text (the value of `INTERLOCK_MODEL`)."""
        if self.provider == "scripted":
            return "scripted:{}/{}".format(*self.pace_ms) if any(self.pace_ms) else "scripted"
        return f"{self.provider}:{self.model_id}"


KNOWN_TOOLS: Final = frozenset(
    {"request_approval", "fetch_url", "send_report", "ask_user", "request_info"}
)
Risk = Literal["low", "medium", "high"]
Kind = Literal["approval", "question", "info"]
_SECRET_KEY: Final = re.compile(r"secret|password|passwd|token|api_?key|credential", re.I)
_ENV: Final = {
    Env.MODEL: "model",
    Env.REQUEST_TTL_S: "request_ttl_s",
    Env.LEASE_MS: "lease_ms",
    Env.MAX_MODEL_CALLS: "max_model_calls",
    Env.SAMPLE_RATE: "sample_rate",
}


class ToolPolicy(BaseModel):
    """How a tool with outside effects is admitted.

    `risk` is a floor: a call may declare a higher risk in its input, never a lower one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    risk: Risk = "high"
    impact: str = Field(default="An action outside this chat.", max_length=300)


class TimeoutPolicy(BaseModel):
    """What happens to an unanswered request of one kind when it expires."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["deny", "default", "reroute"] = "deny"
    reroute_role: str | None = None
    reroute_extra_s: int = Field(default=3600, ge=60, le=86_400)

    @model_validator(mode="after")
    def _role_for_reroute(self) -> TimeoutPolicy:
        if (self.action == "reroute") != (self.reroute_role is not None):
            raise ValueError("reroute needs reroute_role, and only reroute takes one")
        return self


_TIMEOUTS: Final[dict[Kind, TimeoutPolicy]] = {
    "approval": TimeoutPolicy(action="deny"),
    "question": TimeoutPolicy(action="default"),
    "info": TimeoutPolicy(action="deny"),
}


class InterlockConfig(BaseModel):
    """The frozen configuration of one agent deployment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = f"bedrock:{DEFAULT_MODEL_ID}"
    tools: tuple[str, ...] = tuple(sorted(KNOWN_TOOLS))
    tool_policies: dict[str, ToolPolicy] = Field(
        default_factory=lambda: {
            "send_report": ToolPolicy(
                risk="low", impact="A message leaves this chat for the named recipient."
            )
        }
    )
    sample_rate: float = Field(default=0.5, ge=0.0, le=1.0)
    timeouts: dict[Kind, TimeoutPolicy] = Field(default_factory=lambda: dict(_TIMEOUTS))
    request_ttl_s: int = Field(default=86_400, ge=60, le=7 * 86_400)
    lease_ms: int = Field(default=30_000, ge=2_000, le=300_000)
    max_model_calls: int = Field(default=12, ge=1, le=50)
    max_open_requests: int = Field(default=20, ge=1, le=1000)
    asks_per_minute: int = Field(default=10, ge=1, le=1000)

    @field_validator("model")
    @classmethod
    def _model_spec(cls, value: str) -> str:
        return ModelSpec.parse(value).spec

    @property
    def model_spec(self) -> ModelSpec:
        """The model setting, parsed."""
        return ModelSpec.parse(self.model)

    def store_policy(self) -> StorePolicy:
        """The store's durations, as this deployment sets them."""
        return StorePolicy(request_ttl_s=self.request_ttl_s, lease_ms=self.lease_ms)

    @model_validator(mode="after")
    def _allowlisted(self) -> InterlockConfig:
        unknown = (set(self.tools) | set(self.tool_policies)) - KNOWN_TOOLS
        if unknown:
            raise ValueError(f"tools not on the allowlist: {sorted(unknown)}")
        return self

    @property
    def version(self) -> str:
        """A short digest of the canonical configuration."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(canonical).hexdigest()[:12]


def assemble(env: Mapping[str, str], agent: Mapping[str, Any] | None = None) -> InterlockConfig:
    """Merge defaults, the environment and a per-agent document, then validate and freeze.

    Raises:
        InvalidInput: a value is out of bounds, a tool is not allowlisted, or a secret
            was put in plain configuration.
    """
    merged: dict[str, Any] = InterlockConfig().model_dump(mode="json")
    for variable, field in _ENV.items():
        if variable in env:
            merged[field] = env[variable]
    _refuse_secrets(agent or {})
    merged = _deep_merge(merged, dict(agent or {}))
    try:
        return InterlockConfig.model_validate(merged)
    except ValidationError as exc:
        raise InvalidInput(f"configuration {validation_message(exc)}") from None


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _refuse_secrets(document: Mapping[str, Any], path: str = "") -> None:
    for key, value in document.items():
        where = f"{path}.{key}" if path else str(key)
        if isinstance(value, Mapping):
            _refuse_secrets(value, where)
        elif _SECRET_KEY.search(str(key)) and value not in (None, ""):
            raise InvalidInput(
                f"configuration {where}: secrets must be injected securely, not configured"
            )
