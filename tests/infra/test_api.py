"""The REST API: the route table deployed as is, behind Cognito, validated and logged."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Match, Template

from infra.api import path_parameters
from infra.settings import Settings
from infra.wiring import Stacks, build
from interlock.api.routes import ROUTES, STREAMED, Route
from tests.infra.support import CONFIGURED_AUTH_PREFIX, CONFIGURED_ORIGIN, SITE_ORIGIN, SITE_URL

Resources = dict[str, dict[str, Any]]
_PARAMETER = re.compile(r"{\w+}")


@pytest.fixture(scope="module")
def resources(api_template: Template) -> Resources:
    found: Resources = api_template.to_json()["Resources"]
    return found


@pytest.fixture(scope="module")
def methods(resources: Resources) -> dict[tuple[str, str], dict[str, Any]]:
    """(HTTP method, full path) -> method properties."""
    paths = _resource_paths(resources)
    return {
        (props["HttpMethod"], paths[_ref(props["ResourceId"])]): props
        for props in _properties_of(resources, "AWS::ApiGateway::Method")
    }


def _properties_of(resources: Resources, kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in resources.values() if r["Type"] == kind]


def _ref(value: dict[str, Any]) -> str:
    # The root resource is referenced as the API's RootResourceId attribute
    return "/" if "Fn::GetAtt" in value else str(value["Ref"])


def _resource_paths(resources: Resources) -> dict[str, str]:
    parents = {
        logical_id: (_ref(r["Properties"]["ParentId"]), r["Properties"]["PathPart"])
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::ApiGateway::Resource"
    }

    def path(logical_id: str) -> str:
        if logical_id == "/":
            return ""
        parent, part = parents[logical_id]
        return f"{path(parent)}/{part}"

    return {"/": "/", **{logical_id: path(logical_id) for logical_id in parents}}


def _function_of(integration: dict[str, Any]) -> str:
    """The function (or, for a SnapStart function, the alias) the integration invokes."""
    arn = next(
        p
        for p in integration["Uri"]["Fn::Join"][1]
        if isinstance(p, dict)
        and ("Fn::GetAtt" in p or not str(p.get("Ref", "AWS::")).startswith("AWS::"))
    )
    return str(arn["Fn::GetAtt"][0] if "Fn::GetAtt" in arn else arn["Ref"])


def _logical_id(stacks: Stacks, construct: Any) -> str:
    return stacks.api.get_logical_id(construct.node.default_child)


def test_every_route_and_no_other_is_deployed(methods: dict[tuple[str, str], Any]) -> None:
    deployed = {key for key in methods if key[0] != "OPTIONS"}
    assert deployed == {(route.method, route.path) for route in ROUTES}


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_route_is_authorized_and_proxies_to_its_function(
    stacks: Stacks, resources: Resources, methods: dict[tuple[str, str], Any], route: Route
) -> None:
    method = methods[(route.method, route.path)]
    integration = method["Integration"]
    assert _function_of(integration) == _logical_id(
        stacks, stacks.api.functions[route.function].invocable
    )
    if not route.authorized:
        # A platform's webhook: verified by its signature in the handler instead
        assert method["AuthorizationType"] == "NONE" and "AuthorizerId" not in method
        return
    authorizer = resources[method["AuthorizerId"]["Ref"]]["Properties"]
    assert method["AuthorizationType"] == "COGNITO_USER_POOLS"
    assert authorizer["Type"] == "COGNITO_USER_POOLS"
    assert authorizer["IdentitySource"] == "method.request.header.Authorization"
    assert authorizer["ProviderARNs"] == [
        {"Fn::GetAtt": [_logical_id(stacks, stacks.api.auth.user_pool), "Arn"]}
    ]
    integration = method["Integration"]
    assert (integration["Type"], integration["IntegrationHttpMethod"]) == ("AWS_PROXY", "POST")
    assert _function_of(integration) == _logical_id(
        stacks, stacks.api.functions[route.function].invocable
    )


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_run_and_resume_stream_for_as_long_as_their_function_runs(
    stacks: Stacks, methods: dict[tuple[str, str], Any], route: Route
) -> None:
    integration = methods[(route.method, route.path)]["Integration"]
    uri = "".join(p for p in integration["Uri"]["Fn::Join"][1] if isinstance(p, str))
    if route.function in STREAMED:
        # API Gateway writes the function's stream to the client as it comes, through
        # Lambda's streaming invoke, and waits for it as long as the function may run.
        assert integration["ResponseTransferMode"] == "STREAM"
        assert uri.endswith("/response-streaming-invocations")
        function = stacks.api.functions[route.function].function
        timeout_s = stacks.api.resolve(function.timeout.to_seconds())
        assert integration["TimeoutInMillis"] == timeout_s * 1000 > 29_000
    else:
        assert integration.get("ResponseTransferMode", "BUFFERED") == "BUFFERED"
        assert uri.endswith("/invocations") and "streaming" not in uri
        assert integration["TimeoutInMillis"] == 29_000


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_route_is_validated_before_its_function_runs(
    resources: Resources, methods: dict[tuple[str, str], Any], route: Route
) -> None:
    method = methods[(route.method, route.path)]
    validator = resources[method["RequestValidatorId"]["Ref"]]["Properties"]
    assert method.get("RequestParameters", {}) == {
        f"method.request.path.{name}": True for name in path_parameters(route)
    }
    assert validator["ValidateRequestParameters"] is True
    if route.method == "POST" and route.authorized:
        assert validator["ValidateRequestBody"] is True
        model = resources[method["RequestModels"]["application/json"]["Ref"]]["Properties"]
        assert model["Schema"]["required"] == ["threadId"]
        assert model["Schema"]["properties"]["threadId"] == {"type": "string", "minLength": 1}
    else:
        assert "ValidateRequestBody" not in validator
        assert "RequestModels" not in method


def test_each_route_may_invoke_only_its_function(stacks: Stacks, resources: Resources) -> None:
    # Given each API permission's scope: the stage, then "/<METHOD><path with * per
    # parameter>" (the sweeper's schedule has its own, see test_sweeper_stack)
    stage = {"Ref": _logical_id(stacks, stacks.api.api.deployment_stage)}
    granted = {}
    for permission in _properties_of(resources, "AWS::Lambda::Permission"):
        if permission["Principal"] != "apigateway.amazonaws.com":
            continue
        *_, stage_ref, scope = permission["SourceArn"]["Fn::Join"][1]
        assert stage_ref == stage
        target = permission["FunctionName"]  # a function, or a SnapStart function's alias
        granted[scope] = target["Fn::GetAtt"][0] if "Fn::GetAtt" in target else target["Ref"]

    # Then there is one per route, for its function only, and none for test invokes
    expected = {
        f"/{route.method}{_PARAMETER.sub('*', route.path)}": _logical_id(
            stacks, stacks.api.functions[route.function].invocable
        )
        for route in ROUTES
    }
    assert granted == expected


def _quoted(origin: Any) -> Any:
    """An origin as a header value of API Gateway's mapping: in single quotes."""
    if isinstance(origin, str):
        return f"'{origin}'"
    parts: list[Any] = []
    for part in ["'", *origin["Fn::Join"][1], "'"]:
        if parts and isinstance(part, str) and isinstance(parts[-1], str):
            parts[-1] += part  # CloudFormation's join, as CDK writes it: literals merged
        else:
            parts.append(part)
    return {"Fn::Join": ["", parts]}


def test_preflight_is_open_and_allows_the_card_origin(methods: dict[tuple[str, str], Any]) -> None:
    preflights = [props for (verb, _), props in methods.items() if verb == "OPTIONS"]
    paths = {path for (verb, path) in methods if verb != "OPTIONS"}
    assert {path for (verb, path) in methods if verb == "OPTIONS"} >= paths
    for preflight in preflights:
        # Browsers send no credentials on a preflight, so it cannot be authorized
        assert preflight["AuthorizationType"] == "NONE"
        (response,) = preflight["Integration"]["IntegrationResponses"]
        headers = response["ResponseParameters"]
        # The card page's CloudFront URL by default: no other page may read the replies
        assert headers["method.response.header.Access-Control-Allow-Origin"] == _quoted(SITE_ORIGIN)
        assert headers["method.response.header.Vary"] == "'Origin'"
        assert headers["method.response.header.Access-Control-Allow-Headers"] == (
            "'Authorization,Content-Type'"
        )


def test_gateway_errors_are_readable_by_the_card_page(api_template: Template) -> None:
    responses = api_template.find_resources("AWS::ApiGateway::GatewayResponse")
    types = {r["Properties"]["ResponseType"] for r in responses.values()}
    assert {"UNAUTHORIZED", "BAD_REQUEST_BODY", "DEFAULT_4XX", "DEFAULT_5XX"} <= types
    for response in responses.values():
        properties = response["Properties"]
        header = properties["ResponseParameters"][
            "gatewayresponse.header.Access-Control-Allow-Origin"
        ]
        assert header == _quoted(SITE_ORIGIN)
        assert properties["ResponseTemplates"]["application/json"].startswith('{"error":{"code":')


def test_allowed_origin_from_context_replaces_the_card_origin(
    configured_api_template: Template,
) -> None:
    # Given `interlock:allowedOrigin=https://cards.example.com`
    resources = configured_api_template.to_json()["Resources"]
    preflight_origins = {
        json.dumps(
            r["Properties"]["Integration"]["IntegrationResponses"][0]["ResponseParameters"][
                "method.response.header.Access-Control-Allow-Origin"
            ]
        )
        for r in resources.values()
        if r["Type"] == "AWS::ApiGateway::Method" and r["Properties"]["HttpMethod"] == "OPTIONS"
    }
    gateway_origins = {
        json.dumps(
            r["Properties"]["ResponseParameters"][
                "gatewayresponse.header.Access-Control-Allow-Origin"
            ]
        )
        for r in resources.values()
        if r["Type"] == "AWS::ApiGateway::GatewayResponse"
    }

    # Then the preflights and gateway errors admit that origin instead
    assert preflight_origins == gateway_origins == {json.dumps(_quoted(CONFIGURED_ORIGIN))}


def test_stage_v1_traces_throttles_and_logs_json_when_asked(
    resources: Resources, configured_api_template: Template
) -> None:
    (stage,) = _properties_of(resources, "AWS::ApiGateway::Stage")
    assert stage["StageName"] == "v1"
    assert stage["TracingEnabled"] is True
    (settings,) = stage["MethodSettings"]
    assert (settings["HttpMethod"], settings["ResourcePath"]) == ("*", "/*")
    assert settings["ThrottlingRateLimit"] > 0 and settings["ThrottlingBurstLimit"] > 0
    # By default no access logs: they would need an account-wide setting
    assert "AccessLogSetting" not in stage
    # Asked for (interlock:accessLogs), they are JSON, in a group of their own
    logged = configured_api_template.to_json()["Resources"]
    (stage,) = _properties_of(logged, "AWS::ApiGateway::Stage")
    log_format = json.loads(stage["AccessLogSetting"]["Format"])
    assert log_format["requestId"] == "$context.requestId"
    assert log_format["user"] == "$context.authorizer.claims.sub"
    destination = json.dumps(stage["AccessLogSetting"]["DestinationArn"])
    (group,) = [
        logical_id
        for logical_id, r in logged.items()
        if r["Type"] == "AWS::Logs::LogGroup" and logical_id in destination
    ]
    assert logged[group]["Properties"]["RetentionInDays"] == 90


def test_a_first_deployment_changes_no_account_setting(api_template: Template) -> None:
    api_template.has_resource_properties(
        "AWS::ApiGateway::RestApi", {"EndpointConfiguration": {"Types": ["REGIONAL"]}}
    )
    api_template.resource_count_is("AWS::ApiGateway::Account", 0)
    roles = api_template.find_resources("AWS::IAM::Role")
    assert not [r for r in roles.values() if "apigateway.amazonaws.com" in json.dumps(r)]


def test_asked_to_it_sets_the_account_logging_role_its_access_logs_need(
    configured_api_template: Template,
) -> None:
    # The account's API Gateway CloudWatch role, retained with the account setting
    (account_id, account) = next(
        iter(configured_api_template.find_resources("AWS::ApiGateway::Account").items())
    )
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    role = configured_api_template.to_json()["Resources"][role_id]
    assert (account["DeletionPolicy"], role["DeletionPolicy"]) == ("Retain", "Retain")
    statement = role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert statement["Principal"] == {"Service": "apigateway.amazonaws.com"}
    (policy,) = role["Properties"]["Policies"]
    actions = policy["PolicyDocument"]["Statement"][0]["Action"]
    assert "logs:PutLogEvents" in actions and all(a.startswith("logs:") for a in actions)
    # And the stage, whose access logs need it, is created after it
    (stage,) = configured_api_template.find_resources("AWS::ApiGateway::Stage").values()
    assert account_id in stage["DependsOn"]


def test_an_account_that_has_its_logging_role_keeps_it(cdk_context: dict[str, Any]) -> None:
    # On: access logs through the role the account has, which the stack leaves alone
    stacks = build(App(context={**cdk_context, "interlock:accessLogs": "on"}))
    template = Template.from_stack(stacks.api)
    template.resource_count_is("AWS::ApiGateway::Account", 0)
    (stage,) = template.find_resources("AWS::ApiGateway::Stage").values()
    assert "AccessLogSetting" in stage["Properties"]
    # The old flag and a typo are refused, each with what to write instead
    with pytest.raises(ValueError, match="replaced by interlock:accessLogs"):
        Settings.from_context(App(context={"interlock:apiGatewayAccountRole": "true"}).node)
    with pytest.raises(ValueError, match="off, on, create-role"):
        Settings.from_context(App(context={"interlock:accessLogs": "yes"}).node)


def test_user_pool_is_invitation_only_with_strong_passwords_and_mfa(
    api_template: Template,
) -> None:
    api_template.has_resource(
        "AWS::Cognito::UserPool",
        {
            "Properties": Match.object_like(
                {
                    "AdminCreateUserConfig": {"AllowAdminCreateUserOnly": True},
                    "MfaConfiguration": "ON",
                    "EnabledMfas": ["SOFTWARE_TOKEN_MFA"],
                    "Policies": {
                        "PasswordPolicy": Match.object_like(
                            {
                                "MinimumLength": 12,
                                "RequireLowercase": True,
                                "RequireNumbers": True,
                                "RequireSymbols": True,
                                "RequireUppercase": True,
                            }
                        )
                    },
                }
            ),
            "DeletionPolicy": "Retain",
        },
    )


def test_user_pool_has_the_role_groups_and_a_public_client(api_template: Template) -> None:
    groups = api_template.find_resources("AWS::Cognito::UserPoolGroup")
    assert {g["Properties"]["GroupName"] for g in groups.values()} == {"reporter", "admin"}
    (client,) = api_template.find_resources("AWS::Cognito::UserPoolClient").values()
    properties = client["Properties"]
    assert properties.get("GenerateSecret", False) is False
    assert properties["PreventUserExistenceErrors"] == "ENABLED"
    assert "ALLOW_USER_PASSWORD_AUTH" not in properties["ExplicitAuthFlows"]


def test_client_signs_in_with_the_code_flow_back_to_the_card_page(
    api_template: Template,
) -> None:
    (client,) = api_template.find_resources("AWS::Cognito::UserPoolClient").values()
    properties = client["Properties"]
    # The code grant only (the page adds PKCE); no implicit flow putting tokens in URLs
    assert properties["AllowedOAuthFlows"] == ["code"]
    assert properties["AllowedOAuthFlowsUserPoolClient"] is True
    assert properties["AllowedOAuthScopes"] == ["openid", "email", "profile"]
    assert properties["SupportedIdentityProviders"] == ["COGNITO"]
    # Only the card page's CloudFront URL may receive a code or a signed-out visitor
    assert properties["CallbackURLs"] == [SITE_URL]
    assert properties["LogoutURLs"] == [SITE_URL]


def test_pool_has_a_hosted_ui_domain_unique_to_the_stack_and_account(
    stacks: Stacks, api_template: Template
) -> None:
    (domain,) = api_template.find_resources("AWS::Cognito::UserPoolDomain").values()
    assert domain["Properties"] == {
        "Domain": {"Fn::Join": ["", ["interlockapi-", {"Ref": "AWS::AccountId"}]]},
        "UserPoolId": {"Ref": _logical_id(stacks, stacks.api.auth.user_pool)},
    }


def test_domain_prefix_comes_from_context(configured_api_template: Template) -> None:
    (domain,) = configured_api_template.find_resources("AWS::Cognito::UserPoolDomain").values()
    assert domain["Properties"]["Domain"] == CONFIGURED_AUTH_PREFIX


def test_outputs_give_the_url_pool_client_and_sign_in(
    stacks: Stacks, api_template: Template
) -> None:
    api = stacks.api
    outputs = api_template.find_outputs("*")
    assert set(outputs) == {
        "ApiUrl",
        "UserPoolId",
        "UserPoolClientId",
        "SignInUrl",
        "AlarmTopicArn",
    }
    assert outputs["SignInUrl"]["Value"] == api.resolve(api.auth.domain.base_url())
    assert outputs["ApiUrl"]["Value"] == api.resolve(api.api.url)
    assert outputs["UserPoolId"]["Value"] == {"Ref": _logical_id(stacks, api.auth.user_pool)}
    assert outputs["UserPoolClientId"]["Value"] == {"Ref": _logical_id(stacks, api.auth.client)}


def test_api_stack_deploys_after_storage_and_the_page_hosting(stacks: Stacks) -> None:
    assert {stacks.storage, stacks.web} <= set(stacks.api.dependencies)


def test_a_stage_names_every_stack_so_deployments_share_an_account(
    cdk_context: dict[str, Any],
) -> None:
    from infra.wiring import build

    app = App(context={**cdk_context, "interlock:stage": "qa"})
    stacks = build(app)

    names = [s.stack_name for s in (stacks.storage, stacks.web, stacks.api, stacks.web_content)]
    assert names == [
        "InterlockQaStorage",
        "InterlockQaWeb",
        "InterlockQaApi",
        "InterlockQaWebContent",
    ]
    # The API reads the table from its own stage's storage stack
    functions = Template.from_stack(stacks.api).find_resources("AWS::Lambda::Function")
    tables = {
        f["Properties"]["Environment"]["Variables"]["INTERLOCK_TABLE"]["Fn::GetStackOutput"][
            "StackName"
        ]
        for f in functions.values()
        if "INTERLOCK_TABLE" in f["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert tables == {"InterlockQaStorage"}
    with pytest.raises(ValueError, match="interlock:stage"):
        build(App(context={**cdk_context, "interlock:stage": "QA-1"}))
