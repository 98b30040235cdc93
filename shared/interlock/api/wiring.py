"""Building the stores and the runtime from the environment, once per Lambda container.

The requests function needs only the stores; `runtime()` imports the Strands side
lazily so that function never loads strands (a cold-start budget, measured by
`bench/api_cycle.py`).
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from interlock.adapters.factory import stores_from_env
from interlock.adapters.parameters import load_json_parameter
from interlock.config import DEFAULT_AGENT, Env, InterlockConfig, assemble
from interlock.ports import Stores
from interlock.timing import StorePolicy

if TYPE_CHECKING:
    from interlock.deps import Runtime


def policy_from_env() -> StorePolicy:
    """Store policy with the deployment's request lifetime and lease length."""
    return config().store_policy()


@cache
def stores() -> Stores:
    return stores_from_env(policy_from_env())


@cache
def config() -> InterlockConfig:
    """Defaults, then the environment, then the agent's document (a local JSON file
    named by `INTERLOCK_AGENT_CONFIG_FILE`, or the SSM parameter named by
    `INTERLOCK_AGENT_CONFIG_PARAM` when deployed), validated and frozen."""
    document = None
    if path := os.environ.get(Env.AGENT_CONFIG_FILE):
        document = json.loads(Path(path).read_text())
    elif name := os.environ.get(Env.AGENT_CONFIG_PARAM):
        import boto3

        document = load_json_parameter(boto3.client("ssm"), name)
    return assemble(os.environ, document)


@cache
def runtime() -> Runtime:
    """The service runtime: stores, the agent named by `INTERLOCK_AGENT`, the
    configured model, the fetch transport."""
    from interlock.agent import load_factory
    from interlock.deps import Runtime, TurnLimits
    from interlock.runtime.agent import ModelConfig, build_model, check_agent
    from interlock.runtime.transport import transport_from_env

    settings = config()
    model = ModelConfig(settings.model_spec, os.environ.get("AWS_REGION"))
    built = Runtime(
        stores(),
        lambda: build_model(model),
        agent=load_factory(os.environ.get(Env.AGENT, DEFAULT_AGENT)),
        fetch=transport_from_env(os.environ),
        # Renew well inside the lease so one slow beat never lets it lapse.
        limits=TurnLimits(
            heartbeat_s=max(settings.lease_ms / 3000, 0.2), max_model_calls=settings.max_model_calls
        ),
        config=settings,
    )
    # A broken agent fails this cold start (a policy naming an undeclared field, a
    # missing import), not a person's first turn.
    check_agent(built)
    return built
