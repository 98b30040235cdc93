"""The one scrubber of text that leaves the model, or echoes a refused value.

`scrub_text` cuts every URL, in any spelling, to what cannot carry a token (no userinfo,
query or fragment) and replaces secret values with `[redacted]`: values assigned to the
usual secret names when they look like one (code such as `sorted(xs, key=len)` or
`password = getpass.getpass()` is kept as written), `Bearer` and `Basic` credentials,
and strings shaped like well-known keys. `scrub_error` also removes the configured keys
from a provider's error, and `StreamScrubber` scrubs text that arrives in pieces (a
model's streamed deltas), holding back only what could still become a secret. Plain
Python: no dependency, no I/O.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Final
from urllib.parse import quote

# ---------------------------------------------------------------------------------------
# The one scrubber: whatever the model writes that a surface shows (text, tool inputs),
# a refused value echoed back, a provider's error, passes through `scrub_text` before
# anyone sees it; signed reasoning is never rewritten and never shown. The patterns read
# a folded copy of the text (NFKC, look-alike punctuation made ASCII, invisible
# characters dropped), so `https\uff1a//`, `to\u200bken=` or `\u201cpassword\u201d`
# hide nothing; only what is removed is rewritten, everything else stays as written.
# Every pattern is anchored by a look-behind or a literal and every repetition that can
# fail late is bounded, so the work stays linear in the length of the text.

REDACTED: Final = "[redacted]"
# A removal can uncover another (a value that straddled a removed query): look again,
# a few times at most.
_PASSES: Final = 4
# Shorter configured values would erase ordinary words from a message; no key is shorter.
_SHORTEST_SECRET: Final = 8

_Edit = tuple[int, int, str]
"""`(start, end, replacement)` in the folded text."""

_INVISIBLE: Final = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)
# Look-alikes NFKC leaves as they are.
_LOOK_ALIKES: Final = str.maketrans(
    {
        "\u2236": ":",
        "\ua789": ":",
        "\u02d0": ":",
        "\u0589": ":",
        "\u05c3": ":",
        "\u2044": "/",
        "\u2215": "/",
        "\u29f8": "/",
        "\u3002": ".",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u2010": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2212": "-",
    }
)
_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]+")
_STOPS: Final = "\\s<>\"'`\u2039\u203a\u00ab\u00bb"

# A URL with a scheme, the `://` also JSON-escaped (`:\/\/`) or percent-encoded.
_URL_IN_TEXT: Final = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]{0,15}(?::\\?/\\?/|%3[Aa]%2[Ff]%2[Ff])[^" + _STOPS + r"]+"
)
_SCHEME_SEP: Final = re.compile(r":\\?/\\?/|%3[Aa]%2[Ff]%2[Ff]")
# A URL without one: `host.tld` followed by a path, query or fragment (a bare host has
# nothing to lose), perhaps after `user:password@`.
_BARE_URL: Final = re.compile(
    r"(?<![\w@.%/:\\-])"
    r"(?P<userinfo>[A-Za-z0-9._~!$&*+,;=-]{1,64}:[^\s/@]{0,128}@)?"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,126}[A-Za-z]{2,63}"
    r"(?::[0-9]{1,5})?"
    r"(?P<rest>[/?#][^" + _STOPS + r"]*)"
)
# The usual names a secret is given; a name may carry a prefix (`x-api-key`,
# `AWS_SECRET_ACCESS_KEY`, `X-Amz-Signature`) but must end in one of these.
_NAMES: Final = (
    "token|secret|password|passwd|pwd|apikey|authorization|bearer|sessionid|session"
    "|signature|sig|key|auth|code|credentials?"
)
_NAME: Final = r"(?:[A-Za-z0-9]{1,32}[_.-]){0,8}?(?i:" + _NAMES + r")"
_SCHEME_WORDS: Final = frozenset({"bearer", "basic", "token", "digest"})
_ASSIGNED_HEAD: Final = (
    r"(?<![A-Za-z0-9_.-])(?P<name>" + _NAME + r")(?![A-Za-z0-9_-])"
    r"(?P<before>[\\\"'`*]{0,4}[ \t]{0,4})"
    r"(?P<sep>=(?!=)|:(?![:/])|%3[DdAa])"
    # A value scrubbed already is left alone (else a shorter gap would find another).
    r"(?![ \t*`]{0,6}(?:(?i:bearer|basic|token|digest)[ \t]{1,4})?[\\\"']{0,2}\[redacted\])"
    r"(?P<gap>[ \t*`]{0,6})"
)
_ASSIGNED: Final = re.compile(
    _ASSIGNED_HEAD + r"(?:\"(?P<dq>(?:[^\"\\\n]|\\.){1,1024})\""
    r"|'(?P<sq>(?:[^'\\\n]|\\.){1,1024})'"
    r"|(?P<scheme>(?i:bearer|basic|token|digest)[ \t]{1,4})?[\\\"']{0,2}"
    r"(?P<bare>(?:[^\s\"'<>&`|\\]|\\(?![\"'])){1,4096}))"
)
_QUOTED_MAX: Final = 1024
_VALUE_OPENS: Final = re.compile(_ASSIGNED_HEAD + r"(?P<quote>\\?[\"'])")
_NAME_ONLY: Final = re.compile(_NAME)
_SCHEME_PREFIX: Final = re.compile(r"(?i)(?:bearer|basic|token|digest)[ \t]+(?=\S)")
# Words that make a name a secret's own (`password`, `api_key`); `key`, `code`, `auth`,
# `session` and `sig` alone are common words (`sorted(xs, key=len)`), so a value under
# them must look random to go.
_STRONG_PARTS: Final = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "apikey",
        "authorization",
        "bearer",
        "sessionid",
        "credential",
        "credentials",
        "amz",
    }
)
_KEY_KINDS: Final = frozenset(
    {"api", "access", "secret", "private", "client", "signing", "master", "encryption"}
)
_BEARER: Final = re.compile(
    r"(?<![A-Za-z0-9_-])(?i:bearer|basic)[ \t]{1,4}(?P<value>[A-Za-z0-9._~+/-]{8,4096}=*)"
)
# Strings shaped like well-known keys, wherever they stand.
_KNOWN_SHAPES: Final = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    # Real keys run to 40 characters and more; a short `sk-...` is more likely a name.
    r"|sk-[A-Za-z0-9_-]{32,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|AIza[A-Za-z0-9_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"
    r")"
    r"|(?<![0-9])[0-9]{6,10}:[A-Za-z0-9_-]{30,}"  # a Telegram bot token
)
_PEM_HEAD: Final = re.compile(r"-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY-----")
_PEM_LINES: Final = re.compile(r"(?:[ \t]*\r?\n?[ \t]*[A-Za-z0-9+/=]{16,}){0,400}")
_PEM_MAX: Final = 16384
_TRAILING: Final = ".,;:!)]}"
_OPENERS: Final = {")": "(", "]": "[", "}": "{"}
# What tells a secret from code under a secret's name, and a random value from a word.
_PLAIN_MIN: Final = 6
_PLAIN_RUN: Final = re.compile(r"[^\s\"'<>&`|\\.,;()\[\]{}]*")
_IDENTIFIER_START: Final = re.compile(r"[A-Za-z_]")
_REFERENCE_MARKS: Final = "$%:@{"
_RANDOM_MIN: Final = 12
_KEY_CHARS: Final = re.compile(r"[A-Za-z0-9+/=_~.:%-]+")
# Words and numbers joined by separators (`user_id_2024`, `v2/files`): identifiers.
_IDENTIFIERS: Final = re.compile(r"[A-Za-z]*[0-9]*(?:[_./:-][A-Za-z]*[0-9]*)*")


def scrub_text(text: str) -> str:
    """`text` with nothing in it that could be a credential.

    Every URL (with a scheme or without: `host.tld/path?query`) loses its query,
    fragment and `user:password@`; a value written after a usual secret name
    (`token=…`, `api_key: …`, `"password": "…"`, `Authorization: Bearer …`) that is not
    code (`token = get_token()`) and, under a common word (`key=`, `code=`), looks
    random, a `Bearer` or `Basic` credential, a private key block and any string shaped
    like a well-known key (AWS, OpenAI, Slack, GitHub, Telegram, JWT…) become
    `[redacted]`. Full-width and other look-alike punctuation and invisible characters
    are read as what they stand for; text with nothing to remove comes back unchanged.
    Pure and linear in the length of `text`.
    """
    for _ in range(_PASSES):
        folded, origin = _folded(text)
        edits = _edits(folded)
        if not edits:
            break
        text = _applied(text, edits, origin)
    return text


def scrub_error(text: str, secrets: Iterable[str]) -> str:
    """An error's `text` as it may be shown or logged: every occurrence of each of the
    configured `secrets` (as written, URL-encoded or JSON-escaped) is replaced by
    `[redacted]`, then `scrub_text` removes anything else shaped like a credential.
    Values shorter than eight characters are not looked for."""
    values: set[str] = set()
    for secret in secrets:
        if isinstance(secret, str) and len(secret.strip()) >= _SHORTEST_SECRET:
            secret = secret.strip()
            values |= {secret, quote(secret, safe=""), json.dumps(secret)[1:-1]}
    # Longest first, so a value that contains another goes whole.
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return scrub_text(text)


class StreamScrubber:
    """Scrubs text that arrives in pieces, as a model streams it.

    A URL or a `token=` may straddle two pieces, so text is held back until nothing that
    may still arrive could change how it is scrubbed: the last, perhaps partial, word;
    a name, separator or `Bearer` still waiting for its value; a quoted value or a key
    block not closed yet. Everything else is released, scrubbed, as it comes.
    """

    def __init__(self) -> None:
        self._held: list[str] = []

    def push(self, piece: str) -> str:
        """The scrubbed text that may be shown now that `piece` arrived ('' for none)."""
        self._held.append(piece)
        if not any(char.isspace() for char in piece):
            return ""  # only a word boundary lets more out; none arrived
        held = "".join(self._held)
        cut = _safe_cut(held)
        self._held = [held[cut:]] if cut < len(held) else []
        return scrub_text(held[:cut]) if cut else ""

    def flush(self) -> str:
        """Everything still held, scrubbed: the text ended."""
        held, self._held = "".join(self._held), []
        return scrub_text(held) if held else ""


def _folded(text: str) -> tuple[str, list[int] | None]:
    """`text` as the patterns read it, and for each of its characters the index of the
    character of `text` it comes from (None when they are the same)."""
    if text.isascii():
        return text, None
    pieces: list[str] = []
    origin: list[int] = []
    done = 0
    for run in _NON_ASCII.finditer(text):
        start, end = run.span()
        pieces.append(text[done:start])
        origin.extend(range(done, start))
        for index in range(start, end):
            folded = _fold_char(text[index])
            pieces.append(folded)
            origin.extend([index] * len(folded))
        done = end
    pieces.append(text[done:])
    origin.extend(range(done, len(text)))
    return "".join(pieces), origin


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    if _INVISIBLE.match(char):
        return ""
    return unicodedata.normalize("NFKC", char).translate(_LOOK_ALIKES)


def _edits(folded: str) -> list[_Edit]:
    """The edits of one pass, leftmost first and none overlapping another (an edit that
    overlaps a chosen one is left for the next pass, which reads the edited text)."""
    candidates = [
        edit
        for edit in (
            *_url_edits(folded),
            *_bare_url_edits(folded),
            *_assigned_edits(folded),
            *_bearer_edits(folded),
            *_shape_edits(folded),
            *_pem_edits(folded),
        )
        if folded[edit[0] : edit[1]] != edit[2]
    ]
    chosen: list[_Edit] = []
    reach = 0
    for edit in sorted(candidates, key=lambda e: (e[0], -e[1])):
        if edit[0] >= reach:
            chosen.append(edit)
            reach = edit[1]
    return chosen


def _applied(text: str, edits: list[_Edit], origin: list[int] | None) -> str:
    """`text` with `edits` (made on its folded form) carried out."""
    out: list[str] = []
    done = 0
    for start, end, new in edits:
        begin, stop = (start, end) if origin is None else (origin[start], origin[end - 1] + 1)
        if begin < done:
            continue  # two edits inside one character that folded into several
        out += (text[done:begin], new)
        done = stop
    out.append(text[done:])
    return "".join(out)


def _url_edits(folded: str) -> Iterator[_Edit]:
    for found in _URL_IN_TEXT.finditer(folded):
        url, base = found.group(0), found.start()
        sep = _SCHEME_SEP.search(url)
        if sep is None:  # pragma: no cover - the pattern has one
            continue
        encoded = sep.group(0).startswith("%")
        lowered = url.lower()
        cut = _first(lowered, ("?", "#", "%3f", "%23") if encoded else ("?", "#"), sep.end())
        slash = _first(lowered, ("/", "\\", "%2f") if encoded else ("/", "\\"), sep.end(), cut)
        at = max(lowered.rfind("@", sep.end(), slash), lowered.rfind("%40", sep.end(), slash))
        if at >= 0:
            yield base + sep.end(), base + at + (3 if url[at] == "%" else 1), ""
        if cut < len(url):
            yield base + cut, base + _tail_end(url, cut), ""


def _bare_url_edits(folded: str) -> Iterator[_Edit]:
    for found in _BARE_URL.finditer(folded):
        userinfo = found.group("userinfo")
        if userinfo and not userinfo.lower().startswith("mailto:"):
            yield found.start("userinfo"), found.end("userinfo"), ""
        rest, base = found.group("rest"), found.start("rest")
        cut = _first(rest, ("?", "#"), 0)
        end = _tail_end(rest, cut)
        if _carries_something(rest[cut:end]):
            yield base + cut, base + end, ""


def _carries_something(tail: str) -> bool:
    """Whether the query or fragment of a URL written without a scheme may carry a
    credential: `example.org?` ends a question and `README.md#install` names a heading,
    but any query with a value and any fragment with a parameter or a random-looking
    string may."""
    if not any(char.isalnum() for char in tail):
        return False
    if tail.startswith("?"):
        return True
    return any(mark in tail for mark in "=&") or _looks_random(tail[1:])


def _first(text: str, marks: tuple[str, ...], start: int, end: int | None = None) -> int:
    """Where the first of `marks` stands in `text[start:end]`, else `end` (or its end)."""
    stop = len(text) if end is None else end
    return min((i for i in (text.find(m, start, stop) for m in marks) if i >= 0), default=stop)


def _tail_end(text: str, cut: int) -> int:
    """Where a removed query or fragment (or a bare value) ends: sentence punctuation
    after it, and a closing bracket that closes the prose or code around it, stay. The
    brackets are counted once, so the work is linear however many closers trail."""
    end = len(text)
    counts: dict[str, int] | None = None
    while end > cut and text[end - 1] in _TRAILING:
        closer = text[end - 1]
        opener = _OPENERS.get(closer)
        if opener is not None:
            if counts is None:
                counts = {char: text.count(char, 0, end) for char in "()[]{}"}
            if counts[opener] >= counts[closer]:
                break  # balanced: the bracket is the text's own
            counts[closer] -= 1
        end -= 1
    return end


def _assigned_edits(folded: str) -> Iterator[_Edit]:
    for found in _ASSIGNED.finditer(folded):
        group = next(g for g in ("dq", "sq", "bare") if found.group(g) is not None)
        start, end = found.span(group)
        value = found.group(group)
        # A bare value after a quote is quoted too: JSON-escaped, or not closed.
        quoted = group != "bare" or folded[start - 1] in "\"'"
        if group == "bare":
            end = start + _tail_end(value, 0)
            value = folded[start:end]
        elif prefix := _SCHEME_PREFIX.match(value):
            start, value = start + prefix.end(), value[prefix.end() :]
        certain = quoted or found.group("scheme") is not None
        if value and value != REDACTED and _secret_value(found.group("name"), value, certain):
            yield start, end, REDACTED


def _secret_value(name: str, value: str, certain: bool) -> bool:
    """Whether `value`, written after `name`, is a credential rather than code or prose.

    Under a common word (`key`, `code`, `session`, `auth`, `sig`) only a random-looking
    value is one: `key=len`, `KEY=production` and `key = 'k1'` stay. Under a secret's
    name (`password`, `token`, `api_key`...) so is a quoted value (`certain`, as is one
    after `Bearer`) and a plain run of six or more characters that is not code:
    `password=hunter2` goes, `password = getpass.getpass()`, `token = get_token()` and
    `token=$TOKEN` stay."""
    if _looks_random(value):
        return True
    if not _strong(name):
        return False
    if certain:
        return True
    if value[0] in _REFERENCE_MARKS:
        return False  # a variable, a placeholder or a template
    run = _PLAIN_RUN.match(value)
    length = run.end() if run else 0
    after = value[length : length + 2]
    code = after[:1] in ("(", "[") or (after[:1] == "." and _IDENTIFIER_START.match(after[1:]))
    return length >= _PLAIN_MIN and not code


def _strong(name: str) -> bool:
    """Whether `name` is a secret's own (`password`, `api_key`), not a common word."""
    parts = re.split(r"[_.-]", name.lower())
    if any(part in _STRONG_PARTS for part in parts):
        return True
    return len(parts) > 1 and parts[-1] == "key" and parts[-2] in _KEY_KINDS


def _looks_random(value: str) -> bool:
    """Whether `value` looks like a credential rather than a word, a name or code: a
    well-known key's shape, or twelve or more key characters mixing letters and digits
    that do not read as identifiers (`user_id_2024`, `settings.API_KEY_2`)."""
    if _KNOWN_SHAPES.fullmatch(value):
        return True
    return (
        len(value) >= _RANDOM_MIN
        and any(char.isalpha() for char in value)
        and any(char.isdigit() for char in value)
        and _KEY_CHARS.fullmatch(value) is not None
        and _IDENTIFIERS.fullmatch(value) is None
    )


def _bearer_edits(folded: str) -> Iterator[_Edit]:
    for found in _BEARER.finditer(folded):
        value = found.group("value")
        # `Basic authentication` is prose; a credential has digits, capitals or symbols.
        if (
            any(c.isdigit() for c in value)
            or any(c.isupper() for c in value[1:])
            or any(c in "+/=_~" for c in value)
        ):
            yield found.start("value"), found.end("value"), REDACTED


def _shape_edits(folded: str) -> Iterator[_Edit]:
    for found in _KNOWN_SHAPES.finditer(folded):
        yield found.start(), found.end(), REDACTED


def _pem_edits(folded: str) -> Iterator[_Edit]:
    for head in _PEM_HEAD.finditer(folded):
        end = folded.find("-----END", head.end(), head.end() + _PEM_MAX)
        if end < 0:
            lines = _PEM_LINES.match(folded, head.end())
            end = lines.end() if lines else head.end()
        if end > head.end():
            yield head.end(), end, "\n" + REDACTED + "\n"


def _safe_cut(held: str) -> int:
    """How much of `held` may be scrubbed and released on its own: up to the last word
    boundary, short of anything a later piece could still complete."""
    folded, origin = _folded(held)
    cut = len(folded)
    while cut and not folded[cut - 1].isspace():
        cut -= 1  # the last word may still grow
    for _ in range(4):
        end = cut
        while end and folded[end - 1].isspace():
            end -= 1
        start = end
        while start and not folded[start - 1].isspace():
            start -= 1
        if start == end or not _may_continue(folded[start:end]):
            break
        cut = start
    cut = min(cut, _open_value(folded, cut), _open_key_block(folded, cut))
    if origin is None or cut == len(folded):
        return cut if origin is None else len(held)
    return origin[cut]


def _may_continue(word: str) -> bool:
    """Whether `word` may be followed by a secret's value in the next words."""
    bare = word.strip("\"'`*\\")
    if not bare:
        return True  # a lone quote or `**` may open a value
    lowered = bare.lower()
    if lowered.endswith(("=", ":", "%3d", "%3a")) or lowered in _SCHEME_WORDS:
        return True
    return bool(_NAME_ONLY.fullmatch(bare)) or lowered.startswith("-----begin")


def _open_value(folded: str, cut: int) -> int:
    """The start of a quoted secret value before `cut` whose closing quote is not
    before `cut`, else `cut`."""
    for head in _VALUE_OPENS.finditer(folded, max(0, cut - _QUOTED_MAX - 80)):
        if head.start() >= cut:
            break
        if _closing(folded, head.end(), head.group("quote")[-1]) >= cut:
            return head.start()
    return cut


def _closing(folded: str, start: int, quote: str) -> int:
    """Where a quoted value opened at `start` ends (its quote, the line's end, or the
    most the pattern reads); past the text when it has not arrived yet."""
    index, limit = start, start + _QUOTED_MAX + 1
    while index < min(limit, len(folded)):
        char = folded[index]
        if char == "\\":
            index += 2
            continue
        if char in (quote, "\n"):
            return index
        index += 1
    return index if index >= limit else len(folded) + 1


def _open_key_block(folded: str, cut: int) -> int:
    """The start of a private key block before `cut` that does not end before it."""
    begin = folded.rfind("-----BEGIN", max(0, cut - _PEM_MAX), cut)
    if begin < 0:
        return cut
    head = _PEM_HEAD.match(folded, begin)
    if head is None:
        # A header still arriving holds; another kind of block does not.
        return begin if "-----" not in folded[begin + 10 : begin + 80] else cut
    return begin if folded.find("-----END", head.end(), cut) < 0 else cut
