"""Finding overdue requests and fanning them out, one settle message each.

The scheduled finder reads the sparse `by_expiry` index shard by shard (the `by_lease`
index, for claims whose worker died, and the `by_notice` index, for channel posts and
edits to retry) and puts one message per chat to look at on the settle queue; consumers
settle each one (`interlock.sweeper.settle_message`). The index, not the queue, is the
list of what is overdue: a message only names a request to look at, so a lost or
repeated one costs at most a finder interval or one read (a second settle finds the
request settled, or claimed, and skips it). The finder also stops before its own
deadline and leaves the rest for the next scheduled run.

No boto3 and no strands here: the queue is a port, and the finder never runs an agent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from interlock import errors, keys
from interlock.keys import SWEEP_SHARDS
from interlock.ports import RequestPort
from interlock.timing import RECOVERY_GRACE_MS, surely_passed

# SQS's SendMessageBatch takes at most ten entries.
SEND_BATCH: Final = 10
# Stop when less than this is left before the finder's deadline: one index query or one
# batch send takes well under a second, so this leaves room to report and return.
FINDER_MARGIN_MS: Final = 10_000
# Overdue requests read per shard and run; one KEYS_ONLY page holds far more than this.
FINDER_LIMIT_PER_SHARD: Final = 1000


class SettleMessage(BaseModel):
    """One queue message: the overdue request's identifier (its chat), nothing else.

    Never any chat content: whatever settling needs is read from the table.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    chat_id: str

    @field_validator("chat_id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        return keys.checked_id(value, "chat id")

    def body(self) -> str:
        """The message body: `{"chat_id": ...}`."""
        return self.model_dump_json()

    @classmethod
    def parse(cls, body: str) -> SettleMessage:
        """Read a message body.

        Raises:
            InvalidInput: not JSON, an unknown field, or an unsafe chat id.
        """
        try:
            return cls.model_validate_json(body)
        except (ValidationError, errors.InvalidInput) as exc:
            detail = errors.validation_message(exc) if isinstance(exc, ValidationError) else exc
            raise errors.InvalidInput(f"not a settle message: {detail}") from exc


class SettleQueue(Protocol):
    """Where the finder puts the overdue requests for consumers to settle."""

    def send(self, messages: Sequence[SettleMessage]) -> None:
        """Enqueue up to `SEND_BATCH` messages; raises `StoreError` if any is refused."""
        ...

    def waiting(self) -> int:
        """About how many messages wait, not yet taken by a consumer."""
        ...


@dataclass
class FindReport:
    """What one finder run did.

    Attributes:
        found: Overdue requests read from the index.
        enqueued: Messages sent, one per request.
        deferred: Requests found but left for the next run: the deadline came first.
        backlog: Messages still waiting when the run began; the run then sends nothing,
            since the requests it would find are mostly those very messages.
        stopped: Whether the run stopped before its deadline with shards still unread.
    """

    found: int = 0
    enqueued: int = 0
    deferred: int = 0
    backlog: int = 0
    stopped: bool = False


class NoticeFinder(Protocol):
    """Where the channel notices with a delivery due are found (`ChannelPort`)."""

    def due_notices(self, shard: str, now_ms: int, limit: int) -> list[str]: ...


def overdue_chats(
    requests: RequestPort,
    now_ms: int,
    limit_per_shard: int,
    grace_ms: int = RECOVERY_GRACE_MS,
    notices: NoticeFinder | None = None,
) -> Iterator[str]:
    """Chats whose open request is past its expiry, or whose claim's worker is gone (its
    lease ran out more than `grace_ms` ago), or with a channel notice due, shard by
    shard, each chat once. Expiries and leases count only once over by every clock
    (`timing.surely_passed`)."""
    for shard in range(SWEEP_SHARDS):
        yield from _shard(requests, notices, f"OPEN#{shard}", now_ms, limit_per_shard, grace_ms)


def _shard(
    requests: RequestPort,
    notices: NoticeFinder | None,
    shard: str,
    now_ms: int,
    limit: int,
    grace_ms: int,
) -> list[str]:
    # Expiries and leases are the writers' clocks: only what is over by every clock is
    # found (`RequestRecord.overdue`, `stranded`). A notice's due time needs no margin:
    # finding one early only looks at it early (its attempt's hold decides who sends).
    everywhere = surely_passed(now_ms)
    overdue = requests.overdue(shard, everywhere, limit)
    stranded = requests.lapsed(shard, everywhere - grace_ms, limit)
    due = notices.due_notices(shard, now_ms, limit) if notices is not None else []
    return list(dict.fromkeys([*overdue, *stranded, *due]))


def find_overdue(
    requests: RequestPort,
    queue: SettleQueue,
    now_ms: int,
    remaining_ms: Callable[[], int],
    limit_per_shard: int = FINDER_LIMIT_PER_SHARD,
    grace_ms: int = RECOVERY_GRACE_MS,
    notices: NoticeFinder | None = None,
) -> FindReport:
    """Enqueue one settle message per overdue request, until the deadline is near.

    Args:
        requests: The pointer store (its sparse expiry index).
        queue: The settle queue.
        now_ms: What "overdue" is measured against.
        remaining_ms: Time left before the caller's deadline (a Lambda context's
            `get_remaining_time_in_millis`), read before every call.
        limit_per_shard: Overdue requests read per shard.
        grace_ms: How long a lapsed lease is left to its worker before it is continued.
        notices: Where channel notices with a delivery due are found, if anywhere.
    """
    report = FindReport()
    # A queue still holding the last fan-out means consumers are behind: the oldest
    # overdue requests are those very messages, and sending them again every interval
    # would pile up copies faster than they are settled.
    report.backlog = queue.waiting()
    if report.backlog:
        return report
    unsent: list[str] = []
    for shard in range(SWEEP_SHARDS):
        if remaining_ms() < FINDER_MARGIN_MS:
            report.stopped = True
            break
        chats = _shard(requests, notices, f"OPEN#{shard}", now_ms, limit_per_shard, grace_ms)
        report.found += len(chats)
        # Full batches go now; the rest waits to fill up with the next shard's requests.
        unsent = _send(queue, [*unsent, *chats], remaining_ms, report, full_only=True)
        if report.stopped:
            break
    else:
        unsent = _send(queue, unsent, remaining_ms, report, full_only=False)
    report.deferred = len(unsent)
    return report


def _send(
    queue: SettleQueue,
    chats: Sequence[str],
    remaining_ms: Callable[[], int],
    report: FindReport,
    *,
    full_only: bool,
) -> list[str]:
    """Send `chats` in batches (only full ones with `full_only`) while time is left;
    the chats not sent."""
    pending = list(chats)
    while len(pending) >= SEND_BATCH or (pending and not full_only):
        if remaining_ms() < FINDER_MARGIN_MS:
            report.stopped = True
            break
        batch, pending = pending[:SEND_BATCH], pending[SEND_BATCH:]
        queue.send([SettleMessage(chat_id=chat) for chat in batch])
        report.enqueued += len(batch)
    return pending
