"""The agent cannot answer: both forged chains that once got a card approved by its
owner, nobody having pressed anything, now end with the card pending and nothing
recorded.

Code running in the run function (the agent's tools, a user's agent code) may invoke
the resume function and may write a request's secret hash. It tries:

1. a forged hand-over of a chat tap: "alice's linked Slack account pressed Approve";
2. a forged resume: it writes the hash of a secret it knows, then invokes the resume
   function with a request context naming alice.

Each is sent to the resume app exactly as the Lambda Web Adapter feeds it a direct
invoke (a REST event becomes an HTTP request with the event's context in its header;
anything else passes through to `/events`), on a moto server that plays the user pool
(its ID tokens and published keys) and KMS (the hand-over key). A control in each
shows the same path accepts the genuine article, so the refusals are the checks'.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import boto3
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.testclient import TestClient

from interlock.api.forward import TAP_EVENT, resume_event, tap_event
from interlock.channels import Tap, fingerprint
from interlock.records import RequestState, fresh_secret
from local.emulator import Emulator
from tests.api.support import EVENTS, resume_body, run_body
from tests.conftest import REGION, fresh_storage

CHAT = "c-forged"


@dataclass
class Deployed:
    """The resume function's app and what the attacker and the control can reach."""

    run: TestClient
    resume: TestClient
    aws: dict[str, Any]
    stores: Any
    kms: Any
    hand_over_key: str
    pool: str
    client_id: str
    alice: str  # her ID token
    mallory: str
    alice_sub: str

    def stored(self) -> str:
        items = self.aws["dynamodb"].scan(TableName=self.aws["table"], ConsistentRead=True)
        keyed = sorted(json.dumps(i, sort_keys=True, default=str) for i in items["Items"])
        return json.dumps(keyed)


def _user(idp: Any, pool: str, client: str, name: str, groups: list[str]) -> str:
    idp.admin_create_user(UserPoolId=pool, Username=name, MessageAction="SUPPRESS")
    idp.admin_set_user_password(
        UserPoolId=pool, Username=name, Password="Correct-horse-9!", Permanent=True
    )
    for group in groups:
        idp.admin_add_user_to_group(UserPoolId=pool, Username=name, GroupName=group)
    signed_in = idp.admin_initiate_auth(
        UserPoolId=pool,
        ClientId=client,
        AuthFlow="ADMIN_NO_SRP_AUTH",
        AuthParameters={"USERNAME": name, "PASSWORD": "Correct-horse-9!"},
    )
    return str(signed_in["AuthenticationResult"]["IdToken"])


def _sub(token: str) -> str:
    return str(jwt.decode(token, options={"verify_signature": False})["sub"])


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch, emulator: Emulator) -> Iterator[Deployed]:
    from interlock.adapters.factory import build_stores
    from interlock.api import stream, wiring

    aws = fresh_storage(emulator.endpoint, "forged")
    session = boto3.session.Session(region_name=REGION)
    idp = session.client("cognito-idp", endpoint_url=emulator.endpoint)
    kms = session.client("kms", endpoint_url=emulator.endpoint)
    pool = idp.create_user_pool(PoolName="interlock")["UserPool"]["Id"]
    client = idp.create_user_pool_client(UserPoolId=pool, ClientName="page")
    client_id = client["UserPoolClient"]["ClientId"]
    idp.create_group(UserPoolId=pool, GroupName="reporter")
    alice = _user(idp, pool, client_id, "alice", ["reporter"])
    mallory = _user(idp, pool, client_id, "mallory", ["reporter"])
    key = kms.create_key(KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC")
    for name, value in {
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "AWS_REGION": REGION,
        "INTERLOCK_TABLE": aws["table"],
        "INTERLOCK_BUCKET": aws["bucket"],
        "INTERLOCK_MODEL": "scripted",
        "INTERLOCK_FETCH": "demo",
        "INTERLOCK_USER_POOL_ID": pool,
        "INTERLOCK_USER_POOL_CLIENT_IDS": client_id,
        "INTERLOCK_HAND_OVER_KEY": key["KeyMetadata"]["Arn"],
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    for cached in (wiring.config, wiring.stores, wiring.runtime, wiring.notifier):
        cached.cache_clear()
    wiring.hand_over_key.cache_clear()
    wiring.use_local_tokens(None)
    monkeypatch.setenv("INTERLOCK_FUNCTION", "run")
    run = TestClient(stream.create_app())
    monkeypatch.setenv("INTERLOCK_FUNCTION", "resume")
    resume = TestClient(stream.create_app())
    stores = build_stores(aws["dynamodb"], aws["s3"], aws["table"], aws["bucket"])
    yield Deployed(
        run,
        resume,
        aws,
        stores,
        kms,
        key["KeyMetadata"]["Arn"],
        pool,
        client_id,
        alice,
        mallory,
        _sub(alice),
    )
    for cached in (wiring.config, wiring.stores, wiring.runtime, wiring.notifier):
        cached.cache_clear()
    wiring.hand_over_key.cache_clear()


def _context(sub: str, groups: str = "reporter") -> dict[str, Any]:
    """A request context as API Gateway's Cognito authorizer fills it: what a forger
    writes into a direct invoke."""
    return {
        "requestId": "req-forged",
        "stage": "v1",
        "httpMethod": "POST",
        "resourcePath": "/resume",
        "authorizer": {"claims": {"sub": sub, "cognito:groups": groups}},
    }


def _paused(d: Deployed) -> Any:
    """Alice asks for the report to be sent; her run pauses on its approval card."""
    response = d.run.post(
        "/runs",
        content=run_body(CHAT, "send the report"),
        headers={
            "x-amzn-request-context": json.dumps(_context(d.alice_sub) | {"resourcePath": "/runs"})
        },
    )
    assert response.status_code == 200, response.text
    request = d.stores.requests.get(CHAT, 0)
    assert request is not None and request.state is RequestState.PENDING
    return request


def _as_the_adapter_feeds(client: TestClient, event: dict[str, Any]) -> Any:
    """A direct invoke with `event`, as the Web Adapter turns it into an HTTP request:
    a REST event to its path with its headers and its context in a header; anything
    else to the pass-through path as it is."""
    if "httpMethod" not in event:
        return client.post("/events", content=json.dumps(event))
    headers = {**event["headers"], "x-amzn-request-context": json.dumps(event["requestContext"])}
    return client.post(event["path"], content=event["body"], headers=headers)


def _untouched(d: Deployed, before: str) -> None:
    request = d.stores.requests.get(CHAT, 0)
    assert request.state is RequestState.PENDING and request.claim_count == 0
    assert request.decision is None
    assert d.stored() == before, "a refused forgery changed a record"


def _refusal(response: Any) -> str | None:
    if response.status_code in (401, 403):
        return str(response.json()["error"]["code"])
    lines = response.text.splitlines()
    events = [EVENTS.validate_json(line[6:]) for line in lines if line.startswith("data: ")]
    errors = [e.code for e in events if e.type == "RUN_ERROR"]
    return errors[-1] if errors else None


def _forged_token(sub: str, d: Deployed) -> str:
    """An ID token naming alice, signed with a key of the forger's own."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {
        "sub": sub,
        "aud": d.client_id,
        "iss": f"https://cognito-idp.{REGION}.amazonaws.com/{d.pool}",
        "token_use": "id",
        "iat": 1_700_000_000,
        "exp": 4_000_000_000,
        "cognito:groups": ["reporter"],
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "dummy"})


def test_a_forged_tap_hand_over_is_refused_and_the_card_stays_pending(d: Deployed) -> None:
    request = _paused(d)
    d.stores.channels.link(_link("slack", "U-ALICE", d.alice_sub), "root", 0)
    tap = Tap("slack", "U-ALICE", CHAT, fingerprint(request.interrupt_id), "resolved", None, "a")
    before = d.stored()

    # Unsigned, signed with garbage, or signed with a key the forger may use: refused
    own_key = d.kms.create_key(KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC")["KeyMetadata"]
    forgeries = {
        "unsigned": {TAP_EVENT: asdict(tap)},
        "garbage": {TAP_EVENT: asdict(tap), "mac": "bm90IGEgbWFj"},
        "not base64": {TAP_EVENT: asdict(tap), "mac": "%%%"},
        "another key": tap_event(tap, lambda body: _mac(d, own_key["Arn"], body)),
    }
    for name, event in forgeries.items():
        response = _as_the_adapter_feeds(d.resume, event)
        assert response.status_code == 403, (name, response.text)
        _untouched(d, before)
    # A genuine hand-over's signature, moved onto another tap, is refused too
    genuine = tap_event(tap, lambda body: _mac(d, d.hand_over_key, body))
    moved = {**genuine, TAP_EVENT: {**genuine[TAP_EVENT], "choice": "r"}}
    assert _as_the_adapter_feeds(d.resume, moved).status_code == 403
    _untouched(d, before)

    # Control: the channels function's own hand-over is applied
    applied = _as_the_adapter_feeds(d.resume, genuine)
    assert applied.status_code == 200, applied.text
    assert applied.json()["outcome"] == "applied", applied.text
    assert d.stores.requests.get(CHAT, 0).decision == "approved"


def _mac(d: Deployed, key: str, body: Any) -> str:
    from interlock.adapters.handover import KmsHandOverKey

    return KmsHandOverKey(d.kms, key).sign(body)


def _link(channel: str, external: str, user: str) -> Any:
    from interlock.channels import Link

    return Link(channel=channel, external_id=external, user_id=user, roles=frozenset({"reporter"}))  # type: ignore[arg-type]


def test_a_forged_resume_with_a_planted_secret_is_refused_and_the_card_stays_pending(
    d: Deployed,
) -> None:
    request = _paused(d)
    # The forger writes the hash of a secret it knows (as the run role can)
    secret, secret_hash = fresh_secret()
    d.stores.requests.rotate_secret(request, "stream", secret_hash, 0)
    interrupt = type("I", (), {"id": request.interrupt_id, "metadata": {"secret": secret}})
    body = resume_body(CHAT, interrupt, {"decision": "approve"})
    before = d.stored()

    attempts = {
        "no token, alice's context": None,
        "a token of the forger's own key": f"Bearer {_forged_token(d.alice_sub, d)}",
        "mallory's own token": d.mallory,
        "a truncated token of alice's": d.alice[:-8],
    }
    for name, authorization in attempts.items():
        event = resume_event(_context(d.alice_sub), body, "text/event-stream", authorization)
        response = _as_the_adapter_feeds(d.resume, event)
        assert _refusal(response) in ("unauthorized", "forbidden"), (name, response.text[:300])
        _untouched(d, before)

    # Control: alice's own token, through the same door, answers her card
    event = resume_event(_context(d.alice_sub), body, "text/event-stream", d.alice)
    response = _as_the_adapter_feeds(d.resume, event)
    assert _refusal(response) is None, response.text[:300]
    assert d.stores.requests.get(CHAT, 0).decision == "approved"


@pytest.fixture
def d(deployed: Deployed) -> Deployed:
    return deployed


def test_the_resume_function_reads_groups_from_the_tokens_own_list(d: Deployed) -> None:
    # A context claiming admin changes nothing: the token's groups are what count
    from interlock.api.identity import verified_caller
    from interlock.api.wiring import tokens

    caller = verified_caller(tokens(), d.alice)
    assert (caller.user_id, caller.roles) == (d.alice_sub, frozenset({"reporter"}))
