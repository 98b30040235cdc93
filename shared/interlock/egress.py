"""What may be requested: URL, host and package rules.

Only http and https, no credentials, no IP literals in any spelling, no names that
look internal. Query strings and fragments are dropped before a URL is stored or shown
because they can carry tokens. Hosts are compared in their IDNA (ASCII) form.
A refused value echoed in a message goes through the one scrubber first
(`interlock.scrubbing`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, urlsplit, urlunsplit

from interlock.errors import InvalidInput
from interlock.scrubbing import scrub_text

_INTERNAL_NAMES: Final = frozenset(
    {"localhost", "metadata", "instance-data", "metadata.google.internal", "kubernetes.default"}
)
_INTERNAL_SUFFIXES: Final = (
    ".local",
    ".localhost",
    ".internal",
    ".intranet",
    ".corp",
    ".lan",
    ".home",
    ".localdomain",
    ".home.arpa",
    ".in-addr.arpa",
    ".ip6.arpa",
    ".svc",
    ".cluster.local",
)
_LABEL: Final = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
# A label that inet_aton would read as a number: decimal, 0x-hex or 0-octal.
_NUMERIC_LABEL: Final = re.compile(r"(0x[0-9a-f]*|[0-9]+)")
PACKAGE_PATTERN: Final = r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$"
_PACKAGE: Final = re.compile(PACKAGE_PATTERN)
_MAX_URL: Final = 2048
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
# What may stand unescaped in a path; anything else (a space, say) is percent-encoded.
_PATH_SAFE: Final = "/%:@!$&'()*+,;=-._~"


DEFAULT_PORTS: Final = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class SafeUrl:
    """A URL that may be shown and requested: scheme, host, port and path only.

    `site` is what an approval names: the host alone for HTTPS on its default port,
    else `host:port` (plain HTTP is port 80), so approving a site never opens another
    port or plain HTTP on the same host.
    """

    url: str
    host: str
    site: str


_SHOWN_CHARS: Final = 200


def shown(raw: object) -> str:
    """A refused value as a message may echo it: scrubbed, printable, bounded."""
    text = scrub_text(str(raw))
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def safe_url(raw: str) -> SafeUrl:
    """Validate `raw` and strip its query and fragment.

    Raises:
        InvalidInput: naming the rule the URL breaks.
    """
    if not isinstance(raw, str) or not raw.strip() or len(raw) > _MAX_URL:
        raise InvalidInput("a URL must be a non-empty string of at most 2048 characters")
    if _CONTROL.search(raw):
        raise InvalidInput("URLs with control characters cannot be requested")
    try:
        parts = urlsplit(raw.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"not a valid URL: {shown(raw)!r}") from exc
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidInput(f"only http and https URLs can be requested: {shown(raw)!r}")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise InvalidInput("URLs with credentials cannot be requested")
    if parts.netloc.startswith("[") or parts.hostname is None:
        raise InvalidInput(f"URL has no usable host name: {shown(raw)!r}")
    host = safe_host(parts.hostname)
    netloc = host if port is None else f"{host}:{port}"
    path = quote(parts.path or "/", safe=_PATH_SAFE)
    scheme = parts.scheme.lower()
    effective = port if port is not None else DEFAULT_PORTS[scheme]
    site = host if (scheme, effective) == ("https", 443) else f"{host}:{effective}"
    return SafeUrl(urlunsplit((scheme, netloc, path, "", "")), host, site)


def safe_site(raw: str) -> str:
    """A site as an approval names it: `host`, or `host:port`; else `InvalidInput`."""
    host, colon, port = raw.strip().rpartition(":") if ":" in raw else (raw, "", "")
    if not colon:
        return safe_host(raw)
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise InvalidInput(f"not a valid site: {shown(raw)!r}")
    site = f"{safe_host(host)}:{int(port)}"
    return site.removesuffix(":443")


def safe_host(raw: str) -> str:
    """Return the host's canonical ASCII form, or raise `InvalidInput`."""
    host = raw.strip().rstrip(".").lower()
    if not host:
        raise InvalidInput("empty host name")
    if _is_ip_literal(host):
        raise InvalidInput(f"IP addresses cannot be requested, only host names: {shown(raw)!r}")
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise InvalidInput(f"not a valid host name: {shown(raw)!r}") from exc
    labels = ascii_host.split(".")
    if len(labels) < 2:
        raise InvalidInput(f"single-label host names look internal: {shown(raw)!r}")
    if not all(_LABEL.fullmatch(label) for label in labels) or len(ascii_host) > 253:
        raise InvalidInput(f"not a valid host name: {shown(raw)!r}")
    if labels[-1].isdigit() or _is_ip_literal(ascii_host):
        raise InvalidInput(f"IP addresses cannot be requested, only host names: {shown(raw)!r}")
    if ascii_host in _INTERNAL_NAMES or ascii_host.endswith(_INTERNAL_SUFFIXES):
        raise InvalidInput(f"internal-looking host names cannot be requested: {shown(raw)!r}")
    return ascii_host


def safe_package(raw: str) -> str:
    """Return a package name in its normalized form (PEP 503), or raise `InvalidInput`."""
    if not isinstance(raw, str) or not _PACKAGE.fullmatch(raw.strip()):
        raise InvalidInput(f"not a valid package name: {shown(raw)!r}")
    return re.sub(r"[-_.]+", "-", raw.strip()).lower()


def _is_ip_literal(host: str) -> bool:
    candidate = host.strip("[]")
    try:
        ipaddress.ip_address(candidate)
        return True
    except ValueError:
        pass
    if ":" in candidate:
        return True  # any colon in a host is an IPv6 spelling (ports are split off earlier)
    # inet_aton-style spellings: 2130706433, 0x7f000001, 0177.0.0.1, 127.1
    labels = candidate.split(".")
    return 1 <= len(labels) <= 4 and all(_NUMERIC_LABEL.fullmatch(label) for label in labels)
