"""`cognito:groups` in every form an authorizer passes it, each read exactly one way:
a list (direct invocation), one bare name or names separated by commas (API Gateway
REST's Cognito authorizer), bracketed names separated by spaces (an HTTP API's JWT
authorizer). Anything that could read two ways is refused."""

from __future__ import annotations

from typing import Any

import pytest

from interlock import errors
from interlock.api.http import caller_from


def roles_of(raw: Any) -> frozenset[str]:
    """The roles of a request whose authorizer passed `raw` as the groups claim."""
    claims = {"sub": "u1", "cognito:groups": raw}
    return caller_from({"requestContext": {"authorizer": {"claims": claims}}}).roles


@pytest.mark.parametrize(
    ("raw", "roles"),
    [
        pytest.param(["admin", "reporter"], {"admin", "reporter"}, id="list"),
        pytest.param(["reporter"], {"reporter"}, id="list-of-one"),
        pytest.param("reporter", {"reporter"}, id="rest-one-bare"),
        pytest.param("admin,reporter", {"admin", "reporter"}, id="rest-two-commas"),
        pytest.param("a.b,c_d,e-f,g@h,i:j", {"a.b", "c_d", "e-f", "g@h", "i:j"}, id="rest-many"),
        pytest.param("admin,admin", {"admin"}, id="rest-repeated"),
        pytest.param("[admin reporter]", {"admin", "reporter"}, id="http-api-two"),
        pytest.param("[admin]", {"admin"}, id="http-api-one"),
        pytest.param("", set(), id="empty-string"),
        pytest.param(None, set(), id="absent"),
        pytest.param([], set(), id="empty-list"),
    ],
)
def test_each_form_an_authorizer_passes_is_read(raw: Any, roles: set[str]) -> None:
    assert roles_of(raw) == roles


def test_a_rest_user_in_two_groups_is_no_longer_locked_out() -> None:
    # The REST authorizer's form of a user in admin and reporter: both roles, not a 403
    assert roles_of("admin,reporter") == {"admin", "reporter"}


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("admin,", id="rest-trailing-comma"),
        pytest.param(",admin", id="rest-leading-comma"),
        pytest.param("admin,,reporter", id="rest-empty-name"),
        pytest.param("admin, reporter", id="rest-space-after-comma"),
        pytest.param("admin reporter", id="bare-spaces"),
        pytest.param("[admin,reporter]", id="commas-in-brackets"),
        pytest.param("[admin, reporter]", id="comma-and-space-in-brackets"),
        pytest.param("[admin  reporter]", id="brackets-empty-name"),
        pytest.param("[]", id="brackets-empty"),
        pytest.param("[admin", id="unclosed-bracket"),
        pytest.param("admin]", id="stray-bracket"),
        pytest.param("[[admin]]", id="nested-brackets"),
        pytest.param(" ", id="blank"),
        pytest.param(["x,admin"], id="list-name-with-comma"),
        pytest.param(["admin", "[admin]"], id="list-name-with-brackets"),
        pytest.param([""], id="list-empty-name"),
        pytest.param([1], id="list-number"),
        pytest.param(7, id="number"),
        pytest.param({"admin": True}, id="object"),
        pytest.param("a" * 129, id="name-too-long"),
    ],
)
def test_anything_else_is_refused_outright(raw: Any) -> None:
    with pytest.raises(errors.Forbidden, match="cannot be read unambiguously"):
        roles_of(raw)
