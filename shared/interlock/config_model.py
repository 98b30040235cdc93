"""The validated configuration: `InterlockConfig`, its policies, and `assemble`.

Imported through `interlock.config`, which loads this module, and pydantic with it, only
when one of these names is first read there: a module that needs only `Env` or
`ModelSpec` leaves pydantic unloaded.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from interlock.config import (
    DEFAULT_MODEL_ID,
    KNOWN_TOOLS,
    MAX_MODEL_CALLS,
    Env,
    Kind,
    ModelSpec,
    Risk,
)
from interlock.errors import InvalidInput, validation_message
from interlock.timing import LEASE_MS, REQUEST_TTL_S, StorePolicy

_TOOL: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
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
    # The arguments a person may change before approving; none unless named. `risk`
    # never: an edit cannot lower the floor a call declared.
    editable: tuple[str, ...] = Field(default=(), max_length=20)

    @field_validator("editable")
    @classmethod
    def _not_risk(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        if "risk" in names:
            raise ValueError("risk cannot be editable: it sets the floor")
        return names


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
                risk="low",
                impact="A message leaves this chat for the named recipient.",
                editable=("recipient",),
            )
        }
    )
    sample_rate: float = Field(default=0.5, ge=0.0, le=1.0)
    timeouts: dict[Kind, TimeoutPolicy] = Field(default_factory=lambda: dict(_TIMEOUTS))
    request_ttl_s: int = Field(default=REQUEST_TTL_S, ge=60, le=7 * 86_400)
    lease_ms: int = Field(default=LEASE_MS, ge=2_000, le=300_000)
    max_model_calls: int = Field(default=MAX_MODEL_CALLS, ge=1, le=50)
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
    def _tool_names(self) -> InterlockConfig:
        # Any agent's own tools may be named (its factory reads these settings), so a
        # name is checked for its shape only: what Strands accepts as a tool's name.
        malformed = [n for n in (*self.tools, *self.tool_policies) if not _TOOL.fullmatch(n)]
        if malformed:
            raise ValueError(f"not tool names: {sorted(malformed)}")
        # A policy for a tool neither built in nor enabled is a typo that would leave the
        # real tool ungated (a tool without a rule is never asked about): refused.
        stray = sorted(set(self.tool_policies) - set(self.tools) - KNOWN_TOOLS)
        if stray:
            raise ValueError(f"policies for tools not in `tools`: {stray}")
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
        said = f"configuration {validation_message(exc)}"
        raise InvalidInput(said + _from_variable(exc, env, agent or {})) from None


def _from_variable(exc: ValidationError, env: Mapping[str, str], agent: Mapping[str, Any]) -> str:
    """Where the refused value came from, when an environment variable set it (the
    per-agent document overrides the environment): its name and value."""
    field = str(next(iter(exc.errors()[0].get("loc", ())), ""))
    variable = next((v for v, f in _ENV.items() if f == field), None)
    if variable is None or variable not in env or field in agent:
        return ""
    return f" (from {variable}={env[variable]!r})"


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
