"""The adapter tier is the stores' contract suite: every test runs against the moto
adapters in-process and over HTTP against the moto server (the transport the race,
fault and end-to-end tiers use), so both hold the same semantics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from interlock.adapters.schema import create_storage
from local.emulator import Emulator
from tests.conftest import _clients, fresh_storage


@pytest.fixture(params=["in-process", "server"])
def aws(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    if request.param == "server":
        emulator: Emulator = request.getfixturevalue("emulator")
        yield fresh_storage(emulator.endpoint)
        return
    with mock_aws():
        clients = _clients(endpoint=None)
        create_storage(clients["dynamodb"], clients["s3"], "interlock", "interlock-data")
        yield {**clients, "table": "interlock", "bucket": "interlock-data"}
