"""The card page deployed: a private bucket behind CloudFront, and the config.json beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk.assertions import Template

from infra.hosting import WebHostingStack
from infra.settings import Settings
from infra.wiring import Stacks
from tests.infra.support import CONFIGURED_AUTH_PREFIX

Resources = dict[str, dict[str, Any]]
ACKNOWLEDGED = "aws:cdk:acknowledged-rules"
SITE_BUCKET_ARN = {
    "Fn::GetStackOutput": {"StackName": "InterlockWeb", "OutputName": "SiteBucketArn"}
}


def _api_output(name: str) -> dict[str, Any]:
    return {"Fn::GetStackOutput": {"StackName": "InterlockApi", "OutputName": name}}


def _web_output(name: str) -> dict[str, Any]:
    return {"Fn::GetStackOutput": {"StackName": "InterlockWeb", "OutputName": name}}


def _logical_id(stacks: Stacks, construct: Any) -> str:
    return stacks.web.get_logical_id(construct.node.default_child)


def _one(template: Template, kind: str) -> dict[str, Any]:
    (found,) = template.find_resources(kind).values()
    properties: dict[str, Any] = found["Properties"]
    return properties


def _distribution(template: Template) -> dict[str, Any]:
    config: dict[str, Any] = _one(template, "AWS::CloudFront::Distribution")["DistributionConfig"]
    return config


def _csp(template: Template) -> dict[str, str]:
    """The policy's directives, with pseudo parameters written as `<AWS::Region>`."""
    headers = _one(template, "AWS::CloudFront::ResponseHeadersPolicy")
    value = headers["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    policy = value["ContentSecurityPolicy"]["ContentSecurityPolicy"]
    parts = policy["Fn::Join"][1] if isinstance(policy, dict) else [policy]
    text = "".join(p if isinstance(p, str) else f"<{p['Ref']}>" for p in parts)
    return dict(d.strip().split(" ", 1) for d in text.split(";"))


def test_page_bucket_is_private_encrypted_and_logged(
    stacks: Stacks, web_template: Template
) -> None:
    site = web_template.to_json()["Resources"][_logical_id(stacks, stacks.web.hosting.bucket)]
    properties = site["Properties"]
    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert properties["OwnershipControls"] == {
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]
    }
    assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    assert "WebsiteConfiguration" not in properties
    assert properties["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": _logical_id(stacks, stacks.web.hosting.logs)},
        "LogFilePrefix": "site/",
    }


def test_only_the_distribution_may_read_the_page_bucket_and_only_over_tls(
    stacks: Stacks, web_template: Template
) -> None:
    # Given the page bucket's policy
    bucket_id = _logical_id(stacks, stacks.web.hosting.bucket)
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in web_template.find_resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    allows = [s for s in policy if s["Effect"] == "Allow"]
    denies = [s for s in policy if s["Effect"] == "Deny"]

    # Then its one reader is CloudFront, for this distribution alone, and never publicly
    distribution_id = _logical_id(stacks, stacks.web.hosting.distribution)
    (allow,) = allows
    assert allow["Principal"] == {"Service": "cloudfront.amazonaws.com"}
    assert allow["Action"] == "s3:GetObject"
    source = allow["Condition"]["StringEquals"]["AWS:SourceArn"]["Fn::Join"][1]
    assert source[-1] == {"Ref": distribution_id}
    assert {json.dumps(s["Condition"]) for s in denies} == {
        json.dumps({"Bool": {"aws:SecureTransport": "false"}}),
        json.dumps({"NumericLessThan": {"s3:TlsVersion": 1.2}}),
    }


def test_distribution_reads_the_bucket_through_origin_access_control(
    stacks: Stacks, web_template: Template
) -> None:
    control = _one(web_template, "AWS::CloudFront::OriginAccessControl")
    assert control["OriginAccessControlConfig"] | {"Name": None} == {
        "Name": None,
        "OriginAccessControlOriginType": "s3",
        "SigningBehavior": "always",
        "SigningProtocol": "sigv4",
    }
    (origin,) = _distribution(web_template)["Origins"]
    bucket_id = _logical_id(stacks, stacks.web.hosting.bucket)
    assert origin["DomainName"] == {"Fn::GetAtt": [bucket_id, "RegionalDomainName"]}
    assert "Fn::GetAtt" in origin["OriginAccessControlId"]
    # No legacy origin access identity, no website endpoint
    assert origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}
    web_template.resource_count_is("AWS::CloudFront::CloudFrontOriginAccessIdentity", 0)


def test_viewers_get_https_only_and_the_page_at_the_root(
    stacks: Stacks, web_template: Template
) -> None:
    config = _distribution(web_template)
    behavior = config["DefaultCacheBehavior"]
    assert behavior["ViewerProtocolPolicy"] == "https-only"
    assert behavior["AllowedMethods"] == ["GET", "HEAD"]
    assert config["DefaultRootObject"] == "index.html"
    assert "CacheBehaviors" not in config
    logs_id = _logical_id(stacks, stacks.web.hosting.logs)
    assert config["Logging"] == {
        "Bucket": {"Fn::GetAtt": [logs_id, "RegionalDomainName"]},
        "Prefix": "cloudfront/",
    }
    headers_id = _logical_id(stacks, stacks.web.hosting.headers)
    assert behavior["ResponseHeadersPolicyId"] == {"Ref": headers_id}


def test_the_distribution_logs_nothing_where_cloudfront_delivers_no_logs(
    cdk_context: dict[str, Any], stacks: Stacks
) -> None:
    # Given the hosting stack in a region CloudFront delivers no standard logs to
    stack = WebHostingStack(
        App(context=cdk_context),
        "InterlockWeb",
        sign_in_url="https://cards.auth.eu-south-1.amazoncognito.com",
        env=Environment(account="123456789012", region="eu-south-1"),
    )
    template = Template.from_stack(stack)

    # Then the distribution writes no standard logs, and their bucket takes no ACLs
    assert not stack.hosting.cloudfront_logs
    assert "Logging" not in _distribution(template)
    logs_id = stack.get_logical_id(stack.hosting.logs.node.default_child)
    assert template.to_json()["Resources"][logs_id]["Properties"]["OwnershipControls"] == {
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]
    }
    # And the finding is acknowledged on the distribution alone, saying why
    found = _missing_logs_acknowledged(stack)
    assert list(found) == [stack.hosting.distribution.node.path]
    assert "eu-south-1" in found[stack.hosting.distribution.node.path]
    # Where CloudFront delivers them (the default app), nothing is acknowledged
    assert stacks.web.hosting.cloudfront_logs
    assert _missing_logs_acknowledged(stacks.web) == {}


def _missing_logs_acknowledged(stack: Stack) -> dict[str, str]:
    """Where in `stack` the missing distribution logs (AwsSolutions-CFR3) are
    acknowledged, and why."""
    return {
        construct.node.path: reason
        for construct in stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == ACKNOWLEDGED
        for rule, reason in entry.data.items()
        if rule.endswith("AwsSolutions-CFR3")
    }


def test_every_response_carries_the_security_headers(web_template: Template) -> None:
    headers = _one(web_template, "AWS::CloudFront::ResponseHeadersPolicy")
    config = headers["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    assert config["StrictTransportSecurity"] == {
        "AccessControlMaxAgeSec": 31_536_000,
        "IncludeSubdomains": True,
        "Override": True,
    }
    assert config["ContentTypeOptions"] == {"Override": True}
    assert config["FrameOptions"] == {"FrameOption": "DENY", "Override": True}
    assert config["ReferrerPolicy"] == {"ReferrerPolicy": "no-referrer", "Override": True}


def test_csp_allows_only_the_page_its_api_and_the_hosted_ui(web_template: Template) -> None:
    csp = _csp(web_template)
    assert csp["default-src"] == "'none'"
    assert csp["script-src"] == csp["style-src"] == "'self'"
    assert csp["frame-ancestors"] == csp["base-uri"] == csp["object-src"] == "'none'"
    assert csp["connect-src"].split(" ") == [
        "'self'",
        "https://*.execute-api.<AWS::Region>.amazonaws.com",
        "https://interlockapi-<AWS::AccountId>.auth.<AWS::Region>.amazoncognito.com",
    ]


def test_csp_names_the_configured_sign_in_domain(configured_stacks: Stacks) -> None:
    template = Template.from_stack(configured_stacks.web)
    hosted_ui = f"https://{CONFIGURED_AUTH_PREFIX}.auth.<AWS::Region>.amazoncognito.com"
    assert _csp(template)["connect-src"].split(" ")[-1] == hosted_ui


def test_hosting_stack_names_what_later_stacks_read(web_template: Template) -> None:
    outputs = web_template.find_outputs("*")
    assert set(outputs) == {
        "DistributionDomainName",
        "DistributionId",
        "SiteBucketName",
        "SiteBucketArn",
        "SiteUrl",
    }


@pytest.fixture(scope="module")
def page_copy(web_content_template: Template) -> dict[str, Any]:
    """The deployment custom resource copying `web/` and config.json into the bucket."""
    (copy,) = web_content_template.find_resources("Custom::CDKBucketDeployment").values()
    properties: dict[str, Any] = copy["Properties"]
    return properties


def _staged(outdir: Path, object_key: str) -> Path:
    """Where synthesis staged a source asset, by the object key it is uploaded under."""
    return outdir / f"asset.{object_key.removesuffix('.zip')}"


def test_config_json_names_the_api_and_the_sign_in(page_copy: dict[str, Any], outdir: Path) -> None:
    # Given the second source: config.json with a marker for each deploy-time value
    web_key, config_key = page_copy["SourceObjectKeys"]
    text = (_staged(outdir, config_key) / "config.json").read_text()
    _, markers = page_copy["SourceMarkers"]

    # When each marker is replaced by the value CloudFormation writes in
    for marker, value in markers.items():
        (quote, inner, quote_again) = value["Fn::Join"][1]
        assert quote == quote_again == '"'
        text = text.replace(marker, json.dumps(inner))

    # Then the page learns its API, user pool, client and hosted UI from the API stack
    assert json.loads(text) == {
        "apiUrl": _api_output("ApiUrl"),
        "region": {"Ref": "AWS::Region"},
        "userPoolId": _api_output("UserPoolId"),
        "clientId": _api_output("UserPoolClientId"),
        "authUrl": _api_output("SignInUrl"),
    }
    # And the page itself is web/ as it is, without any hand-made config.json
    page = _staged(outdir, web_key)
    assert {"index.html", "app.js", "api.js", "auth.js"} <= {p.name for p in page.iterdir()}
    assert not (page / "config.json").exists()


def test_the_copy_replaces_the_page_and_clears_the_cache(page_copy: dict[str, Any]) -> None:
    assert page_copy["DestinationBucketName"] == _web_output("SiteBucketName")
    assert page_copy["Prune"] is True
    assert page_copy["DistributionId"] == _web_output("DistributionId")
    assert page_copy["DistributionPaths"] == ["/*"]


def test_stacks_deploy_hosting_then_api_then_the_page(stacks: Stacks) -> None:
    assert stacks.web.dependencies == []
    assert stacks.web in stacks.api.dependencies
    assert {stacks.web, stacks.api} <= set(stacks.web_content.dependencies)


@pytest.mark.parametrize(
    "prefix", ["Interlock", "-interlock", "interlock-", "my-aws-cards", "a" * 64, "cognito1"]
)
def test_an_unusable_domain_prefix_is_refused(prefix: str) -> None:
    app = App(context={"interlock:authDomainPrefix": prefix})
    with pytest.raises(ValueError, match="interlock:authDomainPrefix"):
        Settings.from_context(app.node)
