"""The administrator's list has a writer: an admin-only route and a command."""

from __future__ import annotations

from typing import Any

import pytest
from werkzeug.test import Client

from interlock.admin import main
from local import devtokens
from tests.api.support import auth


def _as(key: bytes, user: str, groups: list[str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {devtokens.issue(key, user, groups)}"}


def test_only_an_administrator_may_change_the_list(api: tuple[Client, bytes]) -> None:
    client, key = api
    path = "/admin/approvals/site/Data.Example.org"

    refused = client.put(path, headers=auth(key))
    assert (refused.status_code, refused.json["error"]["code"]) == (403, "forbidden")

    granted = client.put(path, headers=_as(key, "root", ["admin"]))
    assert granted.json == {"preapproved": {"kind": "site", "name": "data.example.org"}}
    listed = client.get("/chats/c1/approvals", headers=auth(key)).json["preapproved"]
    assert [(a["name"], a["grantedBy"]) for a in listed] == [("data.example.org", "root")]

    assert client.delete(path, headers=_as(key, "root", ["admin"])).status_code == 200
    again = client.delete(path, headers=_as(key, "root", ["admin"]))
    assert (again.status_code, again.json["error"]["code"]) == (404, "unknown")
    bad = client.put("/admin/approvals/site/127.0.0.1", headers=_as(key, "root", ["admin"]))
    assert bad.status_code == 422


def test_the_command_grants_lists_and_revokes(
    api: tuple[Client, bytes], capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setenv("INTERLOCK_TABLE", "api-table")
    monkeypatch.setenv("INTERLOCK_BUCKET", "api-bucket")

    assert main(["grant", "package", "NumPy", "--by", "ops"]) == 0
    assert main(["list"]) == 0
    assert '"name": "numpy"' in capsys.readouterr().out
    assert main(["revoke", "package", "numpy"]) == 0
    assert main(["revoke", "package", "numpy"]) == 1
    assert main(["grant", "site", "localhost"]) == 2
