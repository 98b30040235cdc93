"""The adapter tier is the stores' contract suite: every test of the ports runs against
the moto adapters in-process, over HTTP against the moto server (the transport the race,
fault and end-to-end tiers use), and on the in-memory stores (`local.memory`, which the
service and handler tiers use), so all three hold the same semantics. A test that looks
at what DynamoDB or S3 hold (it takes `aws`) runs on the moto transports only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from interlock.adapters.factory import Stores, build_stores
from interlock.adapters.schema import create_storage
from interlock.timing import StorePolicy
from local.emulator import Emulator
from local.memory import memory_stores
from tests.conftest import _clients, fresh_storage

MOTO = ["in-process", "server"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_kind" in metafunc.fixturenames:
        kinds = MOTO if "aws" in metafunc.fixturenames else [*MOTO, "memory"]
        metafunc.parametrize("store_kind", kinds)


@pytest.fixture
def aws(store_kind: str, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    if store_kind == "server":
        emulator: Emulator = request.getfixturevalue("emulator")
        yield fresh_storage(emulator.endpoint)
        return
    with mock_aws():
        clients = _clients(endpoint=None)
        create_storage(clients["dynamodb"], clients["s3"], "interlock", "interlock-data")
        yield {**clients, "table": "interlock", "bucket": "interlock-data"}


@pytest.fixture
def stores(store_kind: str, policy: StorePolicy, request: pytest.FixtureRequest) -> Stores:
    if store_kind == "memory":
        return memory_stores(policy)
    aws: dict[str, Any] = request.getfixturevalue("aws")
    return build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"], policy)
