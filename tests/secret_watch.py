"""A watch over secrets and logs, shared by the suite (see `tests/conftest.py`)."""

from __future__ import annotations

import logging
from typing import Any


class SecretWatch:
    """Remembers issued secrets and everything logged; finds one in the other."""

    def __init__(self) -> None:
        self.issued: set[str] = set()
        self.logged: list[str] = []

    def issue(self, value: Any) -> Any:
        if isinstance(value, str) and len(value) >= 8:
            self.issued.add(value)
        return value

    def record(self, record: logging.LogRecord) -> None:
        extras = {k: v for k, v in vars(record).items() if k not in _PLAIN_RECORD}
        self.logged.append(f"{record.getMessage()} {extras} {record.exc_text or ''}")

    def leaks(self) -> list[str]:
        text = "\n".join(self.logged)
        return sorted(value[:6] + "…" for value in self.issued if value in text)


_PLAIN_RECORD = set(vars(logging.makeLogRecord({})))
WATCH = SecretWatch()
