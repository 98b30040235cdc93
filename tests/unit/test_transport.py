"""The real fetch transport: resolve once, refuse every non-public address class,
connect to the address that was checked, follow only same-origin redirects, and cap
what is read. A local HTTP server on 127.0.0.1 stands in for whatever an attacker's DNS
answer would point at: it must never see a request."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from interlock.harness import transport
from interlock.harness.transport import HttpFetch

CLASSES = {
    "loopback": "127.0.0.1",
    "loopback v6": "::1",
    "private 10/8": "10.1.2.3",
    "private 172.16/12": "172.16.5.4",
    "private 192.168/16": "192.168.1.1",
    "link-local (instance metadata)": "169.254.169.254",
    "CGNAT": "100.64.0.1",
    "multicast": "224.0.0.1",
    "reserved": "240.0.0.1",
    "broadcast": "255.255.255.255",
    "unspecified": "0.0.0.0",
    "IPv4-mapped loopback": "::ffff:127.0.0.1",
    "NAT64 of metadata": "64:ff9b::a9fe:a9fe",
    "6to4 of private": "2002:c0a8:0101::1",
    "unique-local v6": "fd00::1",
    "link-local v6": "fe80::1",
    "multicast v6": "ff02::1",
    "documentation": "192.0.2.10",
    "local-use NAT64 (its own layout)": "64:ff9b:1:7f00:0:100:808:808",
}


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers GETs from a table; remembers every request it saw."""

    seen: ClassVar[list[tuple[str, str]]] = []
    answers: ClassVar[dict[str, tuple[int, dict[str, str], bytes]]] = {}

    def do_GET(self) -> None:
        self.seen.append((self.headers.get("Host", ""), self.path))
        status, headers, body = self.answers.get(self.path, (200, {}, b"a,b\n1,2"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[int, type[Recorder]]]:
    Recorder.seen = []
    Recorder.answers = {}
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1], Recorder
    httpd.shutdown()
    thread.join(5)


def _loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the checked address be loopback, so the local server can stand in for a
    public site and the pinned connection itself can be observed."""
    real = transport.refusal
    monkeypatch.setattr(transport, "refusal", lambda a: None if a.is_loopback else real(a))


def test_a_host_name_resolving_to_a_local_server_is_refused_before_any_request(
    server: tuple[int, type[Recorder]],
) -> None:
    port, recorder = server
    # `localhost` really resolves (through the system resolver) to the local server
    result = HttpFetch()(f"http://localhost:{port}/table.csv")

    assert result.startswith("Refused:") and "loopback" in result
    assert recorder.seen == []


@pytest.mark.parametrize("address", CLASSES.values(), ids=list(CLASSES))
def test_every_non_public_address_class_is_refused(address: str) -> None:
    def resolver(host: str, port: int) -> list[str]:
        return [address]

    result = HttpFetch(resolver=resolver)("https://data.example.org/table.csv")

    assert result.startswith("Refused: data.example.org resolves to"), result


def test_one_bad_answer_among_good_ones_refuses_the_host() -> None:
    fetch = HttpFetch(resolver=lambda host, port: ["93.184.216.34", "10.0.0.7"])

    assert fetch("https://data.example.org/x").startswith("Refused:")


def test_the_checked_address_is_the_one_connected_to(
    server: tuple[int, type[Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, recorder = server
    _loopback_allowed(monkeypatch)
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    body = HttpFetch(resolver=resolver)(f"http://data.example.org:{port}/table.csv")

    assert body == "a,b\n1,2"
    assert lookups == ["data.example.org"], "one lookup, no second one at connect time"
    assert recorder.seen == [(f"data.example.org:{port}", "/table.csv")]


def test_a_redirect_to_another_host_is_refused_and_named(
    server: tuple[int, type[Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, recorder = server
    _loopback_allowed(monkeypatch)
    recorder.answers["/moved"] = (302, {"Location": "https://evil.example.net/steal?x=1"}, b"")

    result = HttpFetch(resolver=lambda h, p: ["127.0.0.1"])(f"http://data.example.org:{port}/moved")

    assert result.startswith("Redirected to https://evil.example.net/steal; request approval")
    assert len(recorder.seen) == 1


def test_a_redirect_within_the_site_is_followed_on_the_same_address(
    server: tuple[int, type[Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, recorder = server
    _loopback_allowed(monkeypatch)
    recorder.answers["/old"] = (301, {"Location": "/new"}, b"")
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    body = HttpFetch(resolver=resolver)(f"http://data.example.org:{port}/old")

    assert body == "a,b\n1,2"
    assert [path for _, path in recorder.seen] == ["/old", "/new"]
    assert lookups == ["data.example.org"]


def test_a_redirect_to_another_port_is_refused(
    server: tuple[int, type[Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, recorder = server
    _loopback_allowed(monkeypatch)
    recorder.answers["/p"] = (302, {"Location": f"http://data.example.org:{port + 1}/p"}, b"")

    result = HttpFetch(resolver=lambda h, p: ["127.0.0.1"])(f"http://data.example.org:{port}/p")

    assert result.startswith("Redirected to ")


def test_a_large_body_is_cut_at_the_cap(
    server: tuple[int, type[Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, recorder = server
    _loopback_allowed(monkeypatch)
    recorder.answers["/big"] = (200, {}, b"x" * 5000)

    body = HttpFetch(resolver=lambda h, p: ["127.0.0.1"], max_bytes=1000)(
        f"http://data.example.org:{port}/big"
    )

    assert body == "x" * 1000 + "\n[cut at 1000 bytes]"


@pytest.mark.parametrize(
    "address",
    ["192.0.0.192", "192.0.0.9", "3fff::1", "5f00::1", "2001:db8::1", "2001:2::1", "4000::1"],
)
def test_the_special_purpose_registries_are_refused_on_every_python(address: str) -> None:
    # Refused by Interlock's own table, whatever this Python's `ipaddress` thinks
    assert transport.refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1::1", "64:ff9b::5db8:d822"])
def test_public_unicast_addresses_pass(address: str) -> None:
    assert transport.refusal(ipaddress.ip_address(address)) is None


class Drip(http.server.BaseHTTPRequestHandler):
    """A site that answers a byte every 0.2 s: each read is quick, the whole is not."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "40")
        self.end_headers()
        for _ in range(40):
            try:
                self.wfile.write(b"x")
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.2)

    def log_message(self, *args: Any) -> None:
        pass


def test_one_deadline_bounds_the_whole_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    _loopback_allowed(monkeypatch)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        fetch = HttpFetch(resolver=lambda h, p: ["127.0.0.1"], timeout_s=1)
        started = time.monotonic()
        result = fetch(f"http://data.example.org:{httpd.server_address[1]}/slow")
        took = time.monotonic() - started
    finally:
        httpd.shutdown()
        thread.join(5)
    # A byte every 0.2 s never trips a per-read timeout of 1 s; the deadline stops it
    assert result.endswith("took longer than 1 s to answer; stopped."), result
    assert took < 2.5, took


def test_the_deadline_bounds_name_resolution_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # A resolver that takes 3 s to answer (a slow or unreachable DNS server)
    def slow_lookup(*args: Any, **kwargs: Any) -> Any:
        time.sleep(3)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 443))]

    monkeypatch.setattr(socket, "getaddrinfo", slow_lookup)
    fetch = HttpFetch(timeout_s=1)

    started = time.monotonic()
    result = fetch("https://slow-dns.example.org/table.csv")
    took = time.monotonic() - started

    # The fetch gives up at its deadline, with the same words as any other slow fetch
    assert result == (
        "https://slow-dns.example.org/table.csv took longer than 1 s to answer; stopped."
    )
    assert took < 1 + 0.5, took


def test_a_lookup_within_the_deadline_still_refuses_and_pins_as_before() -> None:
    def refused(host: str, port: int) -> list[str]:
        raise transport.EgressRefused(f"{host} does not resolve")

    assert HttpFetch(resolver=refused, timeout_s=1)("https://nowhere.example/x") == (
        "Refused: nowhere.example does not resolve."
    )
    private = HttpFetch(resolver=lambda h, p: ["10.0.0.7"], timeout_s=1)
    assert private("https://data.example.org/x").startswith("Refused: data.example.org resolves")


def test_a_resolver_failure_is_raised_to_the_fetch_as_it_was() -> None:
    def broken(host: str, port: int) -> list[str]:
        raise UnicodeError("label too long")

    with pytest.raises(UnicodeError, match="label too long"):
        transport.checked_address("data.example.org", 443, broken, time.monotonic() + 1)
