"""HTTP transports behind `fetch_url`.

The real one resolves the approved host once, refuses any address that is not a public
unicast one (loopback, private, link-local and instance metadata, CGNAT, multicast,
reserved, and the IPv6 forms that carry such an IPv4 address: mapped, NAT64, 6to4,
Teredo; unique-local), then connects to exactly the address it checked: no second
lookup, so a DNS answer that changes between the check and the connection (rebinding)
reaches nothing. TLS is verified against the host name, not the address. Redirects are
followed only to the same scheme, host and port (on the same checked address); any
other target is refused and named, so the person can approve it. The whole fetch, name
resolution included, has one deadline, and every body a size cap.

Why by hand: requests and urllib3 resolve the host themselves when they connect, so an
address checked beforehand is not necessarily the one they reach, and no maintained
library pins a checked address for plain HTTP and TLS. The standard library's
`http.client` lets a connection choose its socket; the address table is Interlock's own.

The demo transport answers from memory, for local mode and tests with no network.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urljoin, urlsplit

from interlock.config import Fetch
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


def _nets(*rows: tuple[str, str]) -> tuple[tuple[Network, str], ...]:
    return tuple((ipaddress.ip_network(net), why) for net, why in rows)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# Interlock's own table of addresses no fetch may reach: the IANA IPv4 and IPv6
# Special-Purpose Address Registries (RFC 6890 and successors), multicast and the
# reserved ranges, whole. Written out rather than read from `ipaddress.is_global` and
# friends, whose answers change between Python patch releases (192.0.0.192 and 3fff::1
# passed on some): containment in a listed network is the same on every version.
SPECIAL_V4: Final = _nets(
    ("0.0.0.0/8", "in 'this network'"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (instance metadata lives here)"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "an IETF protocol assignment"),
    ("192.0.2.0/24", "documentation"),
    ("192.31.196.0/24", "AS112"),
    ("192.52.193.0/24", "AMT"),
    ("192.88.99.0/24", "a 6to4 relay anycast address"),
    ("192.168.0.0/16", "private"),
    ("192.175.48.0/24", "AS112 direct delegation"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
GLOBAL_UNICAST_V6: Final = ipaddress.ip_network("2000::/3")
SPECIAL_V6: Final = _nets(
    ("2001::/23", "an IETF protocol assignment"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "an SRv6 segment identifier"),
)


def refusal(address: Address) -> str | None:
    """Why `address` may not be reached, or None for a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in LOCAL_NAT64:
            return f"{address} is a local-use NAT64 address"
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner = refusal(embedded)
            return f"{address} carries {inner}" if inner else None
        if address not in GLOBAL_UNICAST_V6:
            # Loopback, unspecified, unique-local, link-local, multicast and every
            # range not assigned as global unicast.
            return f"{address} is not a global unicast address"
        table: tuple[tuple[Network, str], ...] = SPECIAL_V6
    else:
        table = SPECIAL_V4
    for network, why in table:
        if address in network:
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


def checked_address(host: str, port: int, resolver: Resolver, deadline: float | None = None) -> str:
    """Resolve once; every answer must be public, and the first is the one used.

    Raises:
        EgressRefused: the host does not resolve, or to an address no fetch may reach.
        TimeoutError: no answer came before `deadline` (`time.monotonic()`).
    """
    answers = (
        resolver(host, port) if deadline is None else _resolved(resolver, host, port, deadline)
    )
    if not answers:
        raise EgressRefused(f"{host} does not resolve")
    for answer in answers:
        why = refusal(ipaddress.ip_address(answer.split("%")[0]))
        if why:
            raise EgressRefused(f"{host} resolves to {why}")
    return answers[0]


def _resolved(resolver: Resolver, host: str, port: int, deadline: float) -> list[str]:
    """`resolver(host, port)`, waited for until `deadline` at most.

    A lookup cannot be cancelled (the system resolver blocks in C, retrying on its own
    schedule), so it runs on a daemon thread of its own and is abandoned at the deadline:
    its late answer is dropped, and the thread ends when the resolver gives up.

    Raises:
        TimeoutError: no answer by the deadline.
    """
    answer: Future[list[str]] = Future()

    def resolve() -> None:
        try:
            answer.set_result(resolver(host, port))
        except Exception as exc:  # handed to the waiting fetch, which raises it
            answer.set_exception(exc)

    threading.Thread(target=resolve, name="egress-resolve", daemon=True).start()
    return answer.result(timeout=max(deadline - time.monotonic(), 0))


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address
        self.held: socket.socket | None = None

    def connect(self) -> None:
        self.sock = self.held = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address
        self.held: socket.socket | None = None

    def connect(self) -> None:
        sock = self.held = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


@dataclass
class HttpFetch:
    """The real transport: GET an approved URL on a checked, pinned address.

    Args:
        resolver: Host name to addresses (injected: tests answer with any class).
        timeout_s: The deadline of the whole fetch: name resolution, connect, TLS,
            headers, body and redirects together.
        max_bytes: Largest body read; a longer one is cut and says so.
    """

    resolver: Resolver = field(default=system_resolver)
    timeout_s: float = TIMEOUT_S
    max_bytes: int = MAX_BYTES

    def __call__(self, url: str) -> str:
        # One deadline over the whole fetch (lookup, connect, TLS, headers, body,
        # redirects): neither a slow resolver nor a site that drips its answer can hold
        # a run longer than that.
        deadline = time.monotonic() + self.timeout_s
        origin = _origin(url)
        try:
            address = checked_address(origin[1], origin[2], self.resolver, deadline)
        except EgressRefused as refused:
            return f"Refused: {refused}."
        except TimeoutError:
            return self._too_slow(url)
        for _ in range(MAX_REDIRECTS + 1):
            try:
                status, location, body = self._get(url, address, deadline)
            except _TooSlow:
                return self._too_slow(url)
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

    def _too_slow(self, url: str) -> str:
        return f"{url} took longer than {self.timeout_s:g} s to answer; stopped."

    def _get(self, url: str, address: str, deadline: float) -> tuple[int, str | None, str]:
        scheme, host, port = _origin(url)
        parts = urlsplit(url)
        kind = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _TooSlow
        connection = kind(host, port, address, remaining)
        # Socket timeouts bound each read, not their sum: at the deadline the watchdog
        # shuts the socket, which ends whatever read is waiting.
        watchdog = threading.Timer(remaining, _cut, args=(connection,))
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.request("GET", parts.path or "/", headers={"Host": parts.netloc})
            response = connection.getresponse()
            raw = response.read(self.max_bytes + 1)
        except (OSError, http.client.HTTPException):
            if time.monotonic() >= deadline:
                raise _TooSlow from None
            raise
        finally:
            watchdog.cancel()
            connection.close()
        if time.monotonic() >= deadline:
            raise _TooSlow  # the watchdog cut the body short
        text = raw[: self.max_bytes].decode("utf-8", errors="replace")
        if len(raw) > self.max_bytes:
            text += f"\n[cut at {self.max_bytes} bytes]"
        return response.status, response.getheader("Location"), text


class _TooSlow(Exception):
    """The fetch reached its deadline."""


def _cut(connection: _PinnedHTTP | _PinnedHTTPS) -> None:
    # The socket as connected: once the response is read the connection may have
    # handed it to the response and forgotten it.
    sock = connection.held
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


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


def transport_for(fetch: Fetch) -> FetchPort:
    """The fetch transport a deployment names (`Deployment.fetch`): the real one, or the
    stand-in for machines with no network."""
    return demo_fetch if fetch == "demo" else HttpFetch()
