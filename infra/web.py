"""The card page's files: `web/` as it is in the repository, plus a generated `config.json`.

`config.json` is what tells the page it is deployed (locally there is none, and the page
asks the local server for a development session instead): the API to call and the user
pool, client and hosted UI to sign in with. Its values are outputs of the API stack,
written in at deployment time, so this stack is deployed after the API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from aws_cdk import Acknowledgment, Aws, DefaultStackSynthesizer, Stack, Token, Validations
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from .api import ApiRefs
from .assets import WEB_DIR
from .hosting import SiteRefs

CONFIG_FILE: Final = "config.json"
_HANDLER_ID: Final = "Custom::CDKBucketDeployment"
# The context key `cdk bootstrap --qualifier` deployments set (the CLI and the default
# synthesizer read it).
BOOTSTRAP_QUALIFIER_CONTEXT: Final = "@aws-cdk/core:bootstrapQualifier"


def site_config(api: ApiRefs) -> Mapping[str, str]:
    """The contents of `config.json`, as `web/api.js` and `web/auth.js` read them."""
    return {
        "apiUrl": api.api_url,
        "region": Aws.REGION,
        "userPoolId": api.user_pool_id,
        "clientId": api.client_id,
        "authUrl": api.sign_in_url,
    }


class WebContentStack(Stack):
    """Copies the page and its `config.json` into the hosting stack's bucket.

    Attributes:
        deployment: The copy; it also clears CloudFront's cache, so a new page or a new
            API URL is served at once.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        site: SiteRefs,
        api: ApiRefs,
        **kwargs: Any,
    ) -> None:
        """Create the stack.

        Args:
            scope: The app or stage.
            construct_id: The stack id.
            site: The bucket and distribution, from the hosting stack.
            api: The API and sign-in values, from the API stack.
            **kwargs: Passed to `Stack` (env, stack_name, ...).
        """
        super().__init__(scope, construct_id, **kwargs)
        bucket = s3.Bucket.from_bucket_attributes(
            self, "Site", bucket_name=site.bucket_name, bucket_arn=site.bucket_arn
        )
        distribution = cloudfront.Distribution.from_distribution_attributes(
            self, "Distribution", domain_name=site.domain_name, distribution_id=site.distribution_id
        )
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Page",
            sources=[
                # A config.json left in web/ by hand must never shadow the generated one.
                s3deploy.Source.asset(str(WEB_DIR), exclude=[CONFIG_FILE]),
                s3deploy.Source.json_data(CONFIG_FILE, dict(site_config(api))),
            ],
            destination_bucket=bucket,
            distribution=distribution,
            distribution_paths=["/*"],
        )
        _acknowledge(self, site)


_PINNED_RUNTIME: Final = (
    "The handler's runtime is pinned by aws-cdk-lib together with the code it ships; it "
    "moves when aws-cdk-lib is upgraded."
)


def _acknowledge(stack: WebContentStack, site: SiteRefs) -> None:
    # The copy runs in aws-cdk-lib's own handler, one per stack, beside the deployment.
    (handler,) = [c for c in stack.node.children if c.node.id.startswith(_HANDLER_ID)]
    reason = (
        "The copy is aws-cdk-lib's BucketDeployment handler, invoked only by CloudFormation "
        "while this stack deploys. Its role is the one aws-cdk-lib grants: read the two "
        "staged assets, sync the page's bucket, invalidate the distribution. "
    )
    findings = {
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
        "AWSLambdaBasicExecutionRole]": "It writes its own logs through the basic role.",
        "AwsSolutions-IAM5[Action::s3:GetBucket*]": "Read access to the staged assets.",
        "AwsSolutions-IAM5[Action::s3:GetObject*]": "Read access to the staged assets.",
        "AwsSolutions-IAM5[Action::s3:List*]": "s3 sync lists the source and the bucket.",
        "AwsSolutions-IAM5[Action::s3:Abort*]": "s3 sync uploads large files in parts.",
        "AwsSolutions-IAM5[Action::s3:DeleteObject*]": "Removes files no longer in web/.",
        f"AwsSolutions-IAM5[Resource::{_asset_bucket(stack)}/*]": (
            "The bootstrap asset bucket, where the page's files are staged."
        ),
        f"AwsSolutions-IAM5[Resource::{_as_finding(stack, site.bucket_arn)}/*]": (
            "Every object of the page's own bucket: the copy replaces the whole page."
        ),
        "AwsSolutions-IAM5[Resource::*]": (
            "aws-cdk-lib grants cloudfront:CreateInvalidation and GetInvalidation on every "
            "distribution; they clear caches and read nothing."
        ),
        "AwsSolutions-L1": _PINNED_RUNTIME,
        "Serverless-LambdaLatestVersion": _PINNED_RUNTIME,
        "Serverless-LambdaDLQ": (
            "CloudFormation waits for its answer: a copy that fails, or never answers, "
            "fails the stack's deployment, with the error in the stack's events. A "
            "dead-letter queue would keep an event nobody can replay."
        ),
        "Serverless-LambdaTracing": (
            "aws-cdk-lib offers no tracing setting for it. It runs once per deployment, "
            "on no request's path; its log and the stack's events record each run."
        ),
    }
    for finding, why in findings.items():
        Validations.of(handler).acknowledge(Acknowledgment(id=finding, reason=reason + why))


def bootstrap_qualifier(stack: Stack) -> str:
    """The qualifier of the bootstrap stack this app deploys with (its asset bucket's
    name carries it): the synthesizer's, from context when set, else CDK's default."""
    qualifier = stack.node.try_get_context(BOOTSTRAP_QUALIFIER_CONTEXT)
    return str(qualifier) if qualifier else DefaultStackSynthesizer.DEFAULT_QUALIFIER


def _asset_bucket(stack: Stack) -> str:
    """The bootstrap asset bucket's ARN as a finding names it: with the account and
    region the stack is deployed to, or their placeholders for an agnostic stack."""
    partition = "aws" if not Token.is_unresolved(stack.partition) else "<AWS::Partition>"
    account = stack.account if not Token.is_unresolved(stack.account) else "<AWS::AccountId>"
    region = stack.region if not Token.is_unresolved(stack.region) else "<AWS::Region>"
    return f"arn:{partition}:s3:::cdk-{bootstrap_qualifier(stack)}-assets-{account}-{region}"


def _as_finding(stack: Stack, value: str) -> str:
    """A token as the checks print it in a finding's id: its resolved JSON."""
    return json.dumps(stack.resolve(value), separators=(",", ":"))
