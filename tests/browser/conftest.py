"""The card page in a real browser: Debian's chromium driven by Playwright.

One local server per module, started as a child process on its own table and bucket of
the moto server; one browser per session; a fresh browser context (no shared storage)
per test. A missing chromium fails every test with the install hint: it never skips.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import boto3
import pytest

from interlock.adapters.factory import Stores, build_stores
from interlock.adapters.schema import create_storage
from local.emulator import Emulator
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS, INSTALL_HINT
from tests.browser.pages import ChatPage

ROOT: Final = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S: Final = 30.0
DESKTOP: Final = {"width": 1280, "height": 900}
# What a person would wait for on a slow machine: a resumed run ends within it. It holds
# for every `expect` (Playwright's own default is five seconds).
EXPECT_TIMEOUT_MS: Final = 15_000


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """Headless chromium from the system; fails loudly (not a skip) when it is missing.

    Held for this package only: the sync API keeps an event loop running on the thread
    while it is open, and the tests that run after these on the same worker start
    their own (`asyncio.run`)."""
    if not CHROMIUM.is_file():
        pytest.fail(INSTALL_HINT, pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(INSTALL_HINT, pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def storage(emulator: Emulator) -> dict[str, Any]:
    """A table and bucket of this module's own on the moto server."""
    suffix = uuid.uuid4().hex[:12]
    session = boto3.session.Session(region_name="us-east-1")
    dynamodb = session.client("dynamodb", endpoint_url=emulator.endpoint)
    s3 = session.client("s3", endpoint_url=emulator.endpoint)
    table, bucket = f"interlock-web-{suffix}", f"interlock-web-{suffix}"
    create_storage(dynamodb, s3, table, bucket)
    return {"dynamodb": dynamodb, "s3": s3, "table": table, "bucket": bucket}


@pytest.fixture(scope="module")
def stores(storage: dict[str, Any]) -> Stores:
    """The store the page's server writes to, for judging what really happened."""
    return build_stores(storage["dynamodb"], storage["s3"], storage["table"], storage["bucket"])


@pytest.fixture(scope="module")
def server(
    storage: dict[str, Any],
    emulator: Emulator,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[str]:
    """`local.server` serving the API and `web/`, as a child process; yields its URL.

    A test module may name the agent to serve in `SERVER_AGENT` (the analyst otherwise),
    more of the server's environment in `SERVER_ENV`, and the seconds between sweeper
    passes in `SERVER_SWEEP_EVERY` (none otherwise, so nothing settles behind a test).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLOCK_"))}
    env.update(
        INTERLOCK_DEV_KEY=secrets.token_hex(32),
        INTERLOCK_MODEL="scripted",
        INTERLOCK_FETCH="demo",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    env.update(getattr(request.module, "SERVER_ENV", {}))
    sweep = str(getattr(request.module, "SERVER_SWEEP_EVERY", 0))
    argv = [sys.executable, "-m", "local.server", "--port", "0", "--sweep-every", sweep]
    argv += ["--aws-endpoint", emulator.endpoint]
    argv += ["--table", storage["table"], "--bucket", storage["bucket"]]
    if agent := getattr(request.module, "SERVER_AGENT", None):
        argv += ["--agent", agent]
    log = tmp_path_factory.mktemp("server") / "server.log"
    with log.open("wb") as out:
        child = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield _wait_ready(child, log)
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=10)


def _wait_ready(child: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        found = re.search(r"^READY (\S+)$", log.read_text(errors="replace"), re.M)
        if found:
            return found.group(1)
        assert child.poll() is None, f"the server exited:\n{log.read_text(errors='replace')}"
        time.sleep(0.05)
    raise AssertionError(f"the server was not ready in {READY_TIMEOUT_S} s:\n{log.read_text()}")


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A fresh browser profile: tabs opened from it share nothing with other tests."""
    opened = browser.new_context(viewport=DESKTOP, locale="en-US", timezone_id="UTC")
    from playwright.sync_api import expect

    opened.set_default_timeout(EXPECT_TIMEOUT_MS)
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    yield opened
    opened.close()


@pytest.fixture
def chat() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tab(context: Any, server: str, chat: str) -> Iterator[ChatPage]:
    """The page on `chat`, as a user of its own (the per-user limits on open requests
    never couple two tests); it must end with no script error. A module may define its
    own."""
    opened = ChatPage.open(context, server, chat, f"alice-{uuid.uuid4().hex[:6]}")
    yield opened
    assert opened.errors == []
