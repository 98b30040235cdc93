"""Whom the resume function may trust: a tap signed by the channels function alone, and
a person's ID token from the user pool alone.

The channels function hands each screened tap to the resume function, signed with an
HMAC key in KMS: IAM lets the channels role sign with it and the resume role verify with
it, and no role anything else. Nor may a role that has no business there mint or change
a person's sign-in, overwrite a secret, or write a user's account links. Each role's
synthesized statements are evaluated (`tests/infra/iam.py`) in a deployment with both
channels and an OpenAI-compatible model, so every secret a role could touch exists.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.permissions import WRITE_ACTIONS, FunctionName
from infra.wiring import Stacks, build
from tests.calls import Call
from tests.infra.iam import decide, decide_action
from tests.infra.support import (
    ALL_FUNCTIONS,
    TABLE_ARN,
    function_construct,
    listed,
    logical_id,
    resource,
    statements,
)

SIGN, VERIFY = "kms:GenerateMac", "kms:VerifyMac"
# What would let a role sign a person in, or change how they sign in.
SIGN_IN_ADMIN_ACTIONS = (
    "cognito-idp:AdminInitiateAuth",
    "cognito-idp:AdminSetUserPassword",
    "cognito-idp:AdminCreateUser",
    "cognito-idp:AdminUpdateUserAttributes",
    "cognito-idp:AdminAddUserToGroup",
    "cognito-idp:AdminRespondToAuthChallenge",
    "cognito-idp:AdminSetUserMFAPreference",
)
OTHERS: tuple[FunctionName, ...] = ("run", "settle", "requests", "admin", "sweeper")
NOT_ADMIN = tuple(name for name in ALL_FUNCTIONS if name != "admin")
CONTEXT = {
    "interlock:channels": "slack,telegram",
    "interlock:model": "openai:https://api.example.org/v1#gpt-x",
}


@pytest.fixture(scope="module")
def trusted(
    cdk_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Stacks, Template]:
    """The app with both channels and an `openai:` model, synthesized (checks included)."""
    outdir: Path = tmp_path_factory.mktemp("trust.cdk.out")
    app = App(context={**cdk_context, **CONTEXT}, outdir=str(outdir))
    stacks = build(app)
    app.synth()
    return stacks, Template.from_stack(stacks.api)


def _role(trusted: tuple[Stacks, Template], name: FunctionName) -> list[dict[str, Any]]:
    return statements(*trusted, name)


def _arn(stacks: Stacks, construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id(stacks, construct), "Arn"]}


def _key(stacks: Stacks) -> dict[str, Any]:
    return _arn(stacks, stacks.api.hand_over_key)


def _names_anywhere(found: list[dict[str, Any]], action: str) -> bool:
    """Whether any Allow statement names `action`, whatever its resources."""
    return any(
        statement["Effect"] == "Allow"
        and any(fnmatchcase(action, allowed) for allowed in listed(statement["Action"]))
        for statement in found
    )


def _variables(trusted: tuple[Stacks, Template], name: FunctionName) -> dict[str, Any]:
    stacks, template = trusted
    function = function_construct(stacks, name).function
    found: dict[str, Any] = resource(stacks, template, function)["Properties"]["Environment"][
        "Variables"
    ]
    return found


def test_the_hand_over_key_is_an_hmac_key_kept_with_the_stages_data(
    trusted: tuple[Stacks, Template], cdk_context: dict[str, Any]
) -> None:
    stacks, template = trusted
    (key,) = [
        found
        for key_id, found in template.find_resources("AWS::KMS::Key").items()
        if key_id == logical_id(stacks, stacks.api.hand_over_key)
    ]
    assert key["Properties"]["KeySpec"] == "HMAC_256"
    assert key["Properties"]["KeyUsage"] == "GENERATE_VERIFY_MAC"
    assert key["Properties"]["PendingWindowInDays"] == 7
    # KMS rotates no HMAC key
    assert "EnableKeyRotation" not in key["Properties"]
    assert (key["DeletionPolicy"], key["UpdateReplacePolicy"]) == ("Retain", "Retain")

    # A stage torn down with its data schedules the key's deletion with it
    dev = build(App(context={**cdk_context, "interlock:stage": "dev"}))
    (torn_down,) = [
        found
        for key_id, found in Template.from_stack(dev.api).find_resources("AWS::KMS::Key").items()
        if key_id == logical_id(dev, dev.api.hand_over_key)
    ]
    assert torn_down["DeletionPolicy"] == "Delete"
    assert torn_down["Properties"]["PendingWindowInDays"] == 7


def test_the_channels_role_may_sign_a_hand_over_but_not_verify_one(
    trusted: tuple[Stacks, Template],
) -> None:
    found, key = _role(trusted, "channels"), _key(trusted[0])
    assert decide_action(found, SIGN, key) == "allowed"
    assert decide_action(found, VERIFY, key) != "allowed"


def test_the_resume_role_may_verify_a_hand_over_but_not_sign_one(
    trusted: tuple[Stacks, Template],
) -> None:
    found, key = _role(trusted, "resume"), _key(trusted[0])
    assert decide_action(found, VERIFY, key) == "allowed"
    assert decide_action(found, SIGN, key) != "allowed"


@pytest.mark.parametrize("name", OTHERS)
@pytest.mark.parametrize("action", [SIGN, VERIFY])
def test_no_other_role_may_sign_or_verify_a_hand_over(
    trusted: tuple[Stacks, Template], name: FunctionName, action: str
) -> None:
    found = _role(trusted, name)
    assert decide_action(found, action, _key(trusted[0])) != "allowed"
    assert decide_action(found, action, "*") != "allowed"
    assert not _names_anywhere(found, action)


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_the_key_is_named_to_the_two_ends_of_the_hand_over_alone(
    trusted: tuple[Stacks, Template], name: FunctionName
) -> None:
    variables = _variables(trusted, name)
    if name in ("channels", "resume"):
        assert variables["INTERLOCK_HAND_OVER_KEY"] == _key(trusted[0])
    else:
        assert "INTERLOCK_HAND_OVER_KEY" not in variables


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_the_run_and_resume_functions_name_the_pool_and_its_sign_in_client(
    trusted: tuple[Stacks, Template], name: FunctionName
) -> None:
    stacks = trusted[0]
    variables = _variables(trusted, name)
    if name in ("run", "resume"):
        auth = stacks.api.auth
        assert variables["INTERLOCK_USER_POOL_ID"] == {"Ref": logical_id(stacks, auth.user_pool)}
        # The card page's client, which scripts sign in through too: the pool's only one
        assert variables["INTERLOCK_USER_POOL_CLIENT_IDS"] == {
            "Ref": logical_id(stacks, auth.client)
        }
        template = trusted[1]
        template.resource_count_is("AWS::Cognito::UserPoolClient", 1)
    else:
        assert "INTERLOCK_USER_POOL_ID" not in variables
        assert "INTERLOCK_USER_POOL_CLIENT_IDS" not in variables


def test_the_functions_reach_the_pools_published_keys_outside_any_vpc(
    trusted: tuple[Stacks, Template],
) -> None:
    # The resume function fetches the pool's keys from Cognito's public endpoint
    for name in ALL_FUNCTIONS:
        properties = resource(*trusted, function_construct(trusted[0], name).function)
        assert "VpcConfig" not in properties["Properties"], name


@pytest.mark.parametrize("name", NOT_ADMIN)
@pytest.mark.parametrize("action", WRITE_ACTIONS)
def test_no_role_but_the_admins_may_write_under_a_users_links(
    trusted: tuple[Stacks, Template], name: FunctionName, action: str
) -> None:
    # The fewest attributes a write could name: the key alone
    call = Call("", action, None, frozenset({"LINKS#alice"}), frozenset({"pk", "sk"}))
    assert decide(_role(trusted, name), call, TABLE_ARN) != "allowed"


@pytest.mark.parametrize("action", ["dynamodb:PutItem", "dynamodb:DeleteItem"])
def test_the_admin_role_may_write_a_users_links(
    trusted: tuple[Stacks, Template], action: str
) -> None:
    call = Call("", action, None, frozenset({"LINKS#alice"}), frozenset({"pk", "sk", "address"}))
    assert decide(_role(trusted, "admin"), call, TABLE_ARN) == "allowed"


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
@pytest.mark.parametrize("action", SIGN_IN_ADMIN_ACTIONS)
def test_no_role_may_mint_or_change_a_persons_sign_in(
    trusted: tuple[Stacks, Template], name: FunctionName, action: str
) -> None:
    stacks = trusted[0]
    found = _role(trusted, name)
    pool = _arn(stacks, stacks.api.auth.user_pool)
    assert decide_action(found, action, pool) != "allowed"
    assert not _names_anywhere(found, action)


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_no_role_may_overwrite_a_secret(
    trusted: tuple[Stacks, Template], name: FunctionName
) -> None:
    stacks = trusted[0]
    api = stacks.api
    assert api.model_secret is not None
    secrets = [*api.channel_secrets.values(), api.model_secret]
    assert len(secrets) == 3
    found = _role(trusted, name)
    for secret in secrets:
        arn = {"Ref": logical_id(stacks, secret)}
        assert decide_action(found, "secretsmanager:PutSecretValue", arn) != "allowed"
    assert not _names_anywhere(found, "secretsmanager:PutSecretValue")
