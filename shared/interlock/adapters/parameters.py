"""Per-agent configuration documents stored as SSM parameters (JSON)."""

from __future__ import annotations

import json
import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from interlock.errors import InvalidInput, StoreError


def load_json_parameter(client: Any, name: str) -> dict[str, Any]:
    """Read parameter `name` and parse it as a JSON object.

    Raises:
        StoreError: the parameter cannot be read.
        InvalidInput: it is not a JSON object.
    """
    try:
        value = client.get_parameter(Name=name)["Parameter"]["Value"]
    except (ClientError, BotoCoreError) as exc:
        raise StoreError(f"read parameter {name} failed: {type(exc).__name__}") from exc
    try:
        document = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"parameter {name} is not JSON") from exc
    if not isinstance(document, dict):
        raise InvalidInput(f"parameter {name} must hold a JSON object")
    return document


class _NoResponseBodies(logging.Filter):
    """Drops botocore's debug records of raw response bodies and headers."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Response body", "Response headers"))


_QUIET = _NoResponseBodies()


def quiet_response_bodies() -> None:
    """Keep secrets out of botocore's debug log.

    At DEBUG, botocore logs every raw response body, `GetSecretValue`'s secret string
    included; those records are dropped (everything else botocore logs stays). Idempotent.
    """
    logger = logging.getLogger("botocore.parsers")
    if _QUIET not in logger.filters:
        logger.addFilter(_QUIET)
