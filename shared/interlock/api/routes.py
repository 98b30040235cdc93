"""The route table: one source of truth for API Gateway, the handlers and local mode.

Each route names the Lambda function that serves it. The CDK API stack builds its
resources and methods from this table, each handler registers exactly its own routes,
and the local server dispatches with it, so the three can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Function = Literal["run", "resume", "requests", "admin", "channels"]
Method = Literal["GET", "POST", "PUT", "DELETE"]


@dataclass(frozen=True, slots=True)
class Route:
    """One method on one path, served by one function."""

    method: Method
    path: str
    function: Function
    summary: str
    # False for the platforms' webhooks: they prove themselves with a signature or a
    # secret token, checked by the handler, since no Cognito token comes with them.
    authorized: bool = True


ROUTES: Final = (
    Route(
        "POST",
        "/runs",
        "run",
        "Start a turn, or answer its interrupts (AG-UI RunAgentInput, with `resume`); streams",
    ),
    Route(
        "POST",
        "/resume",
        "resume",
        "Answer the open request (a ResumeEntry per interrupt); streams",
    ),
    Route("GET", "/chats/{chat_id}/request", "requests", "The open request; issues a fresh secret"),
    Route("DELETE", "/chats/{chat_id}/request", "requests", "Cancel the open request"),
    Route("GET", "/chats/{chat_id}/turns", "requests", "The chat's saved turns"),
    Route("GET", "/chats/{chat_id}/approvals", "requests", "The chat's approved sites, packages"),
    Route("DELETE", "/chats/{chat_id}/approvals/{kind}/{name}", "requests", "Revoke one approval"),
    Route("GET", "/chats/{chat_id}/events", "requests", "The chat's audit trail"),
    Route("GET", "/inbox", "requests", "The caller's open requests in every chat, newest first"),
    Route("PUT", "/admin/approvals/{kind}/{name}", "admin", "Pre-approve for everyone (admin)"),
    Route("DELETE", "/admin/approvals/{kind}/{name}", "admin", "Remove a pre-approval (admin)"),
    Route(
        "PUT",
        "/admin/links/{channel}/{external_id}",
        "admin",
        "Link a Slack or Telegram account to a user (admin)",
    ),
    Route("DELETE", "/admin/links/{channel}/{external_id}", "admin", "Unlink an account (admin)"),
    Route(
        "POST",
        "/channels/slack/interactions",
        "channels",
        "Slack's interactivity webhook (signed by Slack)",
        authorized=False,
    ),
    Route(
        "POST",
        "/channels/telegram/webhook",
        "channels",
        "Telegram's bot webhook (with the secret token)",
        authorized=False,
    ),
)
FUNCTIONS: Final[tuple[Function, ...]] = ("run", "resume", "requests", "admin", "channels")
STREAMED: Final[frozenset[Function]] = frozenset({"run", "resume"})
"""The functions that stream their answers: an ASGI app under the Lambda Web Adapter
(`interlock.api.stream`), behind API Gateway methods in STREAM transfer mode."""


def routes_of(function: Function) -> tuple[Route, ...]:
    """The routes one function serves."""
    return tuple(route for route in ROUTES if route.function == function)
