"""An approval covers one site: its host on the default HTTPS port, or `host:port`.
Approving `example.org` never opens another port or plain HTTP on it."""

from __future__ import annotations

from types import SimpleNamespace

from interlock.context import RequestContext, request_scope
from interlock.harness.tools import fetch_url
from interlock.records import Subject
from tests.agent.support import Transport


def _fetch(url: str, approved: set[Subject], transport: Transport) -> str:
    context = RequestContext("alice", "c1", approved=frozenset(approved), fetch=transport)
    with request_scope(context):
        call = SimpleNamespace(tool_use={"toolUseId": "t1", "name": "fetch_url", "input": {}})
        result = fetch_url(url=url, tool_context=call)
    return " ".join(part["text"] for part in result["content"])


def test_an_approved_host_reaches_its_default_https_port_only() -> None:
    transport = Transport()
    approved = {Subject("site", "data.example.org")}

    assert "1,42" in _fetch("https://data.example.org/t.csv", approved, transport)
    for other in ("https://data.example.org:22/", "http://data.example.org/t.csv"):
        assert _fetch(other, approved, transport).startswith("Blocked:")
    assert transport.urls == ["https://data.example.org/t.csv"]


def test_another_port_needs_its_own_approval() -> None:
    transport = Transport()
    approved = {Subject("site", "data.example.org:8443")}

    assert "1,42" in _fetch("https://data.example.org:8443/t.csv", approved, transport)
    assert _fetch("https://data.example.org/t.csv", approved, transport).startswith("Blocked:")
