"""HTTP transports behind `fetch_url`.

The real one resolves the approved host once, refuses any address that is not a public
unicast one (loopback, private, link-local and instance metadata, CGNAT, multicast,
reserved, and the IPv6 forms that carry such an IPv4 address: mapped, NAT64, 6to4,
Teredo; unique-local), then connects to exactly the address it checked: no second
lookup, so a DNS answer that changes between the check and the connection (rebinding)
reaches nothing. TLS is verified against the host name, not the address. Redirects are
followed only to the same scheme, host and port (on the same checked address); any
other target is refused and named, so the person can approve it. Every connection has a
timeout and every body a size cap.

Why by hand: requests and urllib3 resolve the host themselves when they connect, so an
address checked beforehand is not necessarily the one they reach, and no maintained
library pins a checked address for plain HTTP and TLS. The standard library's
`http.client` lets a connection choose its socket, and `ipaddress` classifies addresses.

The demo transport answers from memory, for local mode and tests with no network.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urljoin, urlsplit

from interlock.config import Env
from interlock.context import FetchPort
from interlock.egress import safe_url
from interlock.errors import InvalidInput

MAX_BYTES: Final = 1_000_000
TIMEOUT_S: Final = 10
MAX_REDIRECTS: Final = 3
DEFAULT_PORTS: Final = {"http": 80, "https": 443}
NAT64: Final = ipaddress.ip_network("64:ff9b::/96")  # IPv4 in the low 32 bits
LOCAL_NAT64: Final = ipaddress.ip_network("64:ff9b:1::/48")  # its own layout: refused whole

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]


class EgressRefused(Exception):
    """The host resolves to an address no fetch may reach."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (one lookup)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise EgressRefused(f"{host} does not resolve") from exc
    return [str(info[4][0]) for info in infos]


def refusal(address: Address) -> str | None:
    """Why `address` may not be reached, or None for a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in LOCAL_NAT64:
            return f"{address} is a local-use NAT64 address"
        embedded = _embedded_ipv4(address)
        if embedded is not None and refusal(embedded):
            return f"{address} carries {refusal(embedded)}"
        if address.is_site_local or address in ipaddress.ip_network("fc00::/7"):
            return f"{address} is a unique-local address"
        if embedded is not None:
            return None  # a public IPv4 address in an IPv6 form
    checks = (
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local (instance metadata lives here)"),
        (address.is_private, "private"),
        (address.is_multicast, "multicast"),
        (address.is_reserved, "reserved"),
        (address.is_unspecified, "unspecified"),
        (not address.is_global, "not globally routable"),
    )
    for refused, why in checks:
        if refused:
            return f"{address} is {why}"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4, Teredo), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def checked_address(host: str, port: int, resolver: Resolver) -> str:
    """Resolve once; every answer must be public, and the first is the one used."""
    answers = resolver(host, port)
    if not answers:
        raise EgressRefused(f"{host} does not resolve")
    for answer in answers:
        why = refusal(ipaddress.ip_address(answer.split("%")[0]))
        if why:
            raise EgressRefused(f"{host} resolves to {why}")
    return answers[0]


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


@dataclass
class HttpFetch:
    """The real transport: GET an approved URL on a checked, pinned address.

    Args:
        resolver: Host name to addresses (injected: tests answer with any class).
        timeout_s: Connect and read timeout of each request.
        max_bytes: Largest body read; a longer one is cut and says so.
    """

    resolver: Resolver = field(default=system_resolver)
    timeout_s: float = TIMEOUT_S
    max_bytes: int = MAX_BYTES

    def __call__(self, url: str) -> str:
        origin = _origin(url)
        try:
            address = checked_address(origin[1], origin[2], self.resolver)
        except EgressRefused as refused:
            return f"Refused: {refused}."
        for _ in range(MAX_REDIRECTS + 1):
            try:
                status, location, body = self._get(url, address)
            except (OSError, http.client.HTTPException) as exc:
                return f"Could not reach {url}: {type(exc).__name__}"
            if not (300 <= status < 400 and location):
                return body if status < 400 else f"HTTP {status} from {url}"
            target = urljoin(url, location)
            try:
                next_url = safe_url(target).url
            except InvalidInput:
                return "Redirected to a URL that cannot be requested; not followed."
            if _origin(next_url) != origin:
                return f"Redirected to {next_url}; request approval for that URL to follow it."
            url = next_url
        return f"Too many redirects from {url}; stopped."

    def _get(self, url: str, address: str) -> tuple[int, str | None, str]:
        scheme, host, port = _origin(url)
        parts = urlsplit(url)
        kind = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
        connection = kind(host, port, address, self.timeout_s)
        try:
            connection.request("GET", parts.path or "/", headers={"Host": parts.netloc})
            response = connection.getresponse()
            raw = response.read(self.max_bytes + 1)
        finally:
            connection.close()
        text = raw[: self.max_bytes].decode("utf-8", errors="replace")
        if len(raw) > self.max_bytes:
            text += f"\n[cut at {self.max_bytes} bytes]"
        return response.status, response.getheader("Location"), text


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme, 0)


def http_fetch(url: str) -> str:
    """GET `url` (already checked and approved) through the real transport."""
    return HttpFetch()(url)


def demo_fetch(url: str) -> str:
    """A stand-in page: what a demo without network access downloads."""
    return f"id,name,value\n1,alpha,42\n2,beta,17\n(demo content for {url})"


def transport_from_env(env: Mapping[str, str]) -> FetchPort:
    """`INTERLOCK_FETCH=demo` selects the stand-in; anything else the real transport."""
    return demo_fetch if env.get(Env.FETCH) == "demo" else HttpFetch()
