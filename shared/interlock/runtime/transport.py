"""HTTP transports behind `fetch_url`.

The real one never follows redirects: a redirect to another host would slip past the
approval of the host the person saw. The demo one answers from memory, for local mode
and tests where no network is reachable.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, Final

from interlock.context import FetchPort

MAX_BYTES: Final = 1_000_000
TIMEOUT_S: Final = 10


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # surfaces the 3xx as an HTTPError instead of following it


def http_fetch(url: str) -> str:
    """GET `url` (already checked and approved), without following redirects."""
    opener = urllib.request.build_opener(_NoRedirects)
    try:
        with opener.open(url, timeout=TIMEOUT_S) as response:
            body: bytes = response.read(MAX_BYTES)
            return body.decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        where = exc.headers.get("Location") if exc.headers else None
        if where:
            return f"Redirected to {where}; request approval for that URL to follow it."
        return f"HTTP {exc.code} from {url}"
    except (urllib.error.URLError, TimeoutError) as exc:
        return f"Could not reach {url}: {exc}"


def demo_fetch(url: str) -> str:
    """A stand-in page: what a demo without network access downloads."""
    return f"id,name,value\n1,alpha,42\n2,beta,17\n(demo content for {url})"


def transport_from_env(env: Mapping[str, str]) -> FetchPort:
    """`INTERLOCK_FETCH=demo` selects the stand-in; anything else the real transport."""
    return demo_fetch if env.get("INTERLOCK_FETCH") == "demo" else http_fetch
