"""IAM itself keeps the design's promises, and the promises break no function.

Each role's synthesized statements are evaluated (`tests/infra/iam.py`) twice:

- against the calls each function must never make (`FORBIDDEN`, listed per function):
  claiming a request, recording its answer, journal or final text, writing the
  pre-approved list or an account link, and for the channels function anything but a
  delivery. Each is spelled with the fewest attributes it could name, the case a
  denial keyed on attribute names finds hardest;
- against every DynamoDB call each function made in a tour of every route, the webhooks,
  the finder and the settle queue (`tests/calls.py`), each with every attribute it names
  in any expression, the case a denial finds easiest. All must be allowed: a denial
  the code trips over would break a deployed function, and moto does not evaluate IAM.
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from aws_cdk.assertions import Template

from infra.permissions import FunctionName
from infra.wiring import Stacks
from interlock.adapters.schema import CLAIM_ATTRIBUTES, LINK_ATTRIBUTES
from tests.api.support import auth, resume_body, run_body, stream
from tests.calls import Call, Recorder, recording
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
    "run": CLAIMING | ADMINISTERING,
    "resume": ADMINISTERING,
    "requests": CLAIMING | ADMINISTERING,
    "admin": CLAIMING | CHATTING,
    "channels": CLAIMING | ADMINISTERING | CHATTING,
    "sweeper": CLAIMING | ADMINISTERING | CHATTING,
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
    # And the claimers really name what the others are denied: the claim's attributes
    claimed = {a for c in toured.calls if c.function in ("resume", "settle") for a in c.attributes}
    assert {"lease_token", "journal_id", "decision", "entry", "final_text"} <= claimed
    others = {
        a for c in toured.calls if c.function not in ("resume", "settle") for a in c.attributes
    }
    assert not others & set(CLAIM_ATTRIBUTES)
