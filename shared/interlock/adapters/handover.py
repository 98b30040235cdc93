"""Signed hand-overs of chat taps, from the channels function to the resume function.

The channels function checks the platform's signature on a webhook, screens the tap,
and hands it to the resume function by a direct invoke. Other code may invoke the
resume function too (the run function forwards resumes to it, and runs the agent's own
code), so a hand-over is believed only when it carries a MAC made with a KMS HMAC key
that the channels role alone may use to sign (`kms:GenerateMac`) and the resume role
alone to verify (`kms:VerifyMac`). The key never leaves KMS. The MAC covers the SHA-256
of the tap's canonical JSON (KMS takes at most 4 KiB to sign; a tap's answers may be
longer).

A replayed hand-over (the same signed tap again) changes nothing: a tap is applied
through the respond path, whose first step finds the card already answered.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

MAC_ALGORITHM: Final = "HMAC_SHA_256"


def digest(tap: Mapping[str, Any]) -> bytes:
    """The SHA-256 of the tap's canonical JSON: what the MAC covers."""
    canonical = json.dumps(tap, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).digest()


class KmsHandOverKey:
    """The hand-over key in KMS.

    Args:
        client: A boto3 KMS client (injected).
        key_id: The key's id or ARN (`INTERLOCK_HAND_OVER_KEY`).
    """

    def __init__(self, client: Any, key_id: str) -> None:
        self._kms = client
        self._key = key_id

    def sign(self, tap: Mapping[str, Any]) -> str:
        """The tap's MAC, base64 (the channels function's side)."""
        made = self._kms.generate_mac(
            KeyId=self._key, MacAlgorithm=MAC_ALGORITHM, Message=digest(tap)
        )
        return base64.b64encode(made["Mac"]).decode()

    def verify(self, tap: Mapping[str, Any], mac: str) -> bool:
        """Whether `mac` is the tap's MAC under the key (the resume function's side).

        A MAC that is not base64, or that KMS refuses, is simply not valid; a KMS that
        cannot be reached raises, so the hand-over fails and Lambda retries it.
        """
        try:
            raw = base64.b64decode(mac, validate=True)
        except ValueError:
            return False
        if not raw:
            return False  # KMS refuses an empty MAC as a malformed request, not a wrong one
        try:
            checked = self._kms.verify_mac(
                KeyId=self._key, MacAlgorithm=MAC_ALGORITHM, Message=digest(tap), Mac=raw
            )
        except self._kms.exceptions.KMSInvalidMacException:
            return False
        return bool(checked.get("MacValid"))
