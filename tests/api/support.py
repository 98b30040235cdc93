"""Helpers for the handler tier: tokens, AG-UI bodies and parsed event streams."""

from __future__ import annotations

from typing import Any

from ag_ui.core import Event, RunAgentInput
from ag_ui.core.types import ResumeEntry
from pydantic import TypeAdapter

from local import devtokens

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


def auth(
    key: bytes, user: str = "alice", groups: tuple[str, ...] = ("reporter",)
) -> dict[str, str]:
    return {"Authorization": f"Bearer {devtokens.issue(key, user, groups)}"}


def stream(response: Any) -> list[Any]:
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Content-Type"].startswith("text/event-stream")
    lines = response.get_data(as_text=True).splitlines()
    return [EVENTS.validate_json(line[6:]) for line in lines if line.startswith("data: ")]


def run_body(chat: str, text: str) -> str:
    return RunAgentInput(
        thread_id=chat, run_id="r1", messages=[{"id": "m1", "role": "user", "content": text}]
    ).model_dump_json(by_alias=True)


def resume_body(chat: str, interrupt: Any, payload: Any, secret: str | None = None) -> str:
    entry = ResumeEntry(
        interrupt_id=interrupt.id,
        status="resolved",
        payload=payload,
        metadata={"secret": secret or interrupt.metadata["secret"]},
    )
    return RunAgentInput(thread_id=chat, run_id="r2", messages=[], resume=[entry]).model_dump_json(
        by_alias=True
    )
