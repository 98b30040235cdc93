"""The JSON bodies the API answers with, as pydantic models.

Handlers render every JSON response through these models, and `interlock.api.openapi`
publishes their JSON Schemas, so the document and what is served cannot drift apart.
Plain pydantic, no AG-UI models: the requests function imports them and stays fast.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Each model's validator is built when it is first used, not at import: a function
# renders a handful of these bodies, and building all of them would cost its cold
# start some 15 ms.
_CONFIG = ConfigDict(frozen=True, defer_build=True)


class Body(BaseModel):
    """Base of every response body: frozen, camelCase on the wire where it says so."""

    model_config = ConfigDict(**_CONFIG, extra="forbid")

    def wire(self) -> dict[str, Any]:
        """The body as sent: unset optional fields left out."""
        return self.model_dump(mode="json", exclude_none=True)


class ErrorDetail(Body):
    code: str = Field(description="Stable error code; see docs/api.md's table")
    message: str
    holder: str | None = Field(default=None, description="The worker holding a claim")


class ErrorBody(Body):
    """Every refusal: a stable code and a message."""

    error: ErrorDetail


class AlsoAsked(BaseModel):
    """Another interrupt the same run paused on; one resume answers them all."""

    model_config = ConfigDict(**_CONFIG, extra="forbid")

    interruptId: str
    kind: Literal["approval", "question", "info"]
    card: dict[str, Any]
    responseSchema: dict[str, Any]
    toolCallId: str | None = None


class RequestView(Body):
    """A chat's open (or last) request, as a card (and any others of the same pause)."""

    interruptId: str
    kind: Literal["approval", "question", "info"]
    state: Literal["pending", "claimed", "done", "expired", "cancelled"]
    card: dict[str, Any]
    responseSchema: dict[str, Any]
    expiresAt: str
    toolCallId: str | None = None
    secret: str | None = Field(
        default=None, description="Answers it; each read issues a fresh one (its older copies stop)"
    )
    decision: str | None = None
    decisions: dict[str, str] | None = Field(
        default=None, description="Per interrupt id, what was decided on that card"
    )
    answeredAt: str | None = None
    answer: str | None = None
    endedReason: str | None = None
    decidedBy: str | None = Field(default=None, description="Who gave the recorded answer")
    decidedAt: str | None = None
    decided: str | None = Field(
        default=None,
        description='The recorded decision as a person reads it: "Approved by alice at 12:03 UTC"',
    )
    binding: bool | None = Field(
        default=None,
        description="The recorded answer was acted on: it stands, and another is refused",
    )
    interrupted: bool | None = Field(
        default=None,
        description="The run was interrupted after its answer and is being continued",
    )
    alsoAsked: list[AlsoAsked] = Field(
        default_factory=list,
        description="Other interrupts of the same pause: answer every one in one resume",
    )


class Turn(BaseModel):
    """One saved turn of the transcript."""

    model_config = ConfigDict(**_CONFIG, extra="allow")

    seq: int
    at_ms: int
    role: Literal["user", "assistant"]
    text: str


class Turns(Body):
    turns: list[Turn]


class ApprovalView(Body):
    kind: Literal["site", "package"]
    name: str
    cardId: str | None = None
    grantedAt: int
    grantedBy: str


class Approvals(Body):
    approvals: list[ApprovalView]
    preapproved: list[ApprovalView]


class Subject(Body):
    kind: Literal["site", "package"]
    name: str


class Revoked(Body):
    revoked: Subject


class Preapproved(Body):
    preapproved: Subject


class LinkView(Body):
    """A channel account and the user it answers cards as."""

    channel: Literal["slack", "telegram"]
    externalId: str
    userId: str
    roles: list[str]
    address: str = Field(default="", description="Where cards are posted; the account if empty")


class Linked(Body):
    linked: LinkView


class Unlinked(Body):
    unlinked: LinkView


class LinkInput(BaseModel):
    """The body of a link: which user the account acts as, with which roles."""

    model_config = ConfigDict(**_CONFIG, extra="forbid")

    userId: str = Field(min_length=1, max_length=128)
    roles: list[str] = Field(default_factory=list, max_length=16)
    address: str = Field(default="", max_length=128)


class InboxItem(Body):
    """An open request of the caller's, in any chat."""

    chatId: str
    interruptId: str
    kind: Literal["approval", "question", "info"]
    type: str = Field(description="The card's type (download, action, question, ...)")
    title: str = Field(description="What is asked, in one line")
    details: list[str] = Field(
        default_factory=list,
        description="What tells it apart: the tool and the arguments that matter, bounded",
    )
    risk: str | None = None
    state: Literal["pending", "claimed"]
    createdAt: str
    expiresAt: str
    questions: int = Field(description="Interrupts in the request; one resume answers all")


class Inbox(Body):
    requests: list[InboxItem]
    next: str | None = Field(
        default=None, description="Where the next page begins (`?page=`); absent on the last"
    )


class Acknowledged(Body):
    """A webhook delivery was received (what became of a tap is told to the tapper)."""


class AuditEvent(Body):
    chat_id: str
    seq: int
    type: str
    at_ms: int
    actor: str
    detail: dict[str, Any]


class Events(Body):
    events: list[AuditEvent]
