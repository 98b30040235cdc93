"""The Slack app manifest in docs/ matches the code: its Request URL is the route the
channels function serves, and its scopes cover every Slack method the client calls, and
no more."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from interlock.adapters import slack
from interlock.api.routes import ROUTES

ROOT = Path(__file__).resolve().parents[2]
# The scopes each Web API method the client calls needs (a bot token's; any one of a
# method's scopes lets it read that kind of conversation, so it needs them all to read
# wherever a card may be posted); `views.open` needs none (a trigger id).
NEEDS = {
    "chat.postMessage": {"chat:write"},
    "chat.update": {"chat:write"},
    "chat.postEphemeral": {"chat:write"},
    "views.open": set(),
    # Finding a post whose reference was lost: the app's direct message with a person,
    # then its history (a channel's, a private channel's, a DM's or a group DM's).
    "conversations.open": {"im:write"},
    "conversations.history": {
        "channels:history",
        "groups:history",
        "im:history",
        "mpim:history",
    },
}


def test_the_manifests_request_url_is_the_interactions_route() -> None:
    manifest = yaml.safe_load((ROOT / "docs" / "slack-app-manifest.yaml").read_text())
    url = manifest["settings"]["interactivity"]["request_url"]
    path = url.removeprefix("https://API_URL")
    assert any(r.path == path and r.function == "channels" for r in ROUTES), path
    assert manifest["settings"]["interactivity"]["is_enabled"] is True


def test_the_manifests_scope_covers_every_method_the_client_calls() -> None:
    manifest = yaml.safe_load((ROOT / "docs" / "slack-app-manifest.yaml").read_text())
    source = Path(slack.__file__).read_text()
    called = set(re.findall(r'(?:_call|_http\.post)\(\s*"/([a-zA-Z.]+)"', source))
    assert called, "the client's calls were not found"
    assert called <= NEEDS.keys(), called - NEEDS.keys()
    wanted = set().union(*(NEEDS[method] for method in called))
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == wanted
