"""A paused MCP call's retry: an answer MCP cannot carry is refused before anything is
reserved, so nothing is sent and no takeover is told the answer may have gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from interlock.context import RequestContext, request_scope
from interlock.harness.mcp import DurableMCPTool, _Told


class RecordingOutbox:
    """The outbox port, keeping what was reserved."""

    def __init__(self) -> None:
        self.reserved: dict[str, dict[str, Any]] = {}

    def put_once(self, key: str, payload: dict[str, Any], now_ms: int) -> bool:
        return self.reserved.setdefault(key, payload) is payload

    def get(self, key: str) -> dict[str, Any] | None:
        return self.reserved.get(key)


class NeverCalled:
    """A tool whose server must not be reached."""

    tool_name = "transfer_funds"

    async def _send(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing may be sent")


def retry(answers: dict[str, Any], outbox: RecordingOutbox) -> Any:
    tool = NeverCalled()
    paused = {"round": 1, "arguments": {"amount": 5}, "request_state": "s", "keys": ["k"]}
    context = RequestContext(user_id="u", chat_id="c", outbox=outbox, now_ms=lambda: 1)
    with request_scope(context):
        return asyncio.run(DurableMCPTool._retry(tool, "tu-1", paused, answers))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "accept", "content": {"payee": {"name": "Ada"}}},
        {"action": "maybe"},
    ],
    ids=["nested-content", "unknown-action"],
)
def test_an_answer_mcp_cannot_carry_is_refused_before_the_retry_is_reserved(
    answer: dict[str, Any],
) -> None:
    outbox = RecordingOutbox()
    with pytest.raises(_Told, match="cannot be sent to transfer_funds"):
        retry({"k": answer}, outbox)
    assert outbox.reserved == {}
