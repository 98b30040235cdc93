"""Building the agent: the user's factory, wrapped in what Interlock must own.

The same code builds the agent that pauses and the one that resumes it in another
process; only the snapshot carries state between them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from strands import Agent
from strands.models.model import Model
from strands.tools.executors import SequentialToolExecutor

from interlock import errors
from interlock.agent import AgentFactory, AgentInputs, AgentSpec
from interlock.config import ModelSpec
from interlock.harness.hooks import (
    ConfirmedCalls,
    ModelCallLimit,
    RunMeter,
    UnavailableTools,
    argument_schemas,
)
from interlock.harness.journal import Journal, JournaledModel, JournalHook, StopOnStoreFailure
from interlock.harness.model import Scenario, ScriptedModel, ToolsModel
from interlock.harness.progress import ProgressRelay
from interlock.harness.scrub import UrlScrubbedModel, failure_secrets, scrub_failure
from interlock.scrubbing import scrub_error

if TYPE_CHECKING:
    from interlock.caller import Caller
    from interlock.deps import Runtime

logger = logging.getLogger(__name__)


def inputs_for(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    history: list[Any] | None = None,
) -> AgentInputs:
    """What the user's factory is given for this caller's run in `chat_id`."""

    def read_history() -> list[Any]:
        if history is not None:
            return [dict(m) for m in history]
        from interlock.transcript import history as stored

        return stored(rt.stores, chat_id)

    def model(scripted: Sequence[Scenario]) -> Model:
        spec = rt.config.model_spec
        if scripted and spec.provider == "scripted":
            return ScriptedModel(scripted, spec.pace_ms)
        return rt.model_factory()

    return AgentInputs(
        user_id=caller.user_id,
        roles=caller.roles,
        chat_id=chat_id,
        can_ask_a_human=caller.can_ask_a_human,
        max_model_calls=rt.limits.max_model_calls,
        settings=rt.config,
        _history=read_history,
        _model=model,
    )


def tool_names(spec: AgentSpec) -> set[str]:
    """The names of the tools a spec gives its agent."""
    names = set()
    for item in spec.tools:
        name = getattr(item, "tool_name", None) or getattr(item, "__name__", None)
        if isinstance(name, str):
            names.add(name)
    return names


def lost_tools(
    factory: AgentFactory,
    inputs: AgentInputs,
    batch: Sequence[str],
    roles_then: frozenset[str],
) -> list[str]:
    """Tools of a paused batch the user could use when it paused and may not use now.

    Both sets come from the user's own factory, given the roles of then and of now. A
    tool the user never had was refused before any card was offered (it was never in
    their agent), so losing it is not a reason to expire the request. The factory
    builds the same agent for the same inputs, so unchanged roles lose nothing: the
    common resume builds nothing here.
    """
    if inputs.roles == roles_then:
        return []
    permitted = tool_names(factory(inputs))
    had = tool_names(factory(replace(inputs, roles=roles_then)))
    return sorted(name for name in batch if name in had and name not in permitted)


@dataclass(frozen=True)
class ModelConfig:
    """Which model the agent uses, and where.

    Attributes:
        spec: The model setting (`interlock.config.ModelSpec`).
        region: The Bedrock region; None uses the SDK's default chain.
        api_key: Reads the OpenAI-compatible endpoint's key when a model is built (so a
            rotated secret is picked up); None or an empty key sends none (a local vLLM
            or Ollama needs none).
    """

    spec: ModelSpec
    region: str | None = None
    api_key: Callable[[], str | None] | None = field(default=None, repr=False)

    @property
    def provider(self) -> str:
        return self.spec.provider

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ModelConfig:
        """The model the settings name (`INTERLOCK_MODEL`, through the validated
        configuration and its one default), in `AWS_REGION`.

        Raises:
            InvalidInput: the model setting is malformed.
        """
        from interlock.config import assemble

        return cls(assemble(env).model_spec, env.get("AWS_REGION"))


def build_model(config: ModelConfig, scripted: Sequence[Scenario] = ()) -> Model:
    """The configured model; Bedrock is imported only when chosen."""
    if config.provider == "scripted":
        if not scripted:
            raise ValueError(
                "INTERLOCK_MODEL=scripted needs an agent that ships a scripted stand-in; "
                "set INTERLOCK_MODEL=tools to call this agent's own tools as a message "
                "names them, or INTERLOCK_MODEL=bedrock:<model id>"
            )
        return ScriptedModel(scripted, config.spec.pace_ms)
    if config.provider == "tools":
        return ToolsModel(config.spec.pace_ms)
    if config.provider == "openai":
        from strands.models.openai import OpenAIModel

        key = config.api_key() if config.api_key else None
        # The SDK wants a key; an endpoint that checks none takes any.
        client_args = {"base_url": config.spec.base_url, "api_key": key or "none", "max_retries": 2}
        return OpenAIModel(client_args=client_args, model_id=config.model_id)
    from strands.models.bedrock import BedrockModel

    return BedrockModel(model_id=config.model_id, region_name=config.region)


@dataclass
class BuiltAgent:
    """An agent and the hooks whose outcome the caller reads after a run."""

    agent: Agent
    limit: ModelCallLimit
    meter: RunMeter
    tools: list[str]
    journal: Journal | None = None
    confirm_names: frozenset[str] = frozenset()
    # Per tool, the JSON Schema of each argument a confirm card lets a person change.
    editable: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def replayed_model_calls(self) -> int:
        """Model calls answered from the journal instead of the model."""
        return self.journal.replayed_model_calls if self.journal else 0


def build_agent(
    rt: Runtime,
    caller: Caller,
    chat_id: str,
    *,
    history: list[Any] | None = None,
    journal: Journal | None = None,
    progress: ProgressRelay | None = None,
) -> BuiltAgent:
    """The deployment's agent for this caller, with everything Interlock owns.

    With `journal` (a resumed run), recorded steps are replayed and new ones recorded;
    with `progress`, the run reports as it goes.
    """
    spec = rt.agent(inputs_for(rt, caller, chat_id, history))
    return compose(
        spec,
        model=spec.model or rt.model_factory(),
        messages=history,
        max_model_calls=rt.limits.max_model_calls,
        journal=journal,
        progress=progress,
    )


def model_failure(failure: BaseException) -> errors.ModelFailed | None:
    """`failure` as a clear run error when the model caused it (Strands' throttling and
    context errors, the model service's own refusal, or a model that could not be
    reached or signed for: no connection, no credentials), naming what the model or the
    SDK said. The failure is logged, its traceback with it."""
    from botocore.exceptions import ClientError, EventStreamError
    from strands.types.exceptions import ContextWindowOverflowException, ModelThrottledException

    chain: list[BaseException] = []
    seen: BaseException | None = failure
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    model = (ContextWindowOverflowException, ModelThrottledException, ClientError, EventStreamError)
    # The stores wrap their own connection failures (`StoreError`): one that is not
    # wrapped came from the model's client.
    unreached = () if any(isinstance(e, errors.StoreError) for e in chain) else _unreached()
    if not any(isinstance(e, (*model, *unreached)) or _from_openai(e) for e in chain):
        return None
    told = (ClientError, *unreached)
    said = next((e for e in chain if isinstance(e, told) or _from_openai(e)), chain[0])
    if _from_openai(said):
        status = getattr(said, "status_code", None)
        what = f"{getattr(said, 'message', said)} ({status or type(said).__name__})"
    elif isinstance(said, ClientError):
        error = said.response.get("Error", {})
        what = f"{error.get('Message') or said} ({error.get('Code', 'error')})"
    else:
        what = f"{said} ({type(said).__name__})"
    # The provider's words may echo the key the request carried: neither the person
    # told nor the log of the chained error may see it.
    scrub_failure(failure)
    said_safely = scrub_error(what, failure_secrets(failure))
    logger.error("the model could not answer: %s", said_safely, exc_info=failure)
    return errors.ModelFailed(f"the model could not answer: {said_safely}")


def _unreached() -> tuple[type[BaseException], ...]:
    """botocore's failures to reach or sign for a service: no connection (refused, timed
    out, closed, a proxy or TLS failure), no credentials or region, an expired SSO token."""
    from botocore import exceptions as boto

    return (
        boto.ConnectionError,
        boto.HTTPClientError,
        boto.NoCredentialsError,
        boto.PartialCredentialsError,
        boto.CredentialRetrievalError,
        boto.TokenRetrievalError,
        boto.NoRegionError,
        boto.SSOError,
    )


def _from_openai(failure: BaseException) -> bool:
    """An OpenAI-compatible endpoint's refusal (the SDK's `APIError` family), known
    without importing the SDK where it is not used."""
    return any(
        t.__module__.startswith("openai") and t.__name__ == "APIError"
        for t in type(failure).__mro__
    )


def check_agent(rt: Runtime) -> None:
    """Build the deployment's agent once for a caller with no roles, so a factory that
    cannot build (a bad import, a policy that fails validation) fails at start.

    Raises:
        ValueError: the factory failed; the message names the agent's error.
    """
    from interlock.caller import Caller

    try:
        build_agent(rt, Caller("startup-check"), "startup-check", history=[])
    except Exception as exc:
        raise ValueError(f"the agent cannot be built: {type(exc).__name__}: {exc}") from exc


def compose(
    spec: AgentSpec,
    *,
    model: Model,
    messages: list[Any] | None = None,
    max_model_calls: int,
    journal: Journal | None = None,
    progress: ProgressRelay | None = None,
) -> BuiltAgent:
    """Wrap the user's agent in the hooks and model wrappers Interlock owns."""
    limit = ModelCallLimit(max_model_calls)
    meter = RunMeter()
    # A call to a tool this user's agent does not have is refused before anything
    # could ask about it.
    hooks: list[Any] = [UnavailableTools(), *spec.hooks, limit, meter]
    # Credentials, query strings and fragments leave every tool call and text before
    # anything records them (signed reasoning passes untouched); the configured key
    # leaves its errors.
    wrapped: Model = UrlScrubbedModel(model)
    if journal is not None:
        wrapped = JournaledModel(wrapped, journal)
    agent = Agent(
        model=wrapped,
        tools=list(spec.tools),
        hooks=hooks,
        interventions=list(spec.interventions),
        system_prompt=spec.system_prompt,
        messages=messages or [],
        callback_handler=progress,
        tool_executor=SequentialToolExecutor() if spec.one_card_at_a_time else None,
    )
    if journal is not None:
        # After every intervention: a confirmed call runs as its card approved it.
        agent.hooks.add_hook(ConfirmedCalls())
        # Registered after every hook and intervention (they run in registration
        # order), so a body is replayed only once all of them decided as they did.
        agent.hooks.add_hook(JournalHook(journal))
    else:
        agent.hooks.add_hook(StopOnStoreFailure())
    return BuiltAgent(
        agent,
        limit,
        meter,
        sorted(tool_names(spec)),
        journal,
        frozenset(handler.name for handler in spec.interventions),
        _editable_schemas(agent, spec.editable),
    )


def _editable_schemas(
    agent: Agent, editable: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, Any]]:
    """Per tool, the schema of each argument `editable` names, from the tool's input
    schema (an argument the tool does not declare is not editable)."""
    registry = agent.tool_registry.registry
    return {
        tool: argument_schemas(registry[tool].tool_spec if tool in registry else None, names)
        for tool, names in editable.items()
    }
