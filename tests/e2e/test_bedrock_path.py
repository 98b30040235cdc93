"""The real Bedrock path: Strands' `BedrockModel` and botocore, unchanged, against a
local Bedrock Runtime (`local.bedrock`) that answers `ConverseStream` in Bedrock's own
event-stream framing. The analyst demo pauses and resumes through it as it does with
the scripted model; a model failure is a clear run error that strands no request."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunErrorEvent

from examples.analyst.script import DEMO_SCENARIOS
from interlock.records import RequestState
from interlock.timing import CLOCK_SKEW_MS, SystemClock
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


def test_a_takeover_through_bedrock_asks_the_model_nothing_twice(
    bedrock: LocalBedrock, bedrock_aws: dict[str, Any], tmp_path: Path
) -> None:
    env = {
        "INTERLOCK_MODEL": f"bedrock:{MODEL}",
        "INTERLOCK_BEDROCK_URL": bedrock.url,
        "INTERLOCK_LEASE_MS": "3000",
    }
    chat = "bedrock-takeover"
    with local_server(bedrock_aws, tmp_path / "a.log", extra_env=env) as first:
        # Given a paused download, approved on a server that dies while the model is
        # writing its summary (the second call of the resumed run)
        alice = first.client("alice-takeover", ["reporter"])
        interrupt = alice.run(chat, DOWNLOAD).interrupt
        entry = answer(interrupt, APPROVE, secret_of(interrupt))
        bedrock.hold.after(1)
        dying = threading.Thread(target=_answer_on_a_dying_server, args=(alice, chat, entry))
        dying.start()
        assert bedrock.hold.holding.wait(timeout=60), "the resumed run never reached the model"
        os.kill(first.pid, signal.SIGKILL)
        dying.join(timeout=30)
    served = len(bedrock.recorded.of(MODEL))
    bedrock.hold.release()  # the dead server's call, answered to nobody

    # When a fresh server takes the same answer once the claim's lease lapsed (by every
    # clock: a taker waits the clock margin out)
    with local_server(bedrock_aws, tmp_path / "b.log", extra_env=env) as second:
        time.sleep(3.5 + CLOCK_SKEW_MS / 1000)
        done = second.client("alice-takeover", ["reporter"]).resume(chat, entry)

    # Then it completed, asking Bedrock only for the summary it never got: the fetch
    # call and its result came from the journal
    assert done.result["outcome"] == "completed"
    assert "reference table begins" in done.text
    asked = [
        b
        for b in bedrock.recorded.of(MODEL)[served:]
        if b["messages"][0]["content"][0].get("text") == DOWNLOAD
    ]
    assert len(asked) == 1, [json.dumps(b["messages"][-1])[:200] for b in asked]
    last = asked[0]["messages"][-1]["content"]
    assert any("toolResult" in block for block in last), "it continued after the fetch"


def _answer_on_a_dying_server(alice: Any, chat: str, entry: Any) -> None:
    with contextlib.suppress(Exception):  # the connection breaks when the server dies
        alice.resume(chat, entry)
