"""Answering from team chat and phones: links, taps, and the messages that carry cards.

A channel (Slack, Telegram) shows an open request as a message with buttons and turns a
button press into a `Tap`. The person behind a tap is whoever an administrator linked
the channel account to (`Link`); identity never comes from the message. Button data is
self-contained (`button_data`): the chat, a fingerprint of the interrupt and the choice,
so a webhook routes a tap without a lookup.

Domain only: the HTTP clients and signature checks live in `interlock.adapters.slack`
and `interlock.adapters.telegram`, the records in `interlock.adapters.channelstore`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from interlock import errors
from interlock.cards import ACTION, DOWNLOAD, redact
from interlock.elicitation import is_mcp
from interlock.interrupts import schema_fields
from interlock.keys import checked_id
from interlock.records import RequestRecord

ChannelName = Literal["slack", "telegram"]
CHANNELS: Final[tuple[ChannelName, ...]] = ("slack", "telegram")
# Telegram's limit on a button's callback data, which Slack's (2,000) also meets.
MAX_BUTTON_BYTES: Final = 64
_VERSION: Final = "i1"
# Arguments of a call shown in a chat card; the card page shows them all.
_MAX_ARGUMENTS: Final = 6
_FINGERPRINT_CHARS: Final = 8


@dataclass(frozen=True, slots=True)
class Link:
    """A channel account an administrator linked to an Interlock user.

    Attributes:
        channel: slack or telegram.
        external_id: The platform's user id (Slack `U…`, Telegram's numeric id).
        user_id: The Interlock user the account acts as.
        roles: That user's roles, as the administrator granted them for taps.
        address: Where the user's cards are posted (a Slack channel or DM, a Telegram
            chat); the account itself when empty.
    """

    channel: ChannelName
    external_id: str
    user_id: str
    roles: frozenset[str] = frozenset()
    address: str = ""

    @property
    def destination(self) -> str:
        return self.address or self.external_id


@dataclass(frozen=True, slots=True)
class Tap:
    """A verified button press (or form) from a channel.

    Attributes:
        channel: Where it came from.
        external_id: Who pressed it, as the platform says (signed by the platform).
        chat_id: The chat whose request it answers.
        fingerprint: The interrupt's fingerprint the button carried.
        status: resolved, or cancelled.
        payload: The answer typed in a form; None for a button (see `choice`).
        choice: The button pressed (`answer_for` reads it against the card).
        reply: How to tell the tapper the outcome (the platform's reply handle).
    """

    channel: ChannelName
    external_id: str
    chat_id: str
    fingerprint: str
    status: Literal["resolved", "cancelled"]
    payload: Any
    choice: str | None = None
    reply: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A Decline press is a refusal whichever platform carried it: it answers with
        # status cancelled (MCP's decline), never with an empty form that would be
        # an accept.
        if self.choice in DECLINES:
            object.__setattr__(self, "status", "cancelled")


@dataclass(frozen=True, slots=True)
class Notice:
    """The message that carries one interrupt's card on one channel: reserved, posted,
    then edited once the request settles. It is the key both deliveries are kept under,
    so each happens at most once and a failed or interrupted one is retried.

    Attributes:
        channel: Where it is posted.
        interrupt_id: The card it carries.
        ref: The platform's reference to the message; None until it was posted.
        user_id: Whose linked account it is posted to.
        edit_text: How the card reads once its request settled; None while it is open.
        done: Nothing more to deliver (edited, or the request ended before a post).
        tries: Delivery attempts begun so far.
        attempt_until_ms: Until when the attempt in flight holds it, if one does.
        give_up_ms: When retrying stops (the notice's own retention).
        title: What the card asks, kept in the message once it settled.
        due_ms: When the finder should next look at it; None once it is done.
        reserved_ms: When its post was reserved: no attempt sent it earlier.
    """

    channel: ChannelName
    interrupt_id: str
    ref: dict[str, Any] | None = None
    user_id: str = ""
    edit_text: str | None = None
    done: bool = False
    tries: int = 0
    attempt_until_ms: int | None = None
    give_up_ms: int = 0
    due_ms: int | None = None
    title: str = ""
    reserved_ms: int = 0

    def in_flight(self, now_ms: int) -> bool:
        """Whether another attempt holds it now (its outcome is not known yet)."""
        return self.attempt_until_ms is not None and self.attempt_until_ms >= now_ms


class Channel(Protocol):
    """What Interlock needs from a chat platform."""

    name: ChannelName

    def post(self, link: Link, request: RequestRecord, page_url: str | None) -> dict[str, Any]:
        """Post the request's card for `link`; returns the message's reference."""
        ...

    def settle(self, ref: dict[str, Any], text: str) -> None:
        """Replace the card's message with how it ended (its buttons go)."""
        ...

    def find(self, link: Link, chat_id: str, notice: Notice) -> dict[str, Any] | None:
        """The reference of the message an earlier attempt posted for `notice` (the
        card of `notice.interrupt_id` in `chat_id`, sent to `link`) when the platform
        lets it be found again; None when it finds none, or cannot look."""
        ...

    def tell(self, tap: Tap, text: str) -> None:
        """Tell the tapper (only them) what became of their tap."""
        ...


def card_link(page_url: str, chat_id: str) -> str:
    """The card page opened on the chat whose card a message carries (`?chat=`), keeping
    whatever query the page's URL already has."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(page_url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "chat"] + [("chat", chat_id)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def fingerprint(interrupt_id: str) -> str:
    """A short, stable fingerprint of an interrupt id (it fits in a button)."""
    return hashlib.sha256(interrupt_id.encode()).hexdigest()[:_FINGERPRINT_CHARS]


def button_data(chat_id: str, interrupt_id: str, choice: str) -> str:
    """What a button carries: `i1|<choice>|<fingerprint>|<chat>`.

    Raises:
        InvalidInput: it would not fit Telegram's 64 bytes (a chat id that long cannot
            be answered with buttons; the message links to the card page instead).
    """
    data = f"{_VERSION}|{choice}|{fingerprint(interrupt_id)}|{chat_id}"
    if len(data.encode()) > MAX_BUTTON_BYTES:
        raise errors.InvalidInput("the chat id is too long for a button")
    return data


def read_button(data: str) -> tuple[str, str, str]:
    """`(choice, fingerprint, chat_id)` from a button's data.

    Raises:
        InvalidInput: not a button Interlock made.
    """
    parts = data.split("|", 3)
    if len(parts) != 4 or parts[0] != _VERSION or len(parts[2]) != _FINGERPRINT_CHARS:
        raise errors.InvalidInput("not an Interlock button")
    _, choice, print_, chat = parts
    return choice, print_, checked_id(chat, "chat id")


def interrupt_for(request: RequestRecord, print_: str) -> str | None:
    """The request's interrupt whose fingerprint a button carried, if it holds one."""
    return next(
        (a.interrupt_id for a in request.asked if fingerprint(a.interrupt_id) == print_), None
    )


def outcome_text(decision: str | None, who: str | None, at_s: int | None, source: str) -> str:
    """How a settled card reads in the channel: "Approved by alice at 12:03 UTC (Slack)"."""
    import time

    word = {
        "approved": "Approved",
        "rejected": "Denied",
        "rejected_with_feedback": "Denied with feedback",
        "answered": "Answered",
        "cancelled": "Cancelled",
        "dismissed": "Dismissed",
        "expired": "Expired",
        "given_up": "Given up",
        "timed_out": "Timed out",
    }.get(decision or "", (decision or "Settled").replace("_", " ").capitalize())
    parts = [word]
    if who:
        parts.append(f"by {who}")
    if at_s:
        parts.append("at " + time.strftime("%H:%M UTC", time.gmtime(at_s)))
    if source:
        parts.append(f"({source})")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class ChannelCard:
    """A card as a chat message: Interlock's own header and facts, the words of whoever
    asked kept apart, and the buttons that answer it. Text only: no markup.

    Attributes:
        title: The card's question in one line, in its own words (the agent's; for an
            action, Interlock's): what the message keeps once settled, labelled there.
        details: Facts Interlock checked, a line each (the tool, the arguments, the
            risk, URLs, packages).
        buttons: `(label, choice)`; `choice` goes into the button's data.
        form: True when some answers need typing (a reason, free text, fields): Slack
            opens a form for them, Telegram points to the card page.
        header: Interlock's own line saying what is asked ("Approval needed: Send
            report"); never built from the agent's words.
        said: The agent's words, in one line, shown apart from the facts under
            `speaker`; empty when the card has none (an action's reason is Interlock's).
        speaker: Whose words `said` are, as its label says ("The agent says:").
    """

    title: str
    details: tuple[str, ...]
    buttons: tuple[tuple[str, str], ...]
    form: bool
    header: str
    said: str
    speaker: str


APPROVE: Final = "a"
REJECT: Final = "r"
FORM: Final = "f"
# Approve with the arguments the tool's policy lets a person change, typed in a form
# (`edit_fields`): where a channel has no forms, the card page takes the change.
EDIT: Final = "e"
_OPTION: Final = "o"
# A message carrying several cards answers them together (a run that paused on several
# interrupts resumes once, with every answer): all approved, all denied, or one form.
APPROVE_ALL: Final = "A"
DENY_ALL: Final = "R"
ANSWER_ALL: Final = "m"
# An MCP server's question is declined with a button of its own (`elicitation`): one
# card's, or every card's when all of a message's cards are the server's questions.
DECLINE: Final = "d"
DECLINE_ALL: Final = "D"
DECLINES: Final = frozenset({DECLINE, DECLINE_ALL})
GROUP_CHOICES: Final = frozenset({APPROVE_ALL, DENY_ALL, ANSWER_ALL, DECLINE_ALL})
# Set the whole request aside without answering it, as the card page's Dismiss does
# (`interlock.respond`): its own user's word only, one button for a message of any cards.
DISMISS: Final = "x"
DISMISS_LABEL: Final = "Dismiss"
# What a dismissed card's posts and its tapper are told: the page's own words for it.
DISMISSED_CHOSEN: Final = f"Chosen: {DISMISS_LABEL}"
NOTHING_DONE: Final = "nothing it asked about was done"


def channel_card(card: dict[str, Any]) -> ChannelCard:
    """How one interrupt's card reads in a chat message (text only: no markup).

    The header and the details are Interlock's; the agent's words go in `said` alone,
    for the channel to show labelled and inert (never as the header, bold or a link).
    """
    kind = card.get("type")
    reason = _line(card.get("reason") or "The agent needs your decision.")
    details: list[str] = []
    if card.get("tool") and kind not in ("question", "info"):
        details.append(f"Tool: {_human(card['tool'])}")
    # What the call would do, so nobody approves blind: the arguments, bounded.
    summary = card.get("summary") if kind != DOWNLOAD else None
    if isinstance(summary, dict):
        details += [
            f"{_human(str(key))}: {_line(_shown(value), 120)}"
            for key, value in list(summary.items())[:_MAX_ARGUMENTS]
        ]
    if card.get("risk"):
        details.append(f"Risk: {card['risk']}")
    for url in card.get("urls", [])[:5]:
        details.append(f"URL: {_scrubbed(url)}")
    for name in card.get("packages", [])[:10]:
        details.append(f"Package: {name}")
    # An action's reason is Interlock's own sentence, which the header already says.
    said = "" if kind == ACTION else reason
    buttons: tuple[tuple[str, str], ...] = (
        ("Approve", APPROVE),
        ("Deny", REJECT),
        ("Deny with feedback…", FORM),
    )
    form = True
    if kind == "question":
        options = list(card.get("options") or [])
        if card.get("question_type") == "single_choice" and options:
            buttons = tuple((_line(o, 30), f"{_OPTION}{i}") for i, o in enumerate(options[:10]))
            form = False
        else:
            buttons = (("Answer…", FORM),)
    elif kind in ("info", "interrupt"):
        buttons = _fill_in(card)
    elif card.get("editable") and kind != DOWNLOAD:
        # A download card's lists are changed on the card page only: chat keeps its
        # buttons to Approve and Deny.
        buttons = (*buttons[:2], ("Change and approve…", EDIT), *buttons[2:])
    return ChannelCard(
        reason, tuple(details), buttons, form, card_header(card), said, speaker(card)
    )


def card_header(card: dict[str, Any]) -> str:
    """Interlock's own line for a card: what kind of answer it needs and, for a call,
    the tool (named by Interlock, not described by the agent)."""
    kind = card.get("type")
    tool = _human(str(card["tool"])) if card.get("tool") else ""
    if kind == DOWNLOAD:
        return "Approval needed: downloads"
    if kind == "question":
        return "Question from the agent"
    if kind == "info":
        return "Details needed"
    if kind == "interrupt":
        return f"Answer needed: {tool}" if tool else "Answer needed"
    return f"Approval needed: {tool}" if tool else "Approval needed"


def speaker(card: dict[str, Any]) -> str:
    """The label of a card's own words: whose they are (an MCP server's input request
    carries the server's words, not the agent's)."""
    return "The tool server says:" if is_mcp(card) else "The agent says:"


def _fill_in(card: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The buttons of a card answered with fields: an MCP server's question can also be
    declined outright, which a form sent with its box unticked would not say."""
    if is_mcp(card):
        return (("Fill in…", FORM), ("Decline", DECLINE))
    return (("Fill in…", FORM),)


def group_buttons(request: RequestRecord, *, form: bool) -> tuple[tuple[str, str], ...]:
    """The buttons of a message carrying several cards, each answering all of them:
    approve all and deny all when every card is an approval, and, where the channel
    has forms (`form`), one form with a field per card."""
    # The answer rules (pydantic) load on first use, as in every renderer of cards: the
    # requests function's cold start imports this module and must not pay for them.
    from interlock.answers import kind_of

    buttons: list[tuple[str, str]] = []
    if all(kind_of(asked.card) == "approval" for asked in request.asked):
        buttons += [("Approve all", APPROVE_ALL), ("Deny all", DENY_ALL)]
    if form:
        buttons.append(("Answer each…", ANSWER_ALL))
    if all(is_mcp(asked.card) for asked in request.asked):
        buttons.append(("Decline all", DECLINE_ALL))
    return tuple(buttons)


def dismiss_buttons(request: RequestRecord) -> tuple[tuple[str, str], ...]:
    """The Dismiss button a message of `request` offers beside its answers: none when
    every card is an MCP server's question, which is declined instead (the server hears
    a decline; a dismiss would tell it nothing), as on the card page."""
    if all(is_mcp(asked.card) for asked in request.asked):
        return ()
    return ((DISMISS_LABEL, DISMISS),)


def group_answers(
    request: RequestRecord, choice: str, values: dict[str, Any]
) -> list[tuple[str, Any]]:
    """`(interrupt id, answer)` for every card of `request`, from a group button or the
    group form (whose fields are named `<card index>.<field>`); validated later.

    Raises:
        InvalidInput: not a group choice.
    """
    if choice in (APPROVE_ALL, DENY_ALL):
        decision = "approve" if choice == APPROVE_ALL else "reject"
        return [(asked.interrupt_id, {"decision": decision}) for asked in request.asked]
    if choice == DECLINE_ALL and all(is_mcp(asked.card) for asked in request.asked):
        # The tap's status says decline (`Tap`); there are no fields to send.
        return [(asked.interrupt_id, None) for asked in request.asked]
    if choice != ANSWER_ALL:
        raise errors.InvalidInput("this message has no such button")
    return [
        (asked.interrupt_id, form_answer(asked.card, card_values(values, index)))
        for index, asked in enumerate(request.asked)
    ]


def card_values(values: dict[str, Any], index: int) -> dict[str, Any]:
    """The group form's fields of one card, by their own names."""
    prefix = f"{index}."
    return {k.removeprefix(prefix): v for k, v in values.items() if k.startswith(prefix)}


def group_problems(request: RequestRecord, values: dict[str, Any]) -> dict[int, str]:
    """What is wrong with the group form's answers, per card index (empty: nothing), so
    the form can say it beside the card while it is still open."""
    from interlock.answers import decide

    problems: dict[int, str] = {}
    for index, asked in enumerate(request.asked):
        try:
            decide(asked.card, "resolved", form_answer(asked.card, card_values(values, index)))
        except errors.InvalidInput as bad:
            problems[index] = str(bad)
    return problems


def numbered(title: str, index: int, count: int) -> str:
    """A card's title, with its place among several ("2 of 3: …")."""
    return f"{index + 1} of {count}: {title}" if count > 1 else title


def asked_line(request: RequestRecord) -> str:
    """Who asked and until when it can be answered: "Asked by alice · answer by Mon 7
    Dec, 12:03 UTC"."""
    return f"Asked by {request.user_id} · answer by {deadline_text(request.expires_at)}"


_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS: Final = (
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "May",
    "Jun",
    "Jul",
    "Aug",
    "Sep",
    "Oct",
    "Nov",
    "Dec",
)


def deadline_text(at_s: int) -> str:
    """A deadline as people read it, always with its day: "Mon 7 Dec, 08:08 UTC".

    A time alone reads as today's, so a card open for a day would look due now; the
    names are spelled here, not by the locale, so every server writes the same words.
    """
    import time

    t = time.gmtime(at_s)
    day = f"{_DAYS[t.tm_wday]} {t.tm_mday} {_MONTHS[t.tm_mon - 1]}"
    return f"{day}, {t.tm_hour:02d}:{t.tm_min:02d} UTC"


def settled_text(title: str, outcome: str) -> str:
    """A settled card's message: what it asked kept (`kept_text`), the outcome under it
    (its last line, with what was chosen above it: `chosen_text`); `settled_lines`
    reads it back by its first and last lines."""
    return f"{title}\n{outcome}" if title else outcome


# A settled message's kept question is labelled: it is in the asker's words.
ASKED_LABEL: Final = "Asked:"


def settled_lines(text: str) -> tuple[str, tuple[str, ...], str]:
    """`(asked, facts, outcome)` of a settled card's message (`settled_text`): the
    question it kept, labelled (so the asker's words never stand alone as the message's
    first line; empty when none was kept), the lines between (the facts the card
    showed, then what was chosen), and the outcome, its last line."""
    first, *rest = text.split("\n")
    if not rest:  # nothing was kept above the outcome
        return "", (), first
    *middle, outcome = rest
    return (f"{ASKED_LABEL} {first}" if first else "", tuple(middle), outcome)


# A settled message keeps at most this much of what the card showed (the facts after the
# question): well inside a chat message.
_MAX_KEPT_CHARS: Final = 1500


def kept_text(request: RequestRecord) -> str:
    """What a card's message keeps once it settled: its question (every card's, on one
    line) and, under it, the facts it showed (the tool, the arguments), so the settled
    message still says what was decided. For several cards each card's facts follow
    Interlock's numbered header for it."""
    cards = [channel_card(asked.card) for asked in request.asked]
    lines = [" / ".join(card.title for card in cards)[:300]]
    budget = _MAX_KEPT_CHARS
    for index, card in enumerate(cards):
        head = [numbered(card.header, index, len(cards))] if len(cards) > 1 else []
        for fact in [*head, *card.details]:
            line = " ".join(fact.split())  # a line each: the settled message is read by line
            budget -= len(line) + 1
            if budget < 0:
                return "\n".join(lines)  # whole lines only: a cut fact could mislead
            lines.append(line)
    return "\n".join(lines)


# A settled message says what was chosen in at most this much (whole lines): it is read
# beside the facts it kept, within a chat message's limits.
_MAX_CHOSEN_CHARS: Final = 800


def chosen_text(request: RequestRecord, responses: Mapping[str, Any]) -> str:
    """What was chosen on each card of `request`, a line each (`chosen_line`), for its
    settled message: numbered as the cards are when there are several, and empty when
    nothing was (nobody answered in time). `responses` are the answers as the claim
    recorded them, by interrupt id (`Answers.responses`, `RequestRecord.response`)."""
    lines: list[str] = []
    budget = _MAX_CHOSEN_CHARS
    for index, asked in enumerate(request.asked):
        said = chosen_line(asked.card, responses.get(asked.interrupt_id))
        if not said:
            continue
        line = numbered(said, index, len(request.asked))
        budget -= len(line) + 1
        if budget < 0:
            break  # whole lines only, as the kept facts are
        lines.append(line)
    return "\n".join(lines)


def recorded_chosen(request: RequestRecord) -> str:
    """`chosen_text` of the answers `request` recorded (its `response`): what a record
    read for another reason already says, so saying it costs no read. Empty when it
    recorded none."""
    try:
        recorded = json.loads(request.response or "")
    except ValueError:
        return ""
    return chosen_text(request, recorded) if isinstance(recorded, dict) else ""


# The statuses a response is recorded with when no answer was given (`answers.decide`,
# the sweeper's timeouts).
_STATUSES: Final = frozenset({"cancelled", "timed_out", "default"})


def chosen_line(card: Mapping[str, Any], response: Any) -> str:
    """What one card's recorded answer chose, as its card offered it: "Chosen: Approve",
    "Chosen: Deny · Reason: “…”", "Chosen: Evening" for a button or an option, "Answer:
    …" for what was typed or filled in (`answer_words`), "Chosen: Decline" for an MCP
    server's question declined, "Default used: …" when the timeout's default answered.
    Empty when nobody chose anything (a timeout, a cancel)."""
    status = response.get("status") if isinstance(response, Mapping) else None
    if status in _STATUSES and set(response) <= {"status", "answer"}:
        if status == "default":
            return _line(f"Default used: {_words(response.get('answer'))}")
        if status == "cancelled":
            return "Chosen: Decline" if is_mcp(card) else ""
        return ""  # timed out: nobody chose
    words = answer_words(card, response)
    if not words:
        return ""
    kind = card.get("type")
    if kind not in ("question", "info", "interrupt") or card.get("question_type") in (
        "single_choice",
        "multiple_choice",
    ):
        return f"Chosen: {words}"  # a button or options offered: one was pressed or ticked
    return f"Answer: {words}"


def answer_words(card: Mapping[str, Any], answer: Any) -> str:
    """An answer as a person reads it, in the words its card showed (the card page's
    history says it the same way): an approval's button ("Approve", "Deny with
    feedback") with the reason given or the arguments changed, the option chosen, the
    options ticked, or each field under its form's label ("Volunteers: 4; Bring cold
    boxes: yes"); never a field's key or a raw object. Sensitive fields are masked and
    long text is cut, as in the card's own facts (`cards.redact`)."""
    if answer is None:
        return ""
    if not isinstance(answer, Mapping):
        return _line(_words(answer))
    if card.get("type") not in ("question", "info", "interrupt") and "decision" in answer:
        return _decision_words(card, answer)
    if card.get("type") == "question" and "answer" in answer:
        return _line(_words(answer["answer"]))
    # An MCP server's answer is recorded inside `content` (`elicitation.recorded`).
    content = answer.get("content")
    fields = content if set(answer) == {"content"} and isinstance(content, Mapping) else answer
    labels = _field_labels(card)
    shown = redact({str(k): v for k, v in fields.items() if k not in ("decision", "fingerprint")})
    # In the form's order, not the record's (its keys are sorted).
    place = {name: index for index, name in enumerate(labels)}
    ordered = sorted(shown.items(), key=lambda item: place.get(item[0], len(place)))
    return _line("; ".join(f"{labels.get(k) or _human(k)}: {_words(v)}" for k, v in ordered))


def _decision_words(card: Mapping[str, Any], answer: Mapping[str, Any]) -> str:
    """An approval's answer by the button that gives it, with what came with it."""
    if answer.get("decision") == "approve":
        changes = _changes_words(card, answer)
        return _line(f"Approve with changes: {changes}" if changes else "Approve")
    parts = ["Deny with feedback" if answer.get("suggestion") else "Deny"]
    if answer.get("reason"):
        parts.append(f"Reason: \u201c{_line(answer['reason'], 200)}\u201d")
    if answer.get("suggestion"):
        parts.append(f"Instead: \u201c{_line(answer['suggestion'], 200)}\u201d")
    return _line(" · ".join(parts))


def _changes_words(card: Mapping[str, Any], answer: Mapping[str, Any]) -> str:
    """The arguments, URLs or packages an approval changed ("Recipient: …"); empty when
    it approved the call as it stood."""
    edits = answer.get("edits")
    changes = [
        f"{_human(name)}: {_words(value)}"
        for name, value in (redact(edits) if isinstance(edits, Mapping) else {}).items()
    ]
    for key, label in (("urls", "URLs"), ("packages", "Packages")):
        given = answer.get(key)
        if isinstance(given, list) and given != list(card.get(key) or []):
            changes.append(f"{label}: {_words(given)}")
    return "; ".join(changes)


def _field_labels(card: Mapping[str, Any]) -> dict[str, str]:
    """The label a person saw for each field of `card`, in the form's order: an
    information request's field labels, else its schema's titles (the page's
    `fieldLabels`); empty for a field that had none."""
    labels: dict[str, str] = {}
    schema = card.get("schema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    for name, spec in (properties if isinstance(properties, Mapping) else {}).items():
        title = spec.get("title") if isinstance(spec, Mapping) else None
        labels[str(name)] = _line(title, 100) if title else ""
    for spec in card.get("fields") or ():
        if isinstance(spec, Mapping) and spec.get("name"):
            label = spec.get("label")
            labels[str(spec["name"])] = _line(label, 100) if label else ""
    return labels


def _words(value: Any) -> str:
    """One answered value as a person reads it: yes or no for a flag, lists joined,
    nested fields spelled out, a URL without its query (it may carry a token)."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(_words(item) for item in value)
    if isinstance(value, Mapping):
        inner = "; ".join(f"{_human(str(k))}: {_words(v)}" for k, v in value.items())
        return f"({inner})"
    return _scrubbed(str(value))


def _human(name: str) -> str:
    """A tool's or argument's name as people read it: `send_report` is "Send report"."""
    words = " ".join(name.replace("_", " ").replace("-", " ").split())
    return _line(words[:1].upper() + words[1:], 60)


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return _scrubbed(value)
    return json.dumps(value, default=str, sort_keys=True)


def _scrubbed(text: str) -> str:
    """A URL without its query or fragment (they carry tokens); other text as it is."""
    if "://" not in text:
        return text
    return " ".join(part.split("?", 1)[0].split("#", 1)[0] for part in text.split())


def answer_for(card: dict[str, Any], choice: str) -> Any:
    """The answer a button press gives `card` (validated later, as any answer is).

    Raises:
        InvalidInput: a choice this card has no button for.
    """
    if choice == APPROVE:
        return {"decision": "approve"}
    if choice == REJECT:
        return {"decision": "reject"}
    if choice == DECLINE and is_mcp(card):
        return None  # the tap's status says decline (`Tap`); there are no fields to send
    if choice == EDIT:
        # A press alone says nothing of what to change: never an approval as it stands.
        raise errors.InvalidInput("changes are typed in the form the button opens")
    options = list(card.get("options") or [])
    if choice.startswith(_OPTION) and choice[1:].isdigit() and int(choice[1:]) < len(options):
        return {"answer": options[int(choice[1:])]}
    raise errors.InvalidInput("this card has no such button")


def _line(text: Any, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def form_answer(card: dict[str, Any], values: dict[str, Any], choice: str = FORM) -> Any:
    """The answer a form (typed text per field) gives `card`; validated later.

    Typed fields are read by the card's rules: integers and numbers from their text,
    yes/no from the usual words; empty optional fields are left out. A field may hold
    the options ticked (a list) instead of text. An approval's form may carry its
    `decision` (approve or reject); without one it is the deny-with-feedback form. The
    change-and-approve form (`choice` EDIT) is an approval with the arguments changed.

    Raises:
        InvalidInput: an approval's form whose decision was left empty, or a
            change-and-approve form for a card with nothing to change.
    """
    if choice == EDIT:
        return _edit_answer(card, values)
    kind = card.get("type")
    text = {k: _text(v) for k, v in values.items()}
    if fields := form_fields(card):
        given: dict[str, Any] = {}
        for spec in fields:
            raw = text.get(spec["name"], "")
            if raw:
                given[spec["name"]] = _field_value(card, spec, raw)
        return given
    if kind == "question":
        raw = text.get("answer", "")
        if card.get("question_type") == "multiple_choice":
            ticked = raw if isinstance(raw, list) else raw.split(",")
            return {"answer": [part.strip() for part in ticked if part.strip()]}
        return {"answer": raw}
    if kind == "interrupt":
        return text.get("answer", "")
    decision = text.get("decision", "reject")
    if decision not in ("approve", "reject"):
        raise errors.InvalidInput("choose Approve or Deny")
    answer: dict[str, Any] = {"decision": decision}
    if text.get("reason") or decision == "reject":
        answer["reason"] = text.get("reason", "")
    if text.get("suggestion"):
        answer["suggestion"] = text["suggestion"]
    return answer


def form_fields(card: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The fields a form draws for a card answered with named values: an information
    request's own fields, or those of an interrupt's declared object schema (name,
    label, type, required, bounds, options); None for any other card, whose answer is
    one text (or a decision).

    A property offering options by `enum` alone, with no `type` (Doorstep's captain's
    question is one), is a choice like any other: `schema_fields` leaves a schema with
    one out, which would leave a box to type an option into whose text is not the
    object the schema asks for.
    """
    if card.get("type") == "info":
        return list(card.get("fields") or []) or None
    return schema_fields(card) or _choice_fields(card)


_FIELD_TYPES: Final = frozenset({"string", "integer", "number", "boolean"})


def _choice_fields(card: dict[str, Any]) -> list[dict[str, Any]] | None:
    """`schema_fields` of a flat object schema where some property offers its options
    by `enum` alone; None when any property is something a form cannot draw."""
    schema = card.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return None
    required = set(schema.get("required") or ())
    fields = []
    for name, spec in properties.items():
        if not isinstance(spec, dict):
            return None
        options = spec.get("enum")
        kind = spec.get("type", "string" if options else None)
        if kind not in _FIELD_TYPES or (options is not None and not isinstance(options, list)):
            return None
        fields.append(
            {
                "name": str(name),
                "label": _human(str(spec.get("title") or name)),
                "type": "email" if spec.get("format") == "email" else kind,
                "required": name in required,
                "max_length": spec.get("maxLength"),
                "minimum": spec.get("minimum"),
                "maximum": spec.get("maximum"),
                "options": [str(o) for o in options or ()],
            }
        )
    return fields


def _field_value(card: dict[str, Any], spec: dict[str, Any], raw: Any) -> Any:
    """A form field's answer as the card's rules type it: the options ticked as they
    are, an option chosen as the schema's enum holds it (a number stays a number), a
    number or a yes/no read from its text."""
    if not isinstance(raw, str):
        return raw
    schema = card.get("schema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    declared = properties.get(spec["name"]) if isinstance(properties, dict) else None
    for option in (declared.get("enum") if isinstance(declared, dict) else None) or ():
        if str(option) == raw:
            return option
    return _typed(spec.get("type"), raw)


def edit_fields(card: dict[str, Any]) -> list[dict[str, Any]]:
    """The fields of the change-and-approve form: per argument the card lets a person
    change (never a download card's lists), its name, its label, how it is typed (as
    `schema_fields` says it: `type`, `options`, bounds) and `initial`, the agent's value
    as the field shows it (None when the agent gave none)."""
    editable = card.get("editable") if card.get("type") != DOWNLOAD else None
    if not isinstance(editable, dict):
        return []
    fields = []
    for name, arg in editable.items():
        schema = arg.get("schema") if isinstance(arg, dict) else None
        schema = schema if isinstance(schema, dict) else {}
        kind = _schema_type(schema)
        value = arg.get("value") if isinstance(arg, dict) else None
        fields.append(
            {
                "name": str(name),
                "label": _human(str(name)),
                "type": "email" if kind == "string" and schema.get("format") == "email" else kind,
                "options": [str(o) for o in schema.get("enum") or ()],
                "minimum": schema.get("minimum"),
                "maximum": schema.get("maximum"),
                "max_length": schema.get("maxLength"),
                "initial": None if value is None else _initial(kind, value),
            }
        )
    return fields


def _schema_type(schema: dict[str, Any]) -> str:
    """The one JSON type an argument's field is drawn for (a nullable type by its other
    type; text when the schema names none)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else "string"


def _initial(kind: str, value: Any) -> str:
    """The agent's value as its field shows it: yes/no for a flag (as the select offers
    it), text for the rest (JSON for a list or an object)."""
    if kind == "boolean" and isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _edit_answer(card: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """An approval with the changed arguments, each typed by its schema; a field left
    empty or as the agent had it is no change. Whether a change is allowed is the
    card's rules' to say when the answer is validated."""
    editable = card.get("editable") if card.get("type") != DOWNLOAD else None
    if not isinstance(editable, dict) or not editable:
        raise errors.InvalidInput("this card has no arguments to change")
    edits: dict[str, Any] = {}
    for name, arg in editable.items():
        raw = _text(values.get(name))
        if raw in ("", []):
            continue
        value = _edit_value(arg.get("schema") or {}, raw)
        if value != arg.get("value"):
            edits[name] = value
    return {"decision": "approve", "edits": edits}


def _edit_value(schema: dict[str, Any], raw: Any) -> Any:
    """A changed argument as its schema types it: an option as the enum holds it, a
    number or a yes/no read from the text, a list or an object from JSON. What cannot
    be read is passed on as given, for the schema to refuse with its own words."""
    if not isinstance(raw, str):
        return raw  # the options ticked: the schema says whether a list fits
    for option in schema.get("enum") or ():
        if str(option) == raw:
            return option
    kind = _schema_type(schema)
    if kind in ("array", "object"):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return _typed(kind, raw)


def _text(value: Any) -> Any:
    """A form field's text, stripped; the options ticked stay a list."""
    if isinstance(value, list):
        return [str(v).strip() for v in value]
    return "" if value is None else str(value).strip()


def _typed(kind: Any, raw: str) -> Any:
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
    except ValueError:
        return raw  # the card's rules will say what is wrong with it
    if kind == "boolean":
        return raw.lower() in ("yes", "y", "true", "1", "on")
    return raw
