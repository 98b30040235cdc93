"""The user pool's ID tokens, verified against the keys the pool publishes.

PyJWT does the cryptography and the claim checks (signature, `exp`, `iat`, issuer,
audience); its key client fetches the pool's JSON Web Key Set once and again only for
a key id it has not seen (the pool rotated its keys). On AWS the keys are at
`https://cognito-idp.<region>.amazonaws.com/<pool id>/.well-known/jwks.json`; with
`AWS_ENDPOINT_URL` set (an emulator) at `<endpoint>/<pool id>/.well-known/jwks.json`,
where moto serves them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import jwt

from interlock.errors import StoreError, Unauthorized

ALGORITHMS: Final = ["RS256"]
_KEYS_TIMEOUT_S: Final = 5
# How long the fetched key set is used before it is fetched again; a key id not seen
# yet (the pool rotated its keys) is fetched at once, and a key once used stays cached.
_KEYS_LIFESPAN_S: Final = 3600


def issuer_of(region: str, pool_id: str) -> str:
    """The `iss` of the pool's tokens."""
    return f"https://cognito-idp.{region}.amazonaws.com/{pool_id}"


def keys_url(region: str, pool_id: str, endpoint: str | None = None) -> str:
    """Where the pool publishes its signing keys (an emulator's `endpoint`, if given)."""
    base = endpoint.rstrip("/") + f"/{pool_id}" if endpoint else issuer_of(region, pool_id)
    return f"{base}/.well-known/jwks.json"


class CognitoTokens:
    """Verifies ID tokens of one user pool issued to one of its app clients.

    Args:
        issuer: The pool's issuer (`issuer_of`).
        client_ids: The app clients whose ID tokens are accepted (the `aud` claim).
        jwks_url: Where the pool's keys are (`keys_url`).
    """

    def __init__(self, issuer: str, client_ids: Sequence[str], jwks_url: str) -> None:
        if not client_ids:
            raise ValueError("at least one app client id is needed")
        self._issuer = issuer
        self._clients = list(client_ids)
        self._keys = jwt.PyJWKClient(
            jwks_url, cache_keys=True, lifespan=_KEYS_LIFESPAN_S, timeout=_KEYS_TIMEOUT_S
        )

    def claims(self, token: str) -> Mapping[str, Any]:
        """The claims of a valid ID token.

        Raises:
            Unauthorized: the token does not verify, or is not an ID token of ours.
            StoreError: the pool's keys cannot be fetched now; the token is not judged
                (a client told 401 would sign its person out for a passing fault).
        """
        try:
            key = self._keys.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                audience=self._clients,
                issuer=self._issuer,
                options={"require": ["exp", "iat", "iss", "aud", "sub", "token_use"]},
            )
        except jwt.PyJWKClientConnectionError as exc:
            # The keys could not be fetched: nobody is believed until they can be, and
            # nobody is told their token is bad either.
            raise StoreError("the user pool's keys cannot be fetched right now") from exc
        except jwt.PyJWTError:
            raise Unauthorized("the token is not valid") from None
        if claims.get("token_use") != "id":
            raise Unauthorized("an ID token is needed")
        return claims
