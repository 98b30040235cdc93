"""Shared fixtures: AWS on moto, in-process or as a server on 127.0.0.1."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

from interlock.adapters.factory import Stores, build_stores
from interlock.adapters.schema import create_storage
from interlock.timing import ManualClock, StorePolicy
from local import moto_at_scale
from local.emulator import Emulator
from tests import reporting
from tests.secret_watch import WATCH, SecretWatch

REGION = "us-east-1"
TESTS = Path(__file__).resolve().parent

# DynamoDB applies each request atomically; in-process moto works through one in several
# Python steps without a lock, so two threads of one test (the parallel tools of a batch)
# could interleave inside one request and corrupt what moto holds. Requests are served one
# at a time here, as the emulator serves them (`local.emulator`).
_ONE_AT_A_TIME = threading.RLock()
_serve = BotocoreStubber.__call__


def _serialized(self: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
    with _ONE_AT_A_TIME:
        return _serve(self, event_name, request, **kwargs)


BotocoreStubber.__call__ = _serialized  # type: ignore[method-assign]
# In-process moto without its whole-table costs per call, as the emulator runs it.
moto_at_scale.install()


# Files whose tests are independent runs of one long check: under `./dev test` (two
# workers) they spread over both instead of holding one worker to the end.
SPREAD: frozenset[str] = frozenset({"test_event_numbers.py"})


# The order `./dev test` takes the tiers in. The two longest go first: the crash matrix
# (which keeps both cores busy) beside the browser tests (which mostly wait on chromium).
# Then the files of the tiers that mostly wait (on servers, subprocesses, fakes) alternate
# with those of the tiers that keep a core busy, so that while one worker waits the other
# works; the many short files of the other tiers come last, so both workers end together.
# A `ONE_GROUP` tier runs on one worker, a file after the other: the browser tests (one
# chromium, one test at a time) and the infrastructure tests (whose session synthesizes
# the app once, not once per worker).
FIRST: tuple[str, ...] = ("faults", "browser")
WAITING: tuple[str, ...] = ("e2e", "channels")
BUSY: tuple[str, ...] = ("race", "infra", "bench")
ONE_GROUP: frozenset[str] = frozenset({"browser", "infra"})


def pytest_configure(config: pytest.Config) -> None:
    # A run whose outcomes do not add up to what it collected fails (`tests/reporting`).
    reporting.register(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the tests as `FIRST`, `WAITING` and `BUSY` say; a stable sort, so files
    stay whole and in order within their tier."""
    items.sort(key=_scheduled(items))


def _scheduled(items: list[pytest.Item]) -> Callable[[pytest.Item], tuple[int, int]]:
    """The sort key: `FIRST` tiers in order, then a waiting and a busy file by turns,
    then the rest."""
    alternating: dict[Path, int] = {}
    for turn, tiers in enumerate((WAITING, BUSY)):
        files = dict.fromkeys(i.path for t in tiers for i in items if _tier(i) == t)
        alternating |= {path: 2 * n + turn for n, path in enumerate(files)}

    def key(item: pytest.Item) -> tuple[int, int]:
        if (tier := _tier(item)) in FIRST:
            return 0, FIRST.index(tier)
        return (1, alternating[item.path]) if item.path in alternating else (2, 0)

    return key


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `--dist loadgroup`, the suite's own groups (`group_of`): each file's tests
    stay on one worker, so its module fixtures (a server, a synthesized app, forked
    zygotes) are built once.

    xdist's own `loadgroup` reads a test's group from a suffix its collection hook writes
    into the test's id; pytest 9 keeps ids where that write no longer reaches, so every
    test became a group of its own and files were split over both workers. The group is
    therefore derived here, from the id the scheduler is given.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return Grouped(config, log)


def group_of(nodeid: str) -> str:
    """The unit one worker runs whole: a `ONE_GROUP` tier, each test of a `SPREAD` file
    alone, else the test's file."""
    path = nodeid.split("::", 1)[0]
    parts = PurePosixPath(path).parts
    tier = parts[1] if len(parts) > 2 and parts[0] == TESTS.name else ""
    if tier in ONE_GROUP:
        return tier
    return nodeid if parts[-1] in SPREAD else path


def _tier(item: pytest.Item) -> str:
    """The tier directory under `tests/` that holds `item` ("" for `tests/` itself)."""
    if TESTS not in item.path.parents:
        return ""
    parts = item.path.relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 else ""


@pytest.fixture(autouse=True, scope="session")
def _fake_aws_credentials() -> None:
    # Never let a test reach a real account, whatever the developer's environment holds.
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_SESSION_TOKEN="testing",
        AWS_DEFAULT_REGION=REGION,
    )
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def policy() -> StorePolicy:
    return StorePolicy()


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """In-process moto with the table and bucket created from the shared schema."""
    with mock_aws():
        clients = _clients(endpoint=None)
        create_storage(clients["dynamodb"], clients["s3"], "interlock", "interlock-data")
        yield {**clients, "table": "interlock", "bucket": "interlock-data"}


@pytest.fixture
def stores(aws: dict[str, Any], policy: StorePolicy) -> Stores:
    return build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"], policy)


@pytest.fixture(scope="session")
def emulator() -> Iterator[Emulator]:
    """A moto server on 127.0.0.1 for tests that need real HTTP and real contention."""
    server = Emulator().start()
    yield server
    server.stop()


@pytest.fixture
def server_aws(emulator: Emulator) -> dict[str, Any]:
    """A fresh table and bucket on the moto server (unique names: tests stay apart)."""
    return fresh_storage(emulator.endpoint)


def fresh_storage(endpoint: str, prefix: str = "interlock") -> dict[str, Any]:
    """Create a uniquely named table and bucket at `endpoint`; clients and names."""
    suffix = uuid.uuid4().hex[:12]
    clients = _clients(endpoint=endpoint)
    table, bucket = f"{prefix}-{suffix}", f"{prefix}-data-{suffix}"
    create_storage(clients["dynamodb"], clients["s3"], table, bucket)
    return {**clients, "table": table, "bucket": bucket, "endpoint": endpoint}


# One session for the test process: a new session loads and parses every service model
# again (about 0.15 s of CPU for two clients, against 0.02 s from a session that has them),
# and the suite makes clients for most of its tests. Clients are still made per test, so a
# fault injector's handlers on one never reach another. Fixtures make them on one thread.
_SESSION = boto3.session.Session(region_name=REGION)
_CONFIG = boto3.session.Config(max_pool_connections=64, retries={"max_attempts": 2})


def _clients(endpoint: str | None) -> dict[str, Any]:
    return {
        name: _SESSION.client(name, endpoint_url=endpoint, config=_CONFIG)
        for name in ("dynamodb", "s3")
    }


@pytest.fixture
def server_stores(server_aws: dict[str, Any], policy: StorePolicy) -> Stores:
    """Stores talking HTTP to the moto server: for races between real threads."""
    return build_stores(
        server_aws["dynamodb"], server_aws["s3"], server_aws["table"], server_aws["bucket"], policy
    )


# -- nothing secret reaches a log ------------------------------------------------------------
#
# Every resume secret, development token and redacted card value the suite issues is
# remembered, every log record any logger handles is kept (whatever its handlers or
# propagation), and at the end of the session none of the values may appear in them.


@pytest.fixture(autouse=True, scope="session")
def _no_secret_in_logs() -> Iterator[SecretWatch]:
    import interlock.cards as cards
    import interlock.records as records
    import interlock.tokens as tokens
    from local import devtokens

    originals = (
        tokens.new_secret,
        records.new_secret,
        devtokens.issue,
        cards.redact,
        logging.Logger.handle,
    )

    def new_secret() -> str:
        return str(WATCH.issue(originals[0]()))

    def issue(*args: Any, **kwargs: Any) -> str:
        return str(WATCH.issue(originals[2](*args, **kwargs)))

    def redact(params: Any) -> Any:
        for key, value in params.items():
            if cards._SENSITIVE.search(str(key)):
                WATCH.issue(str(value))
        return originals[3](params)

    def handle(self: logging.Logger, record: logging.LogRecord) -> None:
        # What the logger's own filters drop never reaches a handler, so never a log.
        if not self.disabled and self.filter(record):
            WATCH.record(record)
        originals[4](self, record)

    tokens.new_secret = records.new_secret = new_secret  # type: ignore[assignment]
    devtokens.issue = issue  # type: ignore[assignment]
    cards.redact = redact  # type: ignore[assignment]
    logging.Logger.handle = handle  # type: ignore[method-assign]
    try:
        yield WATCH
    finally:
        (
            tokens.new_secret,
            records.new_secret,
            devtokens.issue,
            cards.redact,
            logging.Logger.handle,
        ) = originals  # type: ignore[assignment]
    leaks = WATCH.leaks()
    assert not leaks, f"secrets found in logs: {leaks}"
