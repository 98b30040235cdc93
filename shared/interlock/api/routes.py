"""The route table: one source of truth for API Gateway, the handlers and local mode.

Each route names the Lambda function that serves it and the access rule it follows
(`interlock.access.Rule`: who may call it). The CDK API stack builds its resources and
methods from this table, each handler registers exactly its own routes, the local
server dispatches with it, and the route-by-caller tests hold each route to its rule,
so none of them can disagree and no route is added without saying who may call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from interlock.access import Rule

Function = Literal["run", "resume", "requests", "admin", "channels"]
Method = Literal["GET", "POST", "PUT", "DELETE"]


@dataclass(frozen=True, slots=True)
class Route:
    """One method on one path, served by one function."""

    method: Method
    path: str
    function: Function
    rule: Rule
    summary: str

    @property
    def authorized(self) -> bool:
        """Whether a Cognito token comes with the request. Not for the platforms'
        webhooks: they prove themselves with a signature or a secret token, checked by
        the handler."""
        return self.rule != "signed"


ROUTES: Final = (
    Route(
        "POST",
        "/runs",
        "run",
        "answerer",
        "Start a turn, or answer its interrupts (AG-UI RunAgentInput, with `resume`); streams",
    ),
    Route(
        "POST",
        "/resume",
        "resume",
        "answerer",
        "Answer the open request (a ResumeEntry per interrupt); streams",
    ),
    Route(
        "GET",
        "/chats/{chat_id}/request",
        "requests",
        "answerer",
        "The open request; issues a fresh secret",
    ),
    Route("DELETE", "/chats/{chat_id}/request", "requests", "owner", "Cancel the open request"),
    Route("GET", "/chats/{chat_id}/turns", "requests", "owner", "The chat's saved turns"),
    Route(
        "GET",
        "/chats/{chat_id}/approvals",
        "requests",
        "owner",
        "The chat's approved sites, packages",
    ),
    Route(
        "DELETE",
        "/chats/{chat_id}/approvals/{kind}/{name}",
        "requests",
        "owner",
        "Revoke one approval",
    ),
    Route("GET", "/chats/{chat_id}/events", "requests", "owner", "The chat's audit trail"),
    Route(
        "GET", "/inbox", "requests", "own", "The caller's open requests in every chat, newest first"
    ),
    Route(
        "PUT",
        "/admin/approvals/{kind}/{name}",
        "admin",
        "admin",
        "Pre-approve for everyone (admin)",
    ),
    Route(
        "DELETE",
        "/admin/approvals/{kind}/{name}",
        "admin",
        "admin",
        "Remove a pre-approval (admin)",
    ),
    Route(
        "PUT",
        "/admin/links/{channel}/{external_id}",
        "admin",
        "admin",
        "Link a Slack or Telegram account to a user (admin)",
    ),
    Route(
        "DELETE",
        "/admin/links/{channel}/{external_id}",
        "admin",
        "admin",
        "Unlink an account (admin)",
    ),
    Route(
        "POST",
        "/channels/slack/interactions",
        "channels",
        "signed",
        "Slack's interactivity webhook (signed by Slack)",
    ),
    Route(
        "POST",
        "/channels/telegram/webhook",
        "channels",
        "signed",
        "Telegram's bot webhook (with the secret token)",
    ),
)
FUNCTIONS: Final[tuple[Function, ...]] = ("run", "resume", "requests", "admin", "channels")
STREAMED: Final[frozenset[Function]] = frozenset({"run", "resume"})
"""The functions that stream their answers: an ASGI app under the Lambda Web Adapter
(`interlock.api.stream`), behind API Gateway methods in STREAM transfer mode."""


def routes_of(function: Function) -> tuple[Route, ...]:
    """The routes one function serves."""
    return tuple(route for route in ROUTES if route.function == function)
