"""The API holds to its published OpenAPI document under a fuzzer.

Schemathesis generates requests from `docs/openapi.json` (the same document the local
server serves, generated from the route table and the models) and sends them to a real
local server over HTTP: no response may be a 5xx, every response must match the
document (status, content type, body schema), and a refused request must leave every
stored item and object as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from interlock.api.openapi import document
from local.emulator import Emulator
from tests.conftest import fresh_storage
from tests.e2e.http_client import LocalServer, local_server
from tests.e2e.test_http import snapshot

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "docs" / "openapi.json"
SCHEMA = schemathesis.openapi.from_dict(document())
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Per operation: fifteen operations, some 300 requests in all.
EXAMPLES = 20
FIGURES: dict[str, Any] = {"operations": {}, "server_errors": 0}


def test_the_published_document_is_the_generated_one() -> None:
    assert json.loads(PUBLISHED.read_text()) == document(), (
        "docs/openapi.json is stale: regenerate it with "
        "`PYTHONPATH=shared .venv/bin/python -m interlock.api.openapi > docs/openapi.json`"
    )


@pytest.fixture(scope="module")
def fuzz_aws(emulator: Emulator) -> dict[str, Any]:
    return fresh_storage(emulator.endpoint, "interlock-fuzz")


@pytest.fixture(scope="module")
def fuzz_server(
    fuzz_aws: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    log = tmp_path_factory.mktemp("fuzz-server") / "server.log"
    with local_server(fuzz_aws, log) as running:
        yield running


class Ledger:
    """The store as it stood after the last request, to compare the next one against."""

    state: Any = None


# One test per operation, each with an id of its own: under the suite's workers, cases
# that share one id are run but reported once (a report is keyed by its id).
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_no_request_breaks_the_document_or_changes_the_store_when_refused(
    operation: Any, fuzz_server: LocalServer, fuzz_aws: dict[str, Any]
) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def examples(case: Any) -> None:
        _one_request(case, fuzz_server, fuzz_aws)

    examples()


def _one_request(case: Any, fuzz_server: LocalServer, fuzz_aws: dict[str, Any]) -> None:
    token = fuzz_server.client("fuzzer", ["reporter"])
    headers = {"Authorization": f"Bearer {token.token}"}
    before = Ledger.state if Ledger.state is not None else snapshot(fuzz_aws)

    response = case.call(base_url=fuzz_server.url, headers=headers, timeout=30)

    name = f"{case.method} {case.path}"
    counts = FIGURES["operations"].setdefault(name, {"examples": 0, "refused": 0})
    counts["examples"] += 1
    FIGURES["server_errors"] += int(response.status_code >= 500)
    case.validate_response(response, checks=CHECKS)
    Ledger.state = snapshot(fuzz_aws)
    if response.status_code >= 400:
        counts["refused"] += 1
        assert Ledger.state == before, f"{name} was refused with {response.status_code} but wrote"
    _write_figures()


def _write_figures() -> None:
    out = ROOT / "artifacts" / "openapi_fuzz.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(FIGURES, indent=1, sort_keys=True))
