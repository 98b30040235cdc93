"""MCP tools whose questions outlive the process: `durable_mcp_tools(client)`.

Strands' `MCPClient` answers a server's `input_required` inside the call, through an
elicitation callback on the live session: if the process dies while the person thinks,
the question is lost. These tools use the same client (its transport, streamable HTTP or
stdio, and its session) but drive the round trips themselves:

1. The first `tools/call` runs once. When the server answers `input_required`, the call
   (tool, arguments, the sealed `requestState`, the round) is kept in the agent's state,
   which the paused run's snapshot carries, and every input request becomes a card; the
   run pauses like any other. A resume never repeats this first call.
2. Resumed with the answers, the call reserves its retry in the fenced outbox under a
   key stable across takeovers (the chat, the toolUseId and the round), sends the one
   retry with the answers and the stored state, and records the reply under the same
   key before the journal records the tool's result. A takeover that finds the reply
   uses it; one that finds only the reservation does not send again (the server may
   have acted) and says so: at most once, and never a silent guess.

Strands has no public way to receive the raw `input_required` result, so the call goes
through the client's session on its background loop. The private names used, all pinned
with Strands: the client's `_background_thread_session`, `_invoke_on_background_thread`,
`_handle_tool_result` (the result as Strands' own tools return it) and
`_is_session_active`, and `ToolContext._interrupt_id` (the ids Strands' own interrupts get).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final

from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    ElicitResult,
    InputRequiredResult,
    InputResponse,
    RequestParamsMeta,
)
from strands.interrupt import Interrupt
from strands.tools.mcp import MCPAgentTool, MCPClient
from strands.types._events import ToolInterruptEvent, ToolResultEvent
from strands.types.tools import AgentTool, ToolContext, ToolResult, ToolSpec, ToolUse

from interlock import elicitation
from interlock.context import current_request
from interlock.errors import InvalidInput

# Where paused calls wait in the agent's state (and so in the snapshot), by toolUseId.
STATE_KEY: Final = "interlock.mcp"
# A reply larger than this is not kept in the outbox (its item would not fit); a
# takeover in the window before the journal records it then reports the reply lost.
MAX_KEPT_REPLY_BYTES: Final = 300_000
# Every round carries a key stable across takeovers in its `_meta`, so a server that
# keeps its own record of what it did can tell a call it already served.
IDEMPOTENCY_META: Final = "interlock/idempotency-key"
# What a server answers a requestState it cannot open (restarted with another key, or
# the state's time ran out): JSON-RPC's invalid params.
INVALID_PARAMS: Final = -32602


def idempotency_key(chat_id: str, tool_use_id: str, round_: int) -> str:
    """The key of round `round_` of one call (0: the first call; n: the nth retry): the
    same in every process, and naming neither the chat nor the call to the server."""
    return hashlib.sha256(f"{chat_id}\n{tool_use_id}\n{round_}".encode()).hexdigest()[:32]


def durable_mcp_tools(client: MCPClient) -> list[AgentTool]:
    """The server's tools, each asking its questions through durable cards.

    Starts `client` if it is not running; keep one client per process and build the
    tools once (the agent factory runs for every run and resume).
    """
    if not client._is_session_active():
        client.start()
    return [DurableMCPTool(tool, client) for tool in client.list_tools_sync()]


class DurableMCPTool(AgentTool):
    """One MCP tool; see the module docstring for its two rounds."""

    def __init__(self, inner: MCPAgentTool, client: MCPClient) -> None:
        super().__init__()
        self._inner = inner
        self._client = client

    @property
    def client(self) -> MCPClient:
        """The MCP client the tool calls through (shared by a server's tools)."""
        return self._client

    @property
    def tool_name(self) -> str:
        return self._inner.tool_name

    @property
    def tool_spec(self) -> ToolSpec:
        return self._inner.tool_spec

    @property
    def tool_type(self) -> str:
        return self._inner.tool_type

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        agent = invocation_state["agent"]
        call_id = tool_use["toolUseId"]
        waiting: dict[str, Any] = dict(agent.state.get(STATE_KEY) or {})
        paused = waiting.get(call_id)
        context = ToolContext(tool_use=tool_use, agent=agent, invocation_state=invocation_state)
        try:
            if paused is None:
                raw = await self._send(dict(tool_use.get("input") or {}), key=self._key(call_id, 0))
            else:
                answers = {
                    key: context.interrupt(elicitation.interrupt_name(paused["round"], key))
                    for key in paused["keys"]
                }
                raw = await self._retry(call_id, paused, answers)
        except _Told as told:
            _forget(agent, call_id)
            yield ToolResultEvent(_error(call_id, str(told)))
            return
        if isinstance(raw, InputRequiredResult):
            round_ = paused["round"] + 1 if paused else 1
            try:
                interrupts = self._ask(context, raw, round_)
            except (InvalidInput, _Told) as exc:
                text = f"The tool server's question cannot be asked: {exc}"
                yield ToolResultEvent(_error(call_id, text))
                return
            _keep(
                agent,
                call_id,
                {
                    "round": round_,
                    "arguments": dict(tool_use.get("input") or {}),
                    "request_state": raw.request_state,
                    "keys": sorted((raw.input_requests or {}).keys()),
                },
            )
            yield ToolInterruptEvent(tool_use, interrupts)
            return
        if paused is not None:
            _forget(agent, call_id)
        yield ToolResultEvent(self._client._handle_tool_result(call_id, raw))

    def _ask(self, context: ToolContext, raw: InputRequiredResult, round_: int) -> list[Interrupt]:
        """One interrupt (its reason a card) per input request of `raw`."""
        if not current_request().can_ask_a_human:
            raise _Told("it needs a person's answer, and nobody can answer in this run")
        dumped = raw.model_dump(mode="json", by_alias=True, exclude_none=True)
        requests = dumped.get("inputRequests") or {}
        if not requests:
            raise InvalidInput("it asked for nothing")
        tool_use = context.tool_use
        interrupts = []
        for key in sorted(requests):
            card = elicitation.input_card(
                key=key,
                request=requests[key],
                tool=self.tool_name,
                arguments=dict(tool_use.get("input") or {}),
                tool_use_id=tool_use["toolUseId"],
                round_=round_,
            )
            name = card["interrupt_name"]
            interrupts.append(Interrupt(context._interrupt_id(name), name, card))
        return interrupts

    async def _retry(
        self, call_id: str, paused: Mapping[str, Any], answers: Mapping[str, Any]
    ) -> Any:
        """The one retry of a paused call, reserved and recorded in the fenced outbox."""
        context = current_request()
        if context.outbox is None or context.now_ms is None:
            raise RuntimeError("no outbox in this run: run the agent through Interlock")
        try:
            # Built before anything is reserved: an answer MCP cannot carry is refused
            # here, with nothing sent and nothing to explain later.
            responses: dict[str, InputResponse] = {
                name: ElicitResult.model_validate(value) for name, value in answers.items()
            }
        except ValueError as exc:
            raise _Told(f"The answer cannot be sent to {self.tool_name}: {exc}") from None
        key = f"mcp/{context.chat_id}/{call_id}/{paused['round']}"
        kept = context.outbox.get(f"{key}/reply")
        if kept is not None:
            if "error" in kept:
                raise _Told(kept["error"])
            return CallToolResult.model_validate(kept["result"])
        if not context.outbox.put_once(key, {"tool": self.tool_name}, context.now_ms()):
            raise _Told(
                f"The answer may have been sent to {self.tool_name} already, and its reply "
                "was lost in a crash. It is not sent twice: ask the tool's owner whether it "
                "acted before calling it again."
            )
        try:
            raw = await self._send(
                dict(paused["arguments"]),
                key=self._key(call_id, paused["round"]),
                responses=responses,
                state=paused["request_state"],
            )
        except _Refused as refused:
            context.outbox.put_once(f"{key}/reply", {"error": str(refused)}, context.now_ms())
            raise _Told(str(refused)) from None
        except _Told:
            raise
        except Exception as lost:
            # Sent, and no reply: the server may have acted, so it is not sent again, and
            # a takeover says the same.
            text = (
                f"The answer was sent to {self.tool_name} and no reply came ({lost}). It is "
                "not sent twice: ask the tool's owner whether it acted before calling it again."
            )
            context.outbox.put_once(f"{key}/reply", {"error": text}, context.now_ms())
            raise _Told(text) from None
        if not isinstance(raw, InputRequiredResult):
            kept_reply = {"result": raw.model_dump(mode="json", by_alias=True, exclude_none=True)}
            if len(json.dumps(kept_reply)) <= MAX_KEPT_REPLY_BYTES:
                context.outbox.put_once(f"{key}/reply", kept_reply, context.now_ms())
        return raw

    def _key(self, call_id: str, round_: int) -> str:
        return idempotency_key(current_request().chat_id, call_id, round_)

    async def _send(
        self,
        arguments: dict[str, Any],
        *,
        key: str,
        responses: dict[str, InputResponse] | None = None,
        state: str | None = None,
    ) -> Any:
        """One `tools/call` round on the client's session (a retry when `responses` is
        given); the raw result."""
        session = self._client._background_thread_session
        if session is None:
            raise _Told(f"The tool server for {self.tool_name} is not connected.")
        call = session.call_tool(
            self._inner.mcp_tool.name,
            arguments,
            self._inner.timeout.total_seconds() if self._inner.timeout else None,
            input_responses=responses,
            request_state=state,
            meta=RequestParamsMeta({IDEMPOTENCY_META: key}),  # type: ignore[typeddict-unknown-key]
            allow_input_required=True,
        )
        try:
            return await asyncio.wrap_future(self._client._invoke_on_background_thread(call))
        except MCPError as exc:
            if responses is not None and exc.error.code == INVALID_PARAMS:
                raise _Refused(
                    f"{self.tool_name} no longer accepts this answer ({exc.error.message}): "
                    "the server restarted with another key or the question's time ran out. "
                    "Nothing was done with the answer; call the tool again to be asked anew."
                ) from None
            if responses is not None:
                # A retry that errs (a timeout, a lost connection, the server's own
                # error) may have acted: the caller reports an unknown outcome.
                raise RuntimeError(exc.error.message) from None
            raise _Told(f"{self.tool_name} failed: {exc.error.message}") from None


def _keep(agent: Any, call_id: str, paused: dict[str, Any]) -> None:
    # Read again and merge with no await between: parallel calls of one batch share the
    # agent's state, and a copy taken before a call would drop a sibling's entry.
    agent.state.set(STATE_KEY, {**(agent.state.get(STATE_KEY) or {}), call_id: paused})


def _forget(agent: Any, call_id: str) -> None:
    waiting = dict(agent.state.get(STATE_KEY) or {})
    if waiting.pop(call_id, None) is not None:
        agent.state.set(STATE_KEY, waiting)


def _error(call_id: str, text: str) -> ToolResult:
    return {"toolUseId": call_id, "status": "error", "content": [{"text": text}]}


class _Told(Exception):
    """The call ends with this text as its error result (the model reads it)."""


class _Refused(Exception):
    """The server refused the retry's stored state: nothing was done with the answer."""
