"""Correctly signed but malformed webhook deliveries: each is a 4xx, and nothing stored
changes (no delivery recorded, no tap applied, no request touched).

Every malformed body below carries a real Interlock button for a pending card, so a
parser that let it through would answer that card.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest

from interlock.channels import button_data
from tests.channels import fakes
from tests.channels.conftest import Setup
from tests.channels.test_channels import TG_ALICE, link, pause, settled
from tests.e2e.support import wait_for

Mutation = Callable[[dict[str, Any]], Any]
"""Turns a well-formed delivery (a copy) into the body to send: JSON-able or raw text."""

TELEGRAM_WEBHOOK = "/channels/telegram/webhook"
SLACK_WEBHOOK = "/channels/slack/interactions"


class Raw(str):
    """A body sent as it is, not as JSON (or, for Slack, not as the `payload` field)."""


def _set(path: str, value: Any) -> Mutation:
    """A mutation setting the member at a dotted path (`a.0.b`) to `value`."""

    def mutate(body: dict[str, Any]) -> Any:
        *parents, last = path.split(".")
        node: Any = body
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return body

    return mutate


def _whole(value: Any) -> Mutation:
    """A mutation replacing the whole body."""
    return lambda _body: value


def _scan(setup: Setup) -> list[dict[str, Any]]:
    """Every item in the table, in a stable order."""
    client, table = setup.aws["dynamodb"], setup.aws["table"]
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True, default=repr))


def _assert_refused(reply: Any) -> None:
    assert 400 <= reply.status_code < 500, (reply.status_code, reply.get_data(as_text=True))
    assert reply.json["error"]["code"] in ("bad_request", "invalid_payload", "too_large")


TELEGRAM_CASES = [
    pytest.param(_set("callback_query.from", "1001"), id="from-string"),
    pytest.param(_set("callback_query.from", 1001), id="from-number"),
    pytest.param(_set("callback_query.from", [{"id": 1001}]), id="from-list"),
    pytest.param(_set("callback_query.from", None), id="from-null"),
    pytest.param(_set("callback_query.from.id", "1001"), id="from-id-string"),
    pytest.param(_set("callback_query.from.id", True), id="from-id-bool"),
    pytest.param(_set("callback_query.message", "hello"), id="message-string"),
    pytest.param(_set("callback_query.message", 100), id="message-number"),
    pytest.param(_set("callback_query.message", [{"chat": {"id": 1}}]), id="message-list"),
    pytest.param(_set("callback_query.message", None), id="message-null"),
    pytest.param(_set("callback_query.message.chat", "1001"), id="message-chat-string"),
    pytest.param(_set("callback_query.message.chat.id", {"id": 1}), id="message-chat-id-object"),
    pytest.param(_set("callback_query.data", 5), id="data-number"),
    pytest.param(_set("callback_query.data", ["i1|a"]), id="data-list"),
    pytest.param(_set("callback_query.data", None), id="data-null"),
    pytest.param(_set("callback_query.id", 7), id="query-id-number"),
    pytest.param(_set("callback_query", "tap"), id="query-string"),
    pytest.param(_set("callback_query", [1]), id="query-list"),
    pytest.param(_set("message", "hello"), id="update-message-string"),
    pytest.param(_set("update_id", "1"), id="update-id-string"),
    pytest.param(_set("update_id", True), id="update-id-bool"),
    pytest.param(_whole(Raw("{not json")), id="body-not-json"),
    pytest.param(_whole(Raw("")), id="body-empty"),
    pytest.param(_whole([{"update_id": 1}]), id="body-list"),
    pytest.param(_whole("update"), id="body-string"),
    pytest.param(_whole(None), id="body-null"),
]


@pytest.mark.parametrize("mutate", TELEGRAM_CASES)
def test_a_signed_but_malformed_telegram_update_is_a_4xx_and_changes_nothing(
    channels: Setup, mutate: Mutation
) -> None:
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    request = pause(channels, "c1")
    approve = button_data("c1", request.interrupt_id, "a")
    update = mutate(copy.deepcopy(fakes.telegram_tap(41, TG_ALICE, approve)))
    body = update if isinstance(update, Raw) else json.dumps(update)
    before = _scan(channels)

    reply = channels.client.post(TELEGRAM_WEBHOOK, data=body, headers=fakes.telegram_headers())

    _assert_refused(reply)
    assert _scan(channels) == before
    assert channels.telegram.recorded.of("answerCallbackQuery") == []


def _submission(metadata: str) -> dict[str, Any]:
    """A well-formed `view_submission` of the deny-with-feedback form."""
    return {
        "type": "view_submission",
        "user": {"id": "U-ALICE"},
        "view": {
            "private_metadata": metadata,
            "state": {
                "values": {
                    "reason": {"reason": {"type": "plain_text_input", "value": "No"}},
                }
            },
        },
    }


SLACK_TAP_CASES = [
    pytest.param(_whole(Raw("payload=%7Bnot+json")), id="payload-not-json"),
    pytest.param(_whole(Raw("payload=")), id="payload-empty"),
    pytest.param(_whole(Raw("other=1")), id="payload-missing"),
    pytest.param(_whole(Raw("%%%")), id="body-not-form"),
    pytest.param(_whole([{"type": "block_actions"}]), id="payload-list"),
    pytest.param(_whole("block_actions"), id="payload-string"),
    pytest.param(_whole(7), id="payload-number"),
    pytest.param(_set("user", "U-ALICE"), id="user-string"),
    pytest.param(_set("user", ["U-ALICE"]), id="user-list"),
    pytest.param(_set("user.id", 7), id="user-id-number"),
    pytest.param(_set("user.id", "U-\ud800"), id="user-id-lone-surrogate"),
    pytest.param(_set("actions", "approve"), id="actions-string"),
    pytest.param(_set("actions", {"0": {}}), id="actions-object"),
    pytest.param(_set("actions.0", "approve"), id="action-string"),
    pytest.param(_set("actions.0", ["approve"]), id="action-list"),
    pytest.param(_set("actions.0.value", 5), id="action-value-number"),
    pytest.param(_set("container", []), id="container-list"),
    pytest.param(_set("container.channel_id", 5), id="container-channel-number"),
    pytest.param(_set("response_url", 5), id="response-url-number"),
    pytest.param(_set("trigger_id", ["t"]), id="trigger-id-list"),
    pytest.param(_set("type", ["block_actions"]), id="type-list"),
]

SLACK_FORM_CASES = [
    pytest.param(_set("view", "form"), id="view-string"),
    pytest.param(_set("view.private_metadata", 5), id="view-metadata-number"),
    pytest.param(_set("view.state", "x"), id="view-state-string"),
    pytest.param(_set("view.state.values", [1]), id="view-values-list"),
    pytest.param(_set("view.state.values.reason", "No"), id="view-block-string"),
    pytest.param(_set("view.state.values.reason.reason", "No"), id="view-element-string"),
    pytest.param(
        _set("view.state.values.reason.reason", {"selected_options": 5}),
        id="view-selected-options-number",
    ),
    pytest.param(
        _set("view.state.values.reason.reason", {"selected_options": ["a"]}),
        id="view-selected-option-items-text",
    ),
    pytest.param(
        _set("view.state.values.reason.reason", {"selected_option": "a"}),
        id="view-selected-option-string",
    ),
    pytest.param(
        _set("view.state.values.reason.reason", {"value": {"text": "No"}}),
        id="view-value-object",
    ),
]


def _slack_body(payload: Any) -> str:
    if isinstance(payload, Raw):
        return str(payload)
    return urlencode({"payload": json.dumps(payload)})


def _post_slack(setup: Setup, payload: Any) -> Any:
    body = _slack_body(payload)
    headers = fakes.slack_headers(body)
    return setup.client.post(SLACK_WEBHOOK, data=body, headers=headers)


@pytest.mark.parametrize("mutate", SLACK_TAP_CASES)
def test_a_signed_but_malformed_slack_tap_is_a_4xx_and_changes_nothing(
    channels: Setup, mutate: Mutation
) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "c1")
    approve = button_data("c1", request.interrupt_id, "a")
    payload = mutate(copy.deepcopy(fakes.slack_tap("U-ALICE", approve, channels.slack.url)))
    before = _scan(channels)

    reply = _post_slack(channels, payload)

    _assert_refused(reply)
    assert _scan(channels) == before
    assert channels.slack.recorded.of("response_url") == []
    assert channels.slack.recorded.of("views.open") == []


@pytest.mark.parametrize("mutate", SLACK_FORM_CASES)
def test_a_signed_but_malformed_slack_form_is_a_4xx_and_changes_nothing(
    channels: Setup, mutate: Mutation
) -> None:
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "c1")
    metadata = json.dumps(
        {"data": button_data("c1", request.interrupt_id, "f"), "channel": "C-cards"}
    )
    payload = mutate(copy.deepcopy(_submission(metadata)))
    before = _scan(channels)

    reply = _post_slack(channels, payload)

    _assert_refused(reply)
    assert _scan(channels) == before
    assert channels.slack.recorded.of("chat.postEphemeral") == []


def test_the_well_formed_deliveries_these_start_from_are_accepted(channels: Setup) -> None:
    """The control: unchanged, the deliveries above answer 200 (so each 4xx is the
    malformation's doing)."""
    link(channels, "telegram", str(TG_ALICE), "alice", ["reporter"])
    link(channels, "slack", "U-ALICE", "alice", ["reporter"])
    request = pause(channels, "c1")
    feedback = json.dumps({"data": button_data("c1", request.interrupt_id, "f")})
    form = _post_slack(channels, _submission(feedback))
    assert form.status_code == 200, form.get_data(as_text=True)
    wait_for(lambda: settled(channels, "c1"), "the form's answer to be applied")
    approve = button_data("c1", request.interrupt_id, "a")
    update = fakes.telegram_tap(41, TG_ALICE, approve)
    tap = channels.client.post(
        TELEGRAM_WEBHOOK, data=json.dumps(update), headers=fakes.telegram_headers()
    )
    assert tap.status_code == 200, tap.get_data(as_text=True)
