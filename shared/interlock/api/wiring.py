"""Building the stores and the runtime from the environment, once per Lambda container.

The requests function needs only the stores; `runtime()` imports the Strands side
lazily so that function never loads strands (a cold-start budget, measured by
`bench/api_cycle.py`).
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

from interlock.adapters.factory import Stores, stores_from_env
from interlock.timing import StorePolicy

if TYPE_CHECKING:
    from interlock.turns import Runtime


def policy_from_env() -> StorePolicy:
    """Store policy with the deployment's request lifetime and lease length."""
    defaults = StorePolicy()
    return StorePolicy(
        request_ttl_s=int(os.environ.get("INTERLOCK_REQUEST_TTL_S", defaults.request_ttl_s)),
        lease_ms=int(os.environ.get("INTERLOCK_LEASE_MS", defaults.lease_ms)),
    )


@cache
def stores() -> Stores:
    return stores_from_env(policy_from_env())


@cache
def runtime() -> Runtime:
    """The service runtime: stores, the configured model, the fetch transport."""
    from interlock.runtime.agent import ModelConfig, build_model
    from interlock.runtime.transport import transport_from_env
    from interlock.turns import Runtime, TurnLimits

    config = ModelConfig.from_env(os.environ)
    lease_s = policy_from_env().lease_ms / 1000
    return Runtime(
        stores(),
        lambda: build_model(config),
        fetch=transport_from_env(os.environ),
        # Renew well inside the lease so one slow beat never lets it lapse.
        limits=TurnLimits(heartbeat_s=max(lease_s / 3, 0.2)),
    )
