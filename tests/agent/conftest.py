"""Fixtures for the Strands tier: real agents, the scripted model, the in-memory stores
(held to the moto adapters by the contract suite); a test that looks at what DynamoDB or
S3 hold (it takes `aws`) runs on moto in-process."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.adapters.factory import Stores, build_stores
from interlock.timing import ManualClock, StorePolicy
from interlock.turns import Caller, Runtime, TurnLimits
from local.memory import memory_stores
from tests.agent.support import Models, Transport


@pytest.fixture
def stores(policy: StorePolicy, request: pytest.FixtureRequest) -> Stores:
    if "aws" in request.fixturenames:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        return build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"], policy)
    return memory_stores(policy)


@pytest.fixture
def transport() -> Transport:
    return Transport()


@pytest.fixture
def models() -> Models:
    return Models()


@pytest.fixture
def runtime(stores: Stores, clock: ManualClock, transport: Transport, models: Models) -> Runtime:
    # A long heartbeat interval: these tests move a manual clock, not wall time.
    return Runtime(
        stores,
        models,
        clock=clock,
        fetch=transport,
        limits=TurnLimits(heartbeat_s=60),
        worker_id="worker-1",
    )


@pytest.fixture
def alice() -> Caller:
    return Caller("alice", frozenset({"reporter"}), trace_id="trace-1")
