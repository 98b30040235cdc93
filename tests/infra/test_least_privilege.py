"""IAM itself keeps the design's promises, and the promises break no function.

Each role's synthesized statements are evaluated (`tests/infra/iam.py`):

- against the calls each function must never make (`FORBIDDEN`, listed per function):
  claiming a request, recording its answer, journal or final text, re-addressing a
  request to another user or role, writing the pre-approved list or an account link,
  and for the channels function anything but a delivery. Each is spelled with the
  fewest attributes it could name, the case a denial keyed on attribute names finds
  hardest;
- against every DynamoDB call each function made in a tour of every route, the webhooks,
  the finder and the settle queue (`tests/calls.py`), each with every attribute it names
  in any expression, the case a denial finds easiest. All must be allowed: a denial
  the code trips over would break a deployed function, and moto does not evaluate IAM;
- against single requests the pointer store builds, stopped before they are sent: the
  reroute, which the tour does not make, and the writes a denial sits closest to.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from aws_cdk.assertions import Template

from infra.permissions import ADDRESS_ATTRIBUTES, FunctionName
from infra.wiring import Stacks
from interlock.adapters.requests import RequestStore
from interlock.adapters.schema import CLAIM_ATTRIBUTES, LINK_ATTRIBUTES
from interlock.records import RequestRecord
from interlock.timing import DAY_S, StorePolicy
from interlock.tokens import hash_secret
from tests.api.support import auth, resume_body, run_body, stream
from tests.calls import Call, Recorder, calls_of, recording
from tests.channels import fakes
from tests.channels.conftest import Setup, channels  # noqa: F401 (the fixture)
from tests.channels.test_channels import TG_ALICE, link, pause, settled, tap_telegram
from tests.e2e.support import wait_for
from tests.infra.iam import decide
from tests.infra.support import ALL_FUNCTIONS, TABLE_ARN, statements

ROOT = Path(__file__).resolve().parents[2]
WRITES = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")


def _call(action: str, pk: str, *attributes: str) -> Call:
    return Call(
        "", f"dynamodb:{action}", None, frozenset({pk}), frozenset({"pk", "sk", *attributes})
    )


# What the claimers alone may do to a chat's request and its run.
CLAIMING = {
    "claim a request": _call("UpdateItem", "CHAT#c1", "state", "lease_token"),
    "take over a lapsed claim": _call("UpdateItem", "CHAT#c1", "worker"),
    "record an answer": _call("UpdateItem", "CHAT#c1", "decision"),
    "replace an answer's journal": _call("UpdateItem", "CHAT#c1", "journal_id"),
    "write a journal step": _call("PutItem", "CHAT#c1", "entry", "ttl"),
    "finish with a final text": _call("UpdateItem", "CHAT#c1", "final_text"),
    "put a claimed pointer": _call("PutItem", "CHAT#c1", "state", "lease_token"),
}
# What a reroute alone may do to a pending request: change whom it is addressed to.
READDRESSING = {
    "re-address a request to another user": _call("UpdateItem", "CHAT#c1", "user_id"),
    "reroute a request to another role": _call("UpdateItem", "CHAT#c1", "route_role"),
    "re-address a request with a secret of its own": _call(
        "UpdateItem", "CHAT#c1", "user_id", "secret_hash"
    ),
}
# What the administrators' routes alone may do.
ADMINISTERING = {
    "pre-approve for everyone": _call("PutItem", "ADMIN", "subject_kind"),
    "remove a pre-approval": _call("DeleteItem", "ADMIN"),
    "link an account": _call("PutItem", "LINK#telegram#1001", "user_id"),
    "unlink an account": _call("DeleteItem", "LINK#telegram#1001"),
    "point a user's cards elsewhere": _call("PutItem", "LINKS#alice", "address"),
    "forge a reverse link": _call("UpdateItem", "USER#alice", "linked_by"),
    "drop a user's link": _call("DeleteItem", "LINKS#alice"),
    "pre-approve beside a chat write": Call(
        "",
        "dynamodb:BatchWriteItem",
        None,
        frozenset({"CHAT#c1", "ADMIN"}),
        frozenset({"pk", "sk"}),
    ),
}
# What only the functions that keep chats may do.
CHATTING = {
    "grant an approval row": _call("PutItem", "CHAT#c1", "card_id", "subject_name"),
    "cancel a request": _call("UpdateItem", "CHAT#c1", "state"),
    "append a turn": _call("PutItem", "CHAT#c1", "turn"),
    "take a turn slot": _call("PutItem", "USER#alice", "holder"),
    "look up approvals": Call(
        "", "dynamodb:BatchGetItem", None, frozenset({"CHAT#c1", "ADMIN"}), frozenset({"pk", "sk"})
    ),
}
FORBIDDEN: dict[FunctionName, dict[str, Call]] = {
    "run": CLAIMING | READDRESSING | ADMINISTERING,
    "resume": READDRESSING | ADMINISTERING,
    "requests": CLAIMING | READDRESSING | ADMINISTERING,
    "admin": CLAIMING | READDRESSING | CHATTING,
    "channels": CLAIMING | READDRESSING | ADMINISTERING | CHATTING,
    "sweeper": CLAIMING | READDRESSING | ADMINISTERING | CHATTING,
    "settle": ADMINISTERING,
}
CASES = [(name, what) for name, calls in FORBIDDEN.items() for what in calls]


@pytest.mark.parametrize(("name", "what"), CASES, ids=[f"{n}: {w}" for n, w in CASES])
def test_a_function_may_not_do_what_the_design_keeps_from_it(
    stacks: Stacks, api_template: Template, name: FunctionName, what: str
) -> None:
    found = statements(stacks, api_template, name)
    assert decide(found, FORBIDDEN[name][what], TABLE_ARN) != "allowed"


@pytest.mark.parametrize("name", ["resume", "settle"])
@pytest.mark.parametrize("what", [*CLAIMING, *CHATTING])
def test_the_claimers_may_claim_and_keep_the_chat(
    stacks: Stacks, api_template: Template, name: FunctionName, what: str
) -> None:
    # The denials name exactly the others: the claimers keep their own calls
    found = statements(stacks, api_template, name)
    assert decide(found, (CLAIMING | CHATTING)[what], TABLE_ARN) == "allowed"


@pytest.mark.parametrize("name", ["run", "resume", "requests"])
@pytest.mark.parametrize("what", READDRESSING)
def test_the_roles_that_update_requests_are_denied_re_addressing_one(
    stacks: Stacks, api_template: Template, name: FunctionName, what: str
) -> None:
    # Each may update the pointer: an explicit denial, not a missing grant, stops it
    found = statements(stacks, api_template, name)
    assert decide(found, READDRESSING[what], TABLE_ARN) == "denied"


NOW_MS = 1_800_000_000_000
PENDING = RequestRecord(
    chat_id="c1",
    interrupt_id="i1",
    kind="approval",
    card={},
    secret_hash=hash_secret("s"),
    snapshot_key="snapshots/c1/i1",
    user_id="alice",
    turn_seq=1,
    created_at=NOW_MS // 1000 - 600,
    expires_at=NOW_MS // 1000 - 60,
    ttl=NOW_MS // 1000 + DAY_S,
)


class _Sent(Exception):
    """A request the store made, stopped before it reached DynamoDB."""

    def __init__(self, operation: str, params: Mapping[str, Any]) -> None:
        super().__init__(operation)
        self.operation, self.params = operation, params


class _Stopping:
    """A DynamoDB client that raises each request it is sent as `_Sent`."""

    def __getattr__(self, method: str) -> Callable[..., Any]:
        def send(**params: Any) -> Any:
            raise _Sent("".join(word.title() for word in method.split("_")), params)

        return send


def _sent(function: FunctionName, write: Callable[[RequestStore], object]) -> Call:
    """The one authorization of the one request `write` makes, as `function` made it."""
    store = RequestStore(cast(Any, _Stopping()), "interlock", StorePolicy())
    with pytest.raises(_Sent) as sent:
        write(store)
    (call,) = calls_of(function, sent.value.operation, sent.value.params)
    return call


def test_the_settle_role_alone_may_reroute_a_request(
    stacks: Stacks, api_template: Template
) -> None:
    # The reroute as the code spells it: the role in its update and its condition
    reroute = _sent("settle", lambda store: store.reroute(PENDING, "oncall", 600, NOW_MS))
    assert reroute.action == "dynamodb:UpdateItem"
    assert "route_role" in reroute.attributes
    assert decide(statements(stacks, api_template, "settle"), reroute, TABLE_ARN) == "allowed"
    for name in ("run", "resume", "requests"):
        found = statements(stacks, api_template, name)
        assert decide(found, reroute, TABLE_ARN) == "denied", name


def test_the_run_role_still_opens_a_request_for_its_user_and_rotates_its_secret(
    stacks: Stacks, api_template: Template
) -> None:
    found = statements(stacks, api_template, "run")
    # The pause writes the pointer, whom it asks included, with a put
    opened = _sent("run", lambda store: store.open(PENDING, NOW_MS))
    assert opened.action == "dynamodb:PutItem"
    assert "user_id" in opened.attributes
    assert decide(found, opened, TABLE_ARN) == "allowed"
    # A resync rotates the card's secret with an update that names neither attribute
    rotated = _sent(
        "run", lambda store: store.rotate_secret(PENDING, "stream", hash_secret("t"), NOW_MS)
    )
    assert rotated.action == "dynamodb:UpdateItem"
    assert not rotated.attributes & set(ADDRESS_ATTRIBUTES)
    assert decide(found, rotated, TABLE_ARN) == "allowed"


def test_the_admin_routes_may_write_their_rows(stacks: Stacks, api_template: Template) -> None:
    found = statements(stacks, api_template, "admin")
    for what, call in ADMINISTERING.items():
        # It puts and deletes its own rows one at a time, never updates, never a user's
        if call.action in ("dynamodb:PutItem", "dynamodb:DeleteItem") and not any(
            key.startswith("USER#") for key in call.leading_keys
        ):
            assert decide(found, call, TABLE_ARN) == "allowed", what


def test_the_denied_attributes_are_the_stores_own() -> None:
    # A misspelled name would deny nothing: each is one the code writes or tests
    code = (ROOT / "shared/interlock/adapters/requests.py").read_text()
    code += (ROOT / "shared/interlock/adapters/channelstore.py").read_text()
    for attribute in (*CLAIM_ATTRIBUTES, *LINK_ATTRIBUTES):
        assert f'"{attribute}"' in code or f"#{attribute}" in code, attribute


@pytest.fixture
def toured(channels: Setup, monkeypatch: pytest.MonkeyPatch) -> Recorder:  # noqa: F811
    """Every function's calls on a tour of everything a deployment does."""
    from interlock.adapters.queue import create_settle_queues
    from interlock.api import wiring
    from local.sqs_poller import LambdaSqsPoller
    from tests.api.test_metrics import _Context, _handler

    endpoint = channels.aws["endpoint"]
    # The test's own reads and set-up go through clients made before the recording.
    dynamodb = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint)
    sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint)
    url, _ = create_settle_queues(sqs, f"settle-{channels.aws['table']}", visibility_timeout_s=60)
    monkeypatch.setenv("INTERLOCK_SETTLE_QUEUE_URL", url)
    wiring.settle_queue.cache_clear()
    client, key = channels.client, channels.key
    with recording() as recorder:
        # The administrators' routes
        link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
        link(channels, "slack", "U-GONE", "bob", ["reporter"])
        admin = auth(key, "root", ("admin",))
        assert client.delete("/admin/links/slack/U-GONE", headers=admin).status_code == 200
        assert (
            client.put("/admin/approvals/site/docs.example.org", headers=admin).status_code == 200
        )
        assert (
            client.delete("/admin/approvals/site/docs.example.org", headers=admin).status_code
            == 200
        )

        # A run pauses; the requests routes read it; a Telegram tap answers it
        request = pause(channels, "c1")
        for path in ("/chats/c1/request", "/chats/c1/turns", "/chats/c1/events", "/inbox"):
            assert client.get(path, headers=auth(key)).status_code == 200
        data = next(
            b["callback_data"]
            for row in channels.telegram.recorded.of("sendMessage")[0]["reply_markup"][
                "inline_keyboard"
            ]
            for b in row
            if b["text"] == "Approve"
        )
        assert tap_telegram(channels, fakes.telegram_tap(1, TG_ALICE, data)).status_code == 200
        wait_for(lambda: settled(channels, "c1"), "the tap to be applied")
        assert request is not None

        # A download is approved on the page (grants rows), then revoked; a resync
        paused = stream(
            client.post("/runs", data=run_body("c2", "download the table"), headers=auth(key))
        )
        interrupt = paused[-1].outcome.interrupts[0]
        body = resume_body("c2", interrupt, {"decision": "approve"})
        stream(client.post("/resume", data=body, headers=auth(key)))
        approvals = client.get("/chats/c2/approvals", headers=auth(key)).json
        assert approvals is not None
        granted = next(row for rows in approvals.values() for row in rows)
        revoke = f"/chats/c2/approvals/{granted['kind']}/{granted['name']}"
        assert client.delete(revoke, headers=auth(key)).status_code == 200
        resync = json.dumps({"threadId": "c1", "runId": "r9", "messages": [], "state": {}})
        assert client.post("/runs", data=resync, headers=auth(key)).status_code == 200

        # A request is cancelled
        pause(channels, "c3")
        assert client.delete("/chats/c3/request", headers=auth(key)).status_code == 200

        # A request nobody answered is found and settled
        pause(channels, "c4")
        dynamodb.update_item(
            TableName=channels.aws["table"],
            Key={"pk": {"S": "CHAT#c4"}, "sk": {"S": "REQUEST"}},
            UpdateExpression="SET expires_at = :past",
            ExpressionAttributeValues={":past": {"N": "1"}},
        )
        found = _handler("sweeper").lambda_handler({"source": "aws.events"}, _Context())
        assert found["enqueued"] >= 1
        settle = _handler("settle").lambda_handler
        LambdaSqsPoller(sqs, url, settle, context=_Context()).drain()
    wiring.settle_queue.cache_clear()
    return recorder


def test_every_call_of_a_tour_is_allowed_to_the_function_that_made_it(
    stacks: Stacks, api_template: Template, toured: Recorder
) -> None:
    # Every function took part, and every call was traced to one
    assert toured.unattributed == 0
    assert {call.function for call in toured.calls} == set(ALL_FUNCTIONS)
    refused = {
        name: [call for call in toured.of(name) if decide(found, call, TABLE_ARN) != "allowed"]
        for name in ALL_FUNCTIONS
        for found in [statements(stacks, api_template, name)]
    }
    assert refused == {name: [] for name in ALL_FUNCTIONS}
    # The pause's put of the pointer names whom it asks, and stays allowed
    assert [
        call
        for call in toured.of("run")
        if call.action == "dynamodb:PutItem" and "user_id" in call.attributes
    ]
    # And the claimers really name what the others are denied: the claim's attributes
    claimed = {a for c in toured.calls if c.function in ("resume", "settle") for a in c.attributes}
    assert {"lease_token", "journal_id", "decision", "entry", "final_text"} <= claimed
    others = {
        a for c in toured.calls if c.function not in ("resume", "settle") for a in c.attributes
    }
    assert not others & set(CLAIM_ATTRIBUTES)
