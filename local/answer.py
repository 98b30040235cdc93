"""Answer a chat's open request from the shell, in one line.

    .venv/bin/python -m local.answer <chat> approve|reject|cancel [--token T] [--url U]
    .venv/bin/python -m local.answer <chat> '{"answer": "Bullet points"}'

It reads the open request (which hands out its current secret), answers every
interrupt it holds with the one payload through the one AG-UI endpoint, and prints what
the agent said. The token defaults to `$TOKEN`, as `./dev serve` prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
import uuid
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8765"
WORDS = {"approve": {"decision": "approve"}, "reject": {"decision": "reject"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Answer a chat's open request.")
    parser.add_argument("chat")
    parser.add_argument("answer", help="approve, reject, cancel, or a JSON payload")
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--token", default=os.environ.get("TOKEN", ""))
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("no token: pass --token or export TOKEN as ./dev serve prints it")
    request = _call(args, "GET", f"/chats/{args.chat}/request")
    if request.get("state") != "pending":
        print(f"nothing to answer: the request is {request.get('state')}", file=sys.stderr)
        return 1
    status = "cancelled" if args.answer == "cancel" else "resolved"
    payload = WORDS.get(args.answer) if args.answer in WORDS else _payload(args.answer, status)
    asked = [request["interruptId"], *(a["interruptId"] for a in request.get("alsoAsked", []))]
    body = {
        "threadId": args.chat,
        "runId": f"run-{uuid.uuid4().hex[:12]}",
        "messages": [],
        "resume": [
            {
                "interruptId": interrupt,
                "status": status,
                "payload": payload,
                "metadata": {"secret": request["secret"]},
            }
            for interrupt in asked
        ],
    }
    events = _call(args, "POST", "/runs", body, stream=True)
    for event in events:
        if event.get("type") == "TEXT_MESSAGE_CONTENT":
            print(event["delta"])
        elif event.get("type") == "RUN_FINISHED":
            outcome = event.get("outcome") or {}
            if outcome.get("type") == "interrupt":
                count = len(outcome["interrupts"])
                print(f"the agent asks again ({count} open): run this command again")
    return 0


def _payload(text: str, status: str) -> Any:
    if status == "cancelled":
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # a plain answer to a question that takes any value


def _refusal(status: int, body: str) -> str:
    """The server's refusal in one line: its message, and its code."""
    try:
        error = json.loads(body)["error"]
        return f"refused ({status} {error['code']}): {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"refused ({status}): {body.strip()[:300]}"


def _call(
    args: argparse.Namespace, method: str, path: str, body: Any = None, stream: bool = False
) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        args.url.rstrip("/") + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {args.token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as failure:
        raise SystemExit(_refusal(failure.code, failure.read().decode())) from None
    except urllib.error.URLError as failure:
        reason = failure.reason
        raise SystemExit(f"cannot reach {args.url}: is ./dev serve running? ({reason})") from None
    if not stream:
        return json.loads(text)
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


if __name__ == "__main__":
    sys.exit(main())
