"""Local mode refuses the forged answers the deployed functions refuse, the same way:
the resume path believes the person's own token, never a request context it is
handed, and nothing reaches the tap path from outside.
"""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any

from werkzeug.test import Client

from interlock.api import wiring
from interlock.records import RequestState, fresh_secret
from local import devtokens
from tests.api.support import auth, resume_body, run_body, stream

CHAT = "c-local-forged"


def _paused(client: Client, key: bytes) -> Any:
    events = stream(client.post("/runs", data=run_body(CHAT, "send the report"), headers=auth(key)))
    assert events[-1].outcome.type == "interrupt"
    return wiring.stores().requests.get(CHAT, 0)


def _planted(request: Any) -> str:
    """The hash of a secret the forger knows, written as the run function could."""
    secret, secret_hash = fresh_secret()
    wiring.stores().requests.rotate_secret(request, "stream", secret_hash, 0)
    return secret


def _token_with(payload: dict[str, Any], key: bytes) -> str:
    body = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    import hashlib
    import hmac

    mac = hmac.new(key, body.encode(), hashlib.sha256).digest()
    return f"{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def test_a_forged_resume_is_refused_in_local_mode_and_the_card_stays_pending(
    api: tuple[Client, bytes],
) -> None:
    client, key = api
    request = _paused(client, key)
    secret = _planted(request)
    interrupt = type("I", (), {"id": request.interrupt_id, "metadata": {"secret": secret}})
    body = resume_body(CHAT, interrupt, {"decision": "approve"})
    forged_context = {
        "x-amzn-request-context": json.dumps(
            {"authorizer": {"claims": {"sub": "alice", "cognito:groups": "reporter"}}}
        )
    }
    attempts = {
        "a context naming alice, no token": forged_context,
        "a token of another key": {
            **forged_context,
            "Authorization": f"Bearer {devtokens.issue(secrets.token_bytes(32), 'alice')}",
        },
        "bob's own token": auth(key, "bob"),
        "groups that are no list": {
            "Authorization": "Bearer "
            + _token_with({"sub": "bob", "groups": "reporter admin", "exp": 4_000_000_000}, key)
        },
        "a group with a space": {
            "Authorization": "Bearer "
            + _token_with({"sub": "bob", "groups": ["x admin"], "exp": 4_000_000_000}, key)
        },
    }
    for path in ("/resume", "/runs"):
        for name, headers in attempts.items():
            response = client.post(path, data=body, headers=headers)
            assert response.status_code in (401, 403), (path, name, response.get_data(as_text=True))
            assert wiring.stores().requests.get(CHAT, 0).state is RequestState.PENDING

    # Control: alice's own token answers her card
    assert client.post("/resume", data=body, headers=auth(key)).status_code == 200
    assert wiring.stores().requests.get(CHAT, 0).decision == "approved"


def test_nothing_reaches_the_tap_path_of_the_local_server(api: tuple[Client, bytes]) -> None:
    client, key = api
    request = _paused(client, key)
    tap = {
        "channel": "slack",
        "external_id": "U-ALICE",
        "chat_id": CHAT,
        "fingerprint": "x",
        "status": "resolved",
        "payload": None,
        "choice": "a",
    }
    for path in ("/events", "/v1/events"):
        response = client.post(path, data=json.dumps({"interlockTap": tap}), headers=auth(key))
        assert response.status_code in (404, 405)
    after = wiring.stores().requests.get(CHAT, 0)
    assert (after.state, after.claim_count, after.decision) == (RequestState.PENDING, 0, None)
    assert after.secret_hash == request.secret_hash
