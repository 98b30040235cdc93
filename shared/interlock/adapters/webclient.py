"""A small JSON-over-HTTPS client for chat platforms' APIs.

Hand-written over `urllib` rather than with an HTTP library: two platforms, one verb,
JSON both ways, and one rule no library applies by default: a URL is never logged,
traced or put in an error, because Telegram's bot token is part of every API path.
The base URL is injected, so tests point it at a local fake.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, Final

from interlock import errors

TIMEOUT_S: Final = 5.0
MAX_RESPONSE_BYTES: Final = 1_000_000


class ChannelError(errors.InterlockError):
    """A chat platform refused a call or could not be reached."""

    code = "system_error"


class JsonHttp:
    """POSTs JSON to one API.

    Args:
        base_url: The API's base URL, e.g. `https://slack.com/api`.
        headers: Headers sent with every call (an `Authorization`, say).
        timeout_s: How long one call may take.
    """

    def __init__(
        self, base_url: str, headers: Mapping[str, str] | None = None, timeout_s: float = TIMEOUT_S
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = dict(headers or {})
        self._timeout_s = timeout_s
        # No proxies from the environment, no redirects followed to other hosts.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())

    def post(
        self, path: str, body: Mapping[str, Any], *, url: str | None = None, anonymous: bool = False
    ) -> Any:
        """POST `body` to `base_url + path` (or to `url`, a URL the platform handed out);
        returns the JSON answer. `anonymous` leaves this client's headers (its token) off.

        Raises:
            ChannelError: an HTTP error or an unreachable API. The message names the
                status only, never the URL.
        """
        request = urllib.request.Request(
            url or self.base_url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                **({} if anonymous else self._headers),
                "Content-Type": "application/json; charset=utf-8",
            },
        )
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                raw = response.read(MAX_RESPONSE_BYTES)
        except urllib.error.HTTPError as exc:
            raise ChannelError(f"the platform answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ChannelError(f"the platform could not be reached: {type(exc).__name__}") from None
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise ChannelError("the platform's answer is not JSON") from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
