"""The Slack app manifest in docs/ matches the code: its Request URL is the route the
channels function serves, and its one scope covers every Slack method the client calls."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from interlock.adapters import slack
from interlock.api.routes import ROUTES

ROOT = Path(__file__).resolve().parents[2]
# The Web API methods `chat:write` grants; `views.open` needs no scope (a trigger id).
CHAT_WRITE = {"chat.postMessage", "chat.update", "chat.postEphemeral"}


def test_the_manifests_request_url_is_the_interactions_route() -> None:
    manifest = yaml.safe_load((ROOT / "docs" / "slack-app-manifest.yaml").read_text())
    url = manifest["settings"]["interactivity"]["request_url"]
    path = url.removeprefix("https://API_URL")
    assert any(r.path == path and r.function == "channels" for r in ROUTES), path
    assert manifest["settings"]["interactivity"]["is_enabled"] is True


def test_the_manifests_scope_covers_every_method_the_client_calls() -> None:
    manifest = yaml.safe_load((ROOT / "docs" / "slack-app-manifest.yaml").read_text())
    source = Path(slack.__file__).read_text()
    called = set(re.findall(r'_call\(\s*"/([a-zA-Z.]+)"', source))
    assert called, "the client's calls were not found"
    assert manifest["oauth_config"]["scopes"]["bot"] == ["chat:write"]
    assert called <= CHAT_WRITE | {"views.open"}, called - CHAT_WRITE
