"""The demo agent's scripted scenarios.

Each step is a function of the last tool results, so the script reacts to what really
happened (a refused download, an approval, a deny) the way a model would.
"""

from __future__ import annotations

import json

from interlock.agent import Block, Scenario

TABLE_URL = "https://data.example.org/reference/table.csv"
REPORT_TO = "team@example.org"


def _said(results: list[str], *words: str) -> bool:
    return any(word.lower() in text.lower() for text in results for word in words)


def _fetch(results: list[str]) -> list[Block]:
    return [
        {"text": "Let me fetch the reference table."},
        {"tool": "fetch_url", "input": {"url": TABLE_URL}},
    ]


def _ask_if_blocked(results: list[str]) -> list[Block]:
    if not _said(results, "not approved"):
        return _summarise(results)
    return [
        {
            "tool": "request_approval",
            "input": {
                "reason": "Download the reference table the analysis needs.",
                "urls": [TABLE_URL],
            },
        }
    ]


def _retry_if_approved(results: list[str]) -> list[Block]:
    if _said(results, "approved by the user"):
        return [{"tool": "fetch_url", "input": {"url": TABLE_URL}}]
    return [
        {
            "text": "I could not download the reference table, so I continued without it. "
            + " ".join(results)
        }
    ]


def _summarise(results: list[str]) -> list[Block]:
    first = results[0][:120] if results else "nothing"
    return [{"text": f"Done. The reference table begins: {first}"}]


def _send_report(results: list[str]) -> list[Block]:
    return [
        {
            "tool": "send_report",
            "input": {
                "recipient": REPORT_TO,
                "summary": "Weekly figures are ready.",
                "risk": "high",
            },
        }
    ]


def _report_outcome(results: list[str]) -> list[Block]:
    return [{"text": f"Report step finished: {' '.join(results)}"}]


def _batch(results: list[str]) -> list[Block]:
    return [
        {
            "tool": "request_approval",
            "input": {"reason": "Download the reference table.", "urls": [TABLE_URL]},
        },
        {"tool": "fetch_url", "input": {"url": TABLE_URL}},
        {
            "tool": "request_approval",
            "input": {
                "reason": "And the mirror.",
                "urls": ["https://mirror.example.net/table.csv"],
            },
        },
    ]


def _after_batch(results: list[str]) -> list[Block]:
    return [{"text": "Batch finished: " + " | ".join(results)}]


def _loop(results: list[str]) -> list[Block]:
    return [{"tool": "fetch_url", "input": {"url": "https://data.example.org/page"}}]


def _ask_format(results: list[str]) -> list[Block]:
    return [
        {
            "tool": "ask_user",
            "input": {
                "type": "single_choice",
                "prompt": "Which format should the summary use?",
                "options": ["Bullet points", "A short paragraph", "A table"],
                "default": "Bullet points",
            },
        }
    ]


def _ask_topics(results: list[str]) -> list[Block]:
    return [
        {
            "tool": "ask_user",
            "input": {
                "type": "multiple_choice",
                "prompt": "Which regions should the summary cover?",
                "options": ["North", "South", "East", "West"],
                "min_selections": 1,
                "max_selections": 2,
            },
        }
    ]


def _echo(results: list[str]) -> list[Block]:
    return [{"text": " ".join(_reply_to(r) for r in results) or "Noted."}]


_ANSWERED = "The user answered: "


def _reply_to(result: str) -> str:
    """What the analyst says back to an answer, in words rather than the tool's JSON."""
    if not result.startswith(_ANSWERED):
        return result  # a cancel or a timeout: the tool already says it plainly
    try:
        answer = json.loads(result.removeprefix(_ANSWERED))
    except ValueError:
        return "Noted."
    if set(answer) == {"answer"}:
        chosen = answer["answer"]
        said = ", ".join(map(str, chosen)) if isinstance(chosen, list) else str(chosen)
        return f"Thanks, I'll go with: {said}."
    given = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in answer.items())
    return f"Thanks, I have what I need ({given})."


def _ask_settings(results: list[str]) -> list[Block]:
    return [
        {
            "tool": "request_info",
            "input": {
                "reason": "The export needs the destination details.",
                "fields": [
                    {
                        "name": "bucket_name",
                        "label": "Destination bucket",
                        "type": "string",
                        "max_length": 63,
                    },
                    {
                        "name": "retention_days",
                        "label": "Retention in days",
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 365,
                    },
                    {
                        "name": "notify",
                        "label": "Email me when done",
                        "type": "boolean",
                        "required": False,
                    },
                ],
            },
        }
    ]


def _hello(results: list[str]) -> list[Block]:
    return [
        {
            "text": "Hello! Ask me to download the reference table, send the report, "
            "write a summary, pick regions, or run the export."
        }
    ]


DOWNLOAD = Scenario(
    "download",
    [_fetch, _ask_if_blocked, _retry_if_approved, _summarise],
    keywords=("download", "table", "fetch"),
)
REPORT = Scenario("report", [_send_report, _report_outcome], keywords=("report",))
BATCH = Scenario("batch", [_batch, _after_batch], keywords=("batch",))
RUNAWAY = Scenario("runaway", [_loop] * 50, keywords=("forever", "runaway"))
QUESTION = Scenario("question", [_ask_format, _echo], keywords=("summary", "question"))
REGIONS = Scenario("regions", [_ask_topics, _echo], keywords=("regions",))
INFO = Scenario("info", [_ask_settings, _echo], keywords=("export", "settings"))
HELLO = Scenario("hello", [_hello])

DEMO_SCENARIOS = (HELLO, DOWNLOAD, REPORT, BATCH, RUNAWAY, REGIONS, QUESTION, INFO)
