"""The real Bedrock path: Strands' `BedrockModel` and botocore, unchanged, against a
local Bedrock Runtime (`local.bedrock`) that answers `ConverseStream` in Bedrock's own
event-stream framing. The analyst demo pauses and resumes through it as it does with
the scripted model; a model failure is a clear run error that strands no request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunErrorEvent

from examples.analyst.script import DEMO_SCENARIOS
from interlock.records import RequestState
from interlock.timing import SystemClock
from local.bedrock import LocalBedrock, serving
from local.emulator import Emulator
from tests.conftest import fresh_storage
from tests.e2e.http_client import LocalServer, local_server, parse_sse
from tests.e2e.test_http import APPROVE, DOWNLOAD, answer, secret_of

pytestmark = pytest.mark.server

MODEL = "anthropic.local-claude-v1"


@pytest.fixture(scope="module")
def bedrock() -> Iterator[LocalBedrock]:
    with serving(DEMO_SCENARIOS) as running:
        yield running


@pytest.fixture(scope="module")
def bedrock_aws(emulator: Emulator) -> dict[str, Any]:
    return fresh_storage(emulator.endpoint, "interlock-bedrock")


@pytest.fixture(scope="module")
def server(
    bedrock_aws: dict[str, Any], bedrock: LocalBedrock, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    log = tmp_path_factory.mktemp("bedrock-server") / "server.log"
    env = {"INTERLOCK_MODEL": f"bedrock:{MODEL}", "INTERLOCK_BEDROCK_URL": bedrock.url}
    with local_server(bedrock_aws, log, extra_env=env) as running:
        yield running


def test_the_demo_pauses_and_resumes_through_bedrocks_converse_stream(
    server: LocalServer, bedrock: LocalBedrock, bedrock_aws: dict[str, Any]
) -> None:
    alice = server.client("alice-bedrock", ["reporter"])
    before = len(bedrock.recorded.of(MODEL))
    paused = alice.run("bedrock-1", DOWNLOAD)
    interrupt = paused.interrupt
    assert interrupt.metadata["card"]["type"] == "download"
    # Each model call went to Bedrock as a Converse request with the agent's tools
    asked = bedrock.recorded.of(MODEL)[before:]
    assert asked, "the model was never called"
    tools = {t["toolSpec"]["name"] for t in asked[-1]["toolConfig"]["tools"]}
    assert {"fetch_url", "request_approval"} <= tools
    assert asked[0]["messages"][0]["content"][0]["text"] == DOWNLOAD

    done = alice.resume("bedrock-1", answer(interrupt, APPROVE, secret_of(interrupt)))
    assert done.result["outcome"] == "completed"
    assert "reference table begins" in done.text
    # The resumed call's result went back to the model, and nothing before it was asked
    # again: the snapshot carried the conversation
    resumed = bedrock.recorded.of(MODEL)[before + len(asked) :]
    results = [
        block["toolResult"]
        for message in resumed[0]["messages"]
        for block in message["content"]
        if "toolResult" in block
    ]
    assert results, json.dumps(resumed[0])[:500]


def test_a_model_refusal_is_a_clear_run_error_and_leaves_the_chat_usable(
    server: LocalServer, bedrock: LocalBedrock, bedrock_aws: dict[str, Any], tmp_path: Path
) -> None:
    # The same endpoint, with a model whose every call is "Input is too long"
    log = tmp_path / "server.log"
    env = {"INTERLOCK_MODEL": f"bedrock:{MODEL}-too-long", "INTERLOCK_BEDROCK_URL": bedrock.url}
    with local_server(bedrock_aws, log, extra_env=env) as failing:
        bob = failing.client("bob-bedrock", ["reporter"])
        reply = bob.post_run("bedrock-2", DOWNLOAD)
    assert reply.status == 200, reply.describe()
    events = parse_sse(reply.body.decode())
    last = events[-1]
    assert isinstance(last, RunErrorEvent), [e.type for e in events]
    assert last.code == "model_failed", last
    assert "too long" in last.message.lower(), last.message
    # Nothing is left waiting: no open request, and a new turn on a working model runs
    from interlock.adapters.factory import build_stores

    stores = build_stores(
        bedrock_aws["dynamodb"], bedrock_aws["s3"], bedrock_aws["table"], bedrock_aws["bucket"]
    )
    request = stores.requests.get("bedrock-2", SystemClock().now_ms())
    assert request is None or request.state is not RequestState.PENDING
    again = server.client("bob-bedrock", ["reporter"]).run("bedrock-2", "hello")
    assert "Ask me to download" in again.text
