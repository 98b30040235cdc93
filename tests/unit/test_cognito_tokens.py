"""The resume function's check of a person's ID token, against keys published by a
user pool stand-in on 127.0.0.1: only a token the pool signed, for our app client, as an
ID token, unexpired, is believed; a key server that cannot be reached judges nobody."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from interlock import errors
from interlock.adapters.cognito import CognitoTokens

ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_pool"
CLIENT = "page-client"
POOL_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


class _Keys(BaseHTTPRequestHandler):
    body: ClassVar[bytes] = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def keys_url() -> Iterator[str]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(POOL_KEY.public_key()))
    _Keys.body = json.dumps(
        {"keys": [{**jwk, "kid": "pool-1", "alg": "RS256", "use": "sig"}]}
    ).encode()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Keys)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/pool/.well-known/jwks.json"
    server.shutdown()
    server.server_close()


def _token(key: Any = POOL_KEY, alg: str = "RS256", kid: str = "pool-1", **changes: Any) -> str:
    now = int(time.time())
    claims = {
        "sub": "alice-sub",
        "aud": CLIENT,
        "iss": ISSUER,
        "token_use": "id",
        "iat": now,
        "exp": now + 600,
        "cognito:groups": ["reporter"],
        **changes,
    }
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})


def test_a_token_the_pool_signed_for_our_client_is_believed(keys_url: str) -> None:
    claims = CognitoTokens(ISSUER, [CLIENT], keys_url).claims(_token())
    assert (claims["sub"], claims["cognito:groups"]) == ("alice-sub", ["reporter"])


def _public_pem() -> bytes:
    return POOL_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _hmac_with_public_key() -> str:
    """The classic confusion: HS256 keyed with the pool's public key, made by hand (the
    library refuses to make it)."""
    import base64
    import hashlib
    import hmac

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"sub": "alice-sub", "aud": CLIENT, "iss": ISSUER, "token_use": "id", "iat": now}
    body = f"{part({'alg': 'HS256', 'kid': 'pool-1'})}.{part({**claims, 'exp': now + 600})}"
    mac = hmac.new(_public_pem(), body.encode(), hashlib.sha256).digest()
    return f"{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


FORGERIES = [
    pytest.param(lambda: _token(OTHER_KEY), id="signed with another key"),
    pytest.param(lambda: _token(OTHER_KEY, kid="other"), id="a key id the pool never had"),
    pytest.param(lambda: _token(aud="another-client"), id="for another app client"),
    pytest.param(
        lambda: _token(iss="https://cognito-idp.us-east-1.amazonaws.com/x"), id="another pool"
    ),
    pytest.param(lambda: _token(token_use="access"), id="an access token"),
    pytest.param(lambda: _token(token_use=None), id="no token_use"),
    pytest.param(lambda: _token(exp=int(time.time()) - 60), id="expired"),
    pytest.param(lambda: _token(sub=None), id="no subject"),
    pytest.param(lambda: _hmac_with_public_key(), id="HMAC with the public key"),
    pytest.param(
        lambda: jwt.encode(
            {"sub": "alice-sub", "aud": CLIENT, "iss": ISSUER}, None, algorithm="none"
        ),
        id="alg none",
    ),
    pytest.param(lambda: "not.a.token", id="garbage"),
    pytest.param(lambda: _token()[:-6], id="truncated signature"),
]


@pytest.mark.parametrize("make", FORGERIES)
def test_anything_else_is_not_believed(keys_url: str, make: Any) -> None:
    with pytest.raises(errors.Unauthorized):
        CognitoTokens(ISSUER, [CLIENT], keys_url).claims(make())


def test_a_key_server_that_cannot_be_reached_judges_nobody() -> None:
    # A port nothing listens on: the check cannot run, which is not a bad token
    with pytest.raises(errors.StoreError):
        CognitoTokens(ISSUER, [CLIENT], "http://127.0.0.1:9/pool/.well-known/jwks.json").claims(
            _token()
        )
