"""The OpenAI-compatible path: Strands' `OpenAIModel` and the `openai` SDK, unchanged,
against a local chat-completions endpoint (`local.openai_compat`) that streams as vLLM,
Ollama or a hosted service does. The analyst demo pauses, resumes and is taken over
through it as with the scripted model; the key reaches the endpoint; a refusal is a
clear run error."""

from __future__ import annotations

import contextlib
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
from interlock.timing import CLOCK_SKEW_MS
from local.emulator import Emulator
from local.openai_compat import LocalOpenAI, serving
from tests.conftest import fresh_storage
from tests.e2e.http_client import local_server, parse_sse
from tests.e2e.test_http import APPROVE, DOWNLOAD, answer, secret_of

pytestmark = pytest.mark.server

MODEL = "local/llama-3.1-8b"
KEY = "sk-local-test-key"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[LocalOpenAI]:
    with serving(DEMO_SCENARIOS, key=KEY) as running:
        yield running


@pytest.fixture(scope="module")
def openai_aws(emulator: Emulator) -> dict[str, Any]:
    return fresh_storage(emulator.endpoint, "interlock-openai")


def _env(endpoint: LocalOpenAI, model: str = MODEL) -> dict[str, str]:
    return {
        "INTERLOCK_MODEL": f"openai:{endpoint.base_url}#{model}",
        "INTERLOCK_OPENAI_API_KEY": KEY,
        "INTERLOCK_LEASE_MS": "3000",
    }


def _texts(body: dict[str, Any]) -> list[str]:
    return [
        m.get("content") if isinstance(m.get("content"), str) else str(m.get("content", ""))
        for m in body["messages"]
    ]


def test_the_demo_pauses_and_resumes_through_an_openai_compatible_endpoint(
    endpoint: LocalOpenAI, openai_aws: dict[str, Any], tmp_path: Path
) -> None:
    with local_server(openai_aws, tmp_path / "server.log", extra_env=_env(endpoint)) as server:
        alice = server.client("alice-openai", ["reporter"])
        paused = alice.run("openai-1", DOWNLOAD)
        interrupt = paused.interrupt
        assert interrupt.metadata["card"]["type"] == "download"
        asked = endpoint.recorded.of(MODEL)
        assert asked, "the endpoint was never called"
        assert asked[0]["stream"] is True
        tools = {t["function"]["name"] for t in asked[-1]["tools"]}
        assert {"fetch_url", "request_approval"} <= tools
        assert any(DOWNLOAD in text for text in _texts(asked[0]))

        done = alice.resume("openai-1", answer(interrupt, APPROVE, secret_of(interrupt)))
    assert done.result["outcome"] == "completed"
    assert "reference table begins" in done.text
    # The resumed run sent the paused call's result back as a tool message
    resumed = endpoint.recorded.of(MODEL)[len(asked)]
    assert any(m["role"] == "tool" for m in resumed["messages"])


def test_a_takeover_through_the_endpoint_asks_the_model_nothing_twice(
    endpoint: LocalOpenAI, openai_aws: dict[str, Any], tmp_path: Path
) -> None:
    chat = "openai-takeover"
    with local_server(openai_aws, tmp_path / "a.log", extra_env=_env(endpoint)) as first:
        # Given an approved download whose server dies while the model writes the summary
        alice = first.client("alice-openai-2", ["reporter"])
        interrupt = alice.run(chat, DOWNLOAD).interrupt
        entry = answer(interrupt, APPROVE, secret_of(interrupt))
        endpoint.hold.after(1)
        dying = threading.Thread(target=_answer_on_a_dying_server, args=(alice, chat, entry))
        dying.start()
        assert endpoint.hold.holding.wait(timeout=60), "the resumed run never reached the model"
        os.kill(first.pid, signal.SIGKILL)
        dying.join(timeout=30)
    served = len(endpoint.recorded.of(MODEL))
    endpoint.hold.release()

    # When a fresh server takes the same answer once the claim's lease lapsed
    with local_server(openai_aws, tmp_path / "b.log", extra_env=_env(endpoint)) as second:
        time.sleep(3.5 + CLOCK_SKEW_MS / 1000)  # the lease, and the margin a taker waits
        done = second.client("alice-openai-2", ["reporter"]).resume(chat, entry)

    # Then only the summary was asked for again; the fetch came from the journal
    assert done.result["outcome"] == "completed"
    assert "reference table begins" in done.text
    again = [
        b for b in endpoint.recorded.of(MODEL)[served:] if any(DOWNLOAD in t for t in _texts(b))
    ]
    assert len(again) == 1
    assert again[0]["messages"][-1]["role"] == "tool", "it continued after the fetch"


def test_a_refusal_and_a_wrong_key_are_clear_run_errors(
    endpoint: LocalOpenAI, openai_aws: dict[str, Any], tmp_path: Path
) -> None:
    refusing = _env(endpoint, f"{MODEL}-refused")
    wrong_key = {**_env(endpoint), "INTERLOCK_OPENAI_API_KEY": "sk-wrong"}
    for name, env in (("refused", refusing), ("key", wrong_key)):
        with local_server(openai_aws, tmp_path / f"{name}.log", extra_env=env) as server:
            reply = server.client(f"bob-{name}", ["reporter"]).post_run(f"openai-{name}", DOWNLOAD)
        assert reply.status == 200, reply.describe()
        last = parse_sse(reply.body.decode())[-1]
        assert isinstance(last, RunErrorEvent), last
        assert last.code == "model_failed", (name, last)
    assert "filtered" in last.message.lower() or "key" in last.message.lower()


def _answer_on_a_dying_server(alice: Any, chat: str, entry: Any) -> None:
    with contextlib.suppress(Exception):  # the connection breaks when the server dies
        alice.resume(chat, entry)
