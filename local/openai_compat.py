"""A local OpenAI-compatible endpoint: streaming chat completions on 127.0.0.1, played
from a script.

It answers `POST /v1/chat/completions` with `stream: true` as vLLM, Ollama or a hosted
service does: server-sent events of `chat.completion.chunk` objects (text deltas, tool
calls with their arguments in pieces, a `finish_reason`, a last chunk with `usage`), then
`data: [DONE]`. Strands' own `OpenAIModel` and the `openai` SDK run against it
unchanged. What the model says is what the scripted model
(`interlock.harness.model.ScriptedModel`) says for the same conversation: the OpenAI
messages are read back into Strands' shape, so the analyst demo plays through it.

Failures come as such endpoints send them, chosen by the model name:

- `...-too-long`: HTTP 400 `context_length_exceeded` (Strands: context overflow);
- `...-refused`: HTTP 400 with a plain message (a content filter, say).

A key given to `serving` is checked on every request (HTTP 401 otherwise).

    .venv/bin/python -m local.openai_compat [--port 8767] [--key K] [--scenarios M:NAME | --tools]

Started from the checkout's root, like `local.bedrock`, and plays scenarios (or, with
`--tools`, the tools stand-in) the same way.

Point a local server at it with `INTERLOCK_MODEL=openai:http://127.0.0.1:8767/v1#<model>`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Final

from strands.models.model import Model

from local.bedrock import Hold, Played, QuietServer, Recorded, add_played, played, stand_in

_MAX_BODY: Final = 16 * 1024 * 1024


def strands_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages as Strands messages (what the scripted model reads): text,
    tool calls as `toolUse`, and each run of tool messages as one user message of
    `toolResult` blocks. System messages are left out."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            out.append({"role": "user", "content": [{"text": _text(message.get("content"))}]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if text := _text(message.get("content")):
                blocks.append({"text": text})
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                arguments = json.loads(function.get("arguments") or "{}")
                use = {
                    "toolUseId": call.get("id"),
                    "name": function.get("name"),
                    "input": arguments,
                }
                blocks.append({"toolUse": use})
            out.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            result = {
                "toolUseId": message.get("tool_call_id"),
                "content": [{"text": _text(message.get("content"))}],
                "status": "success",
            }
            if out and out[-1]["role"] == "user" and "toolResult" in out[-1]["content"][0]:
                out[-1]["content"].append({"toolResult": result})
            else:
                out.append({"role": "user", "content": [{"toolResult": result}]})
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def chunks(events: Sequence[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """Strands stream events as `chat.completion.chunk` objects, the usage chunk last."""
    made = int(time.time())
    base = {"id": "chatcmpl-local", "object": "chat.completion.chunk", "created": made}
    out: list[dict[str, Any]] = []
    calls = -1
    usage: dict[str, int] | None = None

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {**base, "model": model, "choices": [choice]}

    for event in events:
        start = event.get("contentBlockStart", {}).get("start", {})
        delta = event.get("contentBlockDelta", {}).get("delta", {})
        if "toolUse" in start:
            calls += 1
            use = start["toolUse"]
            call = {"index": calls, "id": use["toolUseId"], "type": "function"}
            out.append(chunk({"tool_calls": [{**call, "function": {"name": use["name"]}}]}))
        elif "text" in delta:
            out.append(chunk({"role": "assistant", "content": delta["text"]}))
        elif "toolUse" in delta:
            piece = {"index": calls, "function": {"arguments": delta["toolUse"]["input"]}}
            out.append(chunk({"tool_calls": [piece]}))
        elif "messageStop" in event:
            stop = event["messageStop"].get("stopReason")
            out.append(chunk({}, "tool_calls" if stop == "tool_use" else "stop"))
        elif "metadata" in event:
            tokens = event["metadata"].get("usage", {})
            usage = {
                "prompt_tokens": tokens.get("inputTokens", 0),
                "completion_tokens": tokens.get("outputTokens", 0),
                "total_tokens": tokens.get("totalTokens", 0),
            }
    if usage is not None:
        out.append({**base, "model": model, "choices": [], "usage": usage})
    return out


class _Handler(BaseHTTPRequestHandler):
    scenarios: Played
    recorded: Recorded
    hold: Hold
    key: str | None

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._error(404, "not_found", "no such route")
        if self.key is not None and self.headers.get("Authorization") != f"Bearer {self.key}":
            return self._error(401, "invalid_api_key", "Incorrect API key provided.")
        length = int(self.headers.get("Content-Length", "0"))
        if length > _MAX_BODY:
            return self._error(413, "request_too_large", "the request is too large")
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return self._error(400, "invalid_json", "the body is not JSON")
        model, messages = str(body.get("model", "")), body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._error(400, "invalid_request_error", "messages: at least one is required")
        self.recorded.add(model, body)
        self.hold.wait_if_held()
        if model.endswith("-too-long"):
            return self._error(
                400,
                "context_length_exceeded",
                "This model's maximum context length is 8192 tokens.",
            )
        if model.endswith("-refused"):
            return self._error(400, "content_filter", "The response was filtered.")
        specs = tool_specs(body.get("tools"))
        answering = stand_in(self.scenarios)
        events = asyncio.run(_collect(answering, strands_messages(messages), specs))
        self._stream(chunks(events, model))

    def _stream(self, pieces: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for piece in pieces:
            self.wfile.write(f"data: {json.dumps(piece)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True

    def _error(self, status: int, code: str, message: str) -> None:
        raw = json.dumps(
            {"error": {"message": message, "type": "invalid_request_error", "code": code}}
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        return


async def _collect(model: Model, messages: Any, specs: Any = None) -> list[dict[str, Any]]:
    return [dict(event) async for event in model.stream(messages, specs)]


def tool_specs(tools: Any) -> list[dict[str, Any]]:
    """The request's `tools` (OpenAI functions) as Strands tool specs."""
    specs = []
    for offered in tools or []:
        function = offered.get("function") if isinstance(offered, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            specs.append(
                {
                    "name": function["name"],
                    "description": function.get("description") or "",
                    "inputSchema": {"json": function.get("parameters") or {}},
                }
            )
    return specs


@dataclass
class LocalOpenAI:
    """A running fake: its base URL (for `openai:<base url>#<model>`) and what it was sent."""

    base_url: str
    recorded: Recorded
    hold: Hold


@contextmanager
def serving(scenarios: Played, port: int = 0, key: str | None = None) -> Iterator[LocalOpenAI]:
    """Serve the fake on 127.0.0.1 (`port` 0: any free one) until the block ends,
    playing `scenarios` (None: the tools stand-in)."""
    recorded, hold = Recorded(), Hold()
    handler = type(
        "Handler",
        (_Handler,),
        {"scenarios": scenarios, "recorded": recorded, "hold": hold, "key": key},
    )
    server = QuietServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, name="local-openai", daemon=True)
    thread.start()
    try:
        yield LocalOpenAI(f"http://127.0.0.1:{server.server_port}/v1", recorded, hold)
    finally:
        hold.release()
        server.shutdown()
        server.server_close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local OpenAI-compatible endpoint.")
    parser.add_argument("--port", type=int, default=8767)
    parser.add_argument("--key", help="the API key it accepts (default: any)")
    add_played(parser)
    args = parser.parse_args(argv)
    with serving(played(parser, args), args.port, args.key) as running:
        print(f"READY {running.base_url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
