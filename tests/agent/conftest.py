"""Fixtures for the Strands tier: real agents, the scripted model, moto in-process."""

from __future__ import annotations

import pytest

from interlock.adapters.factory import Stores
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, TurnLimits
from tests.agent.support import Models, Transport


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
