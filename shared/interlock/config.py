"""The one source of settings: defaults → environment → per-agent → validated → frozen.

`InterlockConfig` is the validated model that local mode, the Lambda handlers and the
CDK app all read (the app validates a deployment's context with it, so a value the
runtime would refuse at cold start fails `cdk synth` instead). `Env` names every
`INTERLOCK_*` variable, and `ModelSpec` is the one parser of a model setting.

The result is immutable and carries a version (a digest of its canonical form) that is
recorded on every audit event, so any decision can be traced to the exact settings it
ran under. Secrets never belong here: a value under a secret-looking key is refused.

The validated model (`InterlockConfig`, `ToolPolicy`, `TimeoutPolicy`, `assemble`)
lives in `interlock.config_model` and is loaded, pydantic with it, when one of those
names is first read from here. The names and plain settings below need no pydantic, so
a module that needs only them (`Env`, `ModelSpec`) does not make its function's import
load pydantic.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

if TYPE_CHECKING:
    from interlock.config_model import InterlockConfig as InterlockConfig
    from interlock.config_model import TimeoutPolicy as TimeoutPolicy
    from interlock.config_model import ToolPolicy as ToolPolicy
    from interlock.config_model import assemble as assemble


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
    BEDROCK_URL: Final = "INTERLOCK_BEDROCK_URL"  # local mode: a local Bedrock Runtime
    HEARTBEAT_S: Final = "INTERLOCK_HEARTBEAT_S"
    # The OpenAI-compatible provider's key: given directly, or the name of a Secrets
    # Manager secret holding it (plain text).
    OPENAI_API_KEY: Final = "INTERLOCK_OPENAI_API_KEY"
    OPENAI_KEY_SECRET: Final = "INTERLOCK_OPENAI_KEY_SECRET"
    # Who answers: the user pool whose ID tokens the resume function verifies itself,
    # and the KMS key that signs the channels function's hand-overs of chat taps.
    USER_POOL_ID: Final = "INTERLOCK_USER_POOL_ID"
    USER_POOL_CLIENT_IDS: Final = "INTERLOCK_USER_POOL_CLIENT_IDS"
    HAND_OVER_KEY: Final = "INTERLOCK_HAND_OVER_KEY"


# A global cross-region inference profile: callable from any commercial region that
# offers it, so the default fits wherever a stack is deployed.
DEFAULT_MODEL_ID: Final = "global.anthropic.claude-sonnet-4-5-20250929-v1:0"
# Model calls one turn or resume may make, replayed ones included.
MAX_MODEL_CALLS: Final = 12
# The demo analyst: served locally and deployed unless another agent is named.
DEFAULT_AGENT: Final = "examples.analyst:build"
# A Bedrock model or system-defined inference profile id: ids only, so the deployed
# roles can be scoped to exactly one model.
_PACE: Final = re.compile(r"(\d{1,5})/(\d{1,5})")
_MODEL_ID: Final = re.compile(r"[a-z0-9-]+(\.[A-Za-z0-9_-]+)+(:[A-Za-z0-9_.-]+)*")
# An OpenAI-compatible endpoint's base URL and the model it serves (vLLM, Ollama and
# hosted services name models with slashes, colons and dots).
_BASE_URL: Final = re.compile(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~/-]*)?")
_OPENAI_MODEL: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}")
_URL: Final = re.compile(r"https?://[^\s/?#]+(/[^\s]*)?")
# The stand-ins for machines with no LLM: one plays an agent's script, one calls its tools.
StandIn = Literal["scripted", "tools"]
_STAND_INS: Final = get_args(StandIn)


@dataclass(frozen=True)
class ModelSpec:
    """A model setting: `scripted[:<think ms>/<chunk ms>]` (the stand-in that plays an
    agent's script where no LLM is reachable, optionally paced like a slow model),
    `tools[:<think ms>/<chunk ms>]` (the stand-in that calls the agent's own tools as the
    person's message names them), `bedrock[:<model id>]`, or `openai:<base url>#<model>`
    (any OpenAI-compatible chat completions endpoint).

    Attributes:
        provider: "scripted", "tools", "bedrock" or "openai".
        model_id: The Bedrock model or inference profile id, or the OpenAI-compatible
            endpoint's model name; empty for a stand-in.
        pace_ms: For a stand-in: a silence before each answer, and a pause between the
            words it streams (0, 0 answers at once).
        base_url: The OpenAI-compatible endpoint (e.g. `http://127.0.0.1:8000/v1`).
    """

    provider: Literal["scripted", "tools", "bedrock", "openai"]
    model_id: str
    pace_ms: tuple[int, int] = (0, 0)
    base_url: str = ""

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        """Read a model setting.

        Raises:
            ValueError: an unknown provider, a malformed pace, or a model id Bedrock
                would not accept.
        """
        provider, separator, model_id = spec.partition(":")
        if provider in _STAND_INS:
            stand_in: StandIn = "tools" if provider == "tools" else "scripted"
            if not model_id:
                return cls(stand_in, "")
            pace = _PACE.fullmatch(model_id)
            if pace is None:
                raise ValueError(
                    f"a {stand_in} model's pace is '<think ms>/<chunk ms>', not {spec!r}"
                )
            return cls(stand_in, "", (int(pace[1]), int(pace[2])))
        if provider == "openai":
            return cls._openai(model_id)
        if provider != "bedrock":
            raise ValueError(
                "the model must be 'scripted', 'tools', 'bedrock[:id]' or "
                f"'openai:<base url>#<model>', not {spec!r}"
            )
        if separator and not model_id:
            raise ValueError("name a model after 'bedrock:', or write 'bedrock' for the default")
        model_id = model_id or DEFAULT_MODEL_ID
        if not _MODEL_ID.fullmatch(model_id):
            raise ValueError(f"{model_id!r} is not a Bedrock model id")
        return cls("bedrock", model_id)

    @classmethod
    def _openai(cls, rest: str) -> ModelSpec:
        base_url, separator, model = rest.rpartition("#")
        if not separator or not _BASE_URL.fullmatch(base_url):
            raise ValueError(
                "an OpenAI-compatible model is 'openai:<http(s) base url>#<model>', "
                f"not 'openai:{rest}'"
            )
        if not _OPENAI_MODEL.fullmatch(model):
            raise ValueError(f"{model!r} is not a model name")
        return cls("openai", model, base_url=base_url)

    @property
    def spec(self) -> str:
        """The setting as text (the value of `INTERLOCK_MODEL`)."""
        if self.provider in _STAND_INS:
            return (
                "{}:{}/{}".format(self.provider, *self.pace_ms)
                if any(self.pace_ms)
                else self.provider
            )
        if self.provider == "openai":
            return f"openai:{self.base_url}#{self.model_id}"
        return f"{self.provider}:{self.model_id}"


# The streaming functions a process may be, and the fetch transports it may use.
StreamFunction = Literal["run", "resume"]
Fetch = Literal["http", "demo"]
_FUNCTIONS: Final = get_args(StreamFunction)
_FETCHES: Final = get_args(Fetch)


@dataclass(frozen=True)
class Deployment:
    """Where a deployment's parts are and how they are reached: every `INTERLOCK_*`
    variable that is not a behaviour setting (those are `InterlockConfig`'s), read and
    checked in one place, each default written here once.

    Plain Python on purpose: the requests handler reads its CORS origin at import, and
    the channels function its secrets' names before it acknowledges a tap, neither of
    which may load pydantic (`tests/unit/test_snapstart_hooks.py`). Each field is the
    variable `INTERLOCK_<FIELD>`; an empty value counts as unset.

    Attributes:
        table, bucket: The store's DynamoDB table and S3 bucket.
        agent: The agent factory (`module:function`) served.
        agent_config_file, agent_config_param: The per-agent settings document, as a
            local JSON file or the SSM parameter holding it.
        fetch: `http` (the real transport) or `demo` (a stand-in page, for machines
            with no network).
        allowed_origin: The card page's origin, for CORS (same-origin when empty).
        function: Which streaming function this process is (`run` or `resume`); both
            when unset, as locally.
        resume_function: The resume function that screened taps are handed to.
        settle_queue_url: The queue the expiry finder fans overdue requests out on.
        slack_secret, telegram_secret: The Secrets Manager secrets of the channels (a
            channel is on when its secret is named).
        slack_api_url, telegram_api_url: The channels' Web APIs (a local fake in tests).
        page_url: The card page, linked from channel posts.
        bedrock_url: Local mode only: a local Bedrock Runtime endpoint.
        heartbeat_s: Seconds of silence after which a stream sends a heartbeat: well
            inside the idle timeouts of API Gateway (5 minutes), CloudFront and proxies.
        openai_api_key, openai_key_secret: The OpenAI-compatible endpoint's key, given
            directly or as the name of the Secrets Manager secret holding it.
        dev_key: Local mode only: the signing key of development tokens (hex).
        user_pool_id, user_pool_client_ids: The Cognito user pool whose ID tokens the
            resume function verifies itself, and its app clients (comma-separated) an
            ID token must be issued to (`interlock.api.identity`).
        hand_over_key: The KMS HMAC key a tap handed to the resume function is signed
            with (`interlock.adapters.handover`).
    """

    table: str | None = None
    bucket: str | None = None
    agent: str = DEFAULT_AGENT
    agent_config_file: str | None = None
    agent_config_param: str | None = None
    fetch: Fetch = "http"
    allowed_origin: str = ""
    function: StreamFunction | None = None
    resume_function: str | None = None
    settle_queue_url: str | None = None
    slack_secret: str | None = None
    telegram_secret: str | None = None
    slack_api_url: str = "https://slack.com/api"
    telegram_api_url: str = "https://api.telegram.org"
    page_url: str | None = None
    bedrock_url: str | None = None
    heartbeat_s: float = 10.0
    openai_api_key: str | None = field(default=None, repr=False)
    openai_key_secret: str | None = None
    dev_key: str | None = field(default=None, repr=False)
    user_pool_id: str | None = None
    user_pool_client_ids: str | None = None
    hand_over_key: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Deployment:
        """Read every variable of `env` this names (the others are left alone).

        Raises:
            ValueError: a value of the wrong shape, naming its variable.
        """
        given = {f.name: env.get(variable(f.name)) or None for f in fields(cls)}
        values: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        if values.get("fetch", "http") not in _FETCHES:
            raise ValueError(
                f"{Env.FETCH} must be one of {list(_FETCHES)}, not {values['fetch']!r}"
            )
        if values.get("function", "run") not in _FUNCTIONS:
            raise ValueError(
                f"{Env.FUNCTION} must be one of {list(_FUNCTIONS)}, not {values['function']!r}"
            )
        for name in ("slack_api_url", "telegram_api_url", "page_url", "bedrock_url"):
            if name in values and not _URL.fullmatch(values[name]):
                raise ValueError(f"{variable(name)} must be an http(s) URL, not {values[name]!r}")
        if "heartbeat_s" in values:
            values["heartbeat_s"] = _seconds(Env.HEARTBEAT_S, values["heartbeat_s"])
        return cls(**values)

    def required(self, *names: str) -> tuple[str, ...]:
        """The values of settings this process cannot run without, in order.

        Raises:
            ValueError: one of them is unset, naming its variable.
        """
        missing = [variable(n) for n in names if not getattr(self, n)]
        if missing:
            raise ValueError(f"{', '.join(missing)} must be set")
        return tuple(getattr(self, n) for n in names)


def variable(setting: str) -> str:
    """The environment variable of a setting (`heartbeat_s` → `INTERLOCK_HEARTBEAT_S`)."""
    return f"INTERLOCK_{setting.upper()}"


# Read by the CDK app when it bundles the layer (`infra.bundling`), not by the runtime.
BUILD_VARIABLES: Final = frozenset({"INTERLOCK_LAYER_PYTHON"})
_PREFIX: Final = "INTERLOCK_"


def known_variables() -> frozenset[str]:
    """Every `INTERLOCK_*` variable some part of Interlock reads."""
    return frozenset(v for k, v in vars(Env).items() if k.isupper()) | BUILD_VARIABLES


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """A line for each `INTERLOCK_*` variable of `env` that nothing reads, naming the
    closest known one: a misspelt setting is otherwise silently left at its default."""
    import difflib  # only where settings are checked, not on a function's cold start

    known = sorted(known_variables())
    suffixes = {name.removeprefix(_PREFIX): name for name in known}
    lines = []
    for name in sorted(n for n in env if n.startswith(_PREFIX) and n not in known):
        # Compared without the prefix every name shares, which would make all look alike.
        close = difflib.get_close_matches(name.removeprefix(_PREFIX), list(suffixes), n=1)
        hint = f"; did you mean {suffixes[close[0]]}?" if close else ""
        lines.append(f"{name} is not a setting Interlock reads{hint}")
    return lines


def deployment() -> Deployment:
    """This process's deployment settings, read from its environment now."""
    return Deployment.from_env(os.environ)


def _seconds(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not 0 < value <= 240:
        raise ValueError(f"{name} must be above 0 and at most 240 seconds, not {raw!r}")
    return value


KNOWN_TOOLS: Final = frozenset(
    {"request_approval", "fetch_url", "send_report", "ask_user", "request_info"}
)
Risk = Literal["low", "medium", "high"]
Kind = Literal["approval", "question", "info"]
_VALIDATED: Final = frozenset({"InterlockConfig", "ToolPolicy", "TimeoutPolicy", "assemble"})


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """The validated model's names, loaded on first use (see the module's docstring)."""
        if name not in _VALIDATED:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from interlock import config_model

        value = getattr(config_model, name)
        globals()[name] = value
        return value
