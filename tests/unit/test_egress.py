"""URL, host and package rules."""

from __future__ import annotations

import pytest

from interlock.egress import safe_host, safe_package, safe_url
from interlock.errors import InvalidInput


@pytest.mark.parametrize(
    ("raw", "url", "host"),
    [
        (
            "https://Example.org/data.csv?token=abc#frag",
            "https://example.org/data.csv",
            "example.org",
        ),
        ("http://files.example.org:8080", "http://files.example.org:8080/", "files.example.org"),
        ("https://bücher.example/x", "https://xn--bcher-kva.example/x", "xn--bcher-kva.example"),
        ("https://example.org./a", "https://example.org/a", "example.org"),
    ],
)
def test_accepted_urls_are_canonical_and_stripped(raw: str, url: str, host: str) -> None:
    safe = safe_url(raw)
    assert (safe.url, safe.host) == (url, host)


REFUSED_URLS = [
    "ftp://example.org/x",
    "file:///etc/passwd",
    "javascript:alert(1)",
    "example.org/x",
    "https://user:pw@example.org/",
    "https://user@example.org/",
    "http://127.0.0.1/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[fe80::1]/",
    "http://169.254.169.254/latest/meta-data",
    "http://localhost/",
    "http://intranet/",
    "http://printer.local/",
    "http://db.internal/",
    "http://metadata.google.internal/",
    "http://foo.svc.cluster.local/",
    "http://a..b/",
    "",
    "   ",
    "https://-bad-.org/",
    "https://" + "a" * 2050 + ".org/",
]


@pytest.mark.parametrize("raw", REFUSED_URLS)
def test_refused_urls(raw: str) -> None:
    with pytest.raises(InvalidInput):
        safe_url(raw)


def test_hosts_are_checked_like_urls() -> None:
    assert safe_host("PyPI.org") == "pypi.org"
    for bad in ("10.0.0.1", "localhost", "box", "0x0a.0.0.1", "host.localdomain"):
        with pytest.raises(InvalidInput):
            safe_host(bad)


def test_package_names_are_validated_and_normalized() -> None:
    assert safe_package("Pandas") == "pandas"
    assert safe_package("typing_extensions") == "typing-extensions"
    for bad in ("", "-x", "x y", "pandas; rm -rf /", "pkg==1.0", "../evil", "a" * 200):
        with pytest.raises(InvalidInput):
            safe_package(bad)


@pytest.mark.parametrize(
    ("raw", "site"),
    [
        ("https://example.com/x", "example.com"),
        ("https://example.com:443/x", "example.com"),
        ("https://example.com:22/", "example.com:22"),
        ("http://example.com/a", "example.com:80"),
        ("http://example.com:8080/a", "example.com:8080"),
    ],
)
def test_an_approval_names_scheme_and_port_unless_they_are_the_default(raw: str, site: str) -> None:
    assert safe_url(raw).site == site


def test_url_paths_refuse_control_characters_and_encode_spaces() -> None:
    assert safe_url("https://example.com/a b/c").url == "https://example.com/a%20b/c"
    for raw in ("https://example.com/a\nb", "https://example.com/\x00", "https://example.com/\x7f"):
        with pytest.raises(InvalidInput, match="control characters"):
            safe_url(raw)


def test_sites_are_checked_like_hosts_with_a_port() -> None:
    from interlock.egress import safe_site

    assert safe_site("Example.COM:8443") == "example.com:8443"
    assert safe_site("example.com:443") == "example.com"
    for raw in ("example.com:0", "example.com:99999", "example.com:²", "127.0.0.1:80", "x:80"):
        with pytest.raises(InvalidInput):
            safe_site(raw)


def test_redaction_reaches_inside_lists_and_nested_objects() -> None:
    from interlock.cards import REDACTED, redact

    summary = redact(
        {"to": "a", "items": [{"api_key": "k1", "name": "x"}, ["plain"]], "auth": {"t": 1}}
    )

    assert summary == {
        "to": "a",
        "items": [{"api_key": REDACTED, "name": "x"}, ["plain"]],
        "auth": REDACTED,
    }
