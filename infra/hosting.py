"""Where the card page is served from: a private bucket behind a CloudFront distribution.

The page and the API each need a value the other creates: the API's CORS origin and the
sign-in client's callback URL name the distribution, and the page's `config.json` names
the API. So the distribution gets a stack of its own, deployed before the API, which
reads the distribution's domain through a named output (`SiteRefs`, a weak reference
like `StorageRefs`); the page and its `config.json` are copied in by a third stack
deployed after the API (`infra.web`). CloudFront with Origin Access Control keeps the
bucket private (no website endpoint, no public policy) and serves HTTPS from the edge,
with no server of our own to patch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from aws_cdk import Acknowledgment, Aws, CfnOutput, Duration, Fn, RemovalPolicy, Stack, Validations
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .regions import cloudfront_logs
from .storage import ACCESS_LOG_RETENTION_DAYS

DEFAULT_ROOT_OBJECT: Final = "index.html"
HSTS_MAX_AGE: Final = Duration.days(365)
# One name per directive: the page's own files, its API and the hosted UI's token
# endpoint, nothing inline and nothing framed.
_CSP_DIRECTIVES: Final = (
    ("default-src", "'none'"),
    ("script-src", "'self'"),
    ("style-src", "'self'"),
    ("img-src", "'self' data:"),
    ("font-src", "'self'"),
    ("manifest-src", "'self'"),
    ("base-uri", "'none'"),
    ("form-action", "'self'"),
    ("frame-ancestors", "'none'"),
    ("object-src", "'none'"),
)
_LOGS_USE_BUCKET_POLICY: Final = "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"


def api_origins() -> str:
    """The CSP source for the API: any REST API of this region, over HTTPS.

    The API's own host is only known once the API stack exists, and that stack comes
    after this one (it needs the distribution's domain). `script-src 'self'` without
    inline code is what keeps foreign code off the page; this only bounds where the page
    may connect.
    """
    return f"https://*.execute-api.{Aws.REGION}.amazonaws.com"


def content_security_policy(sign_in_url: str) -> str:
    """The page's Content-Security-Policy: itself, the API and the hosted sign-in domain."""
    connect = f"connect-src 'self' {api_origins()} {sign_in_url}"
    return "; ".join([*(f"{name} {value}" for name, value in _CSP_DIRECTIVES), connect])


@dataclass(frozen=True)
class SiteRefs:
    """The distribution and its bucket as a later stack sees them (named outputs).

    Attributes:
        domain_name: The distribution's domain (`d111.cloudfront.net`).
        distribution_id: The distribution's id, for cache invalidations.
        bucket_name: The bucket holding the page.
        bucket_arn: Its ARN.
    """

    domain_name: str
    distribution_id: str
    bucket_name: str
    bucket_arn: str

    @property
    def origin(self) -> str:
        """The page's origin, as browsers send it in `Origin` (no trailing slash)."""
        return f"https://{self.domain_name}"

    @property
    def url(self) -> str:
        """The page's URL: where the hosted UI sends people back to."""
        return f"{self.origin}/"


class WebHosting(Construct):
    """The page's bucket, the distribution in front of it and their logs.

    Attributes:
        bucket: Private; only the distribution may read it (Origin Access Control).
        logs: Receives the bucket's server access logs and, where CloudFront delivers
            them (`cloudfront_logs`), the distribution's standard logs.
        cloudfront_logs: Whether the distribution writes standard logs: not in a region
            CloudFront delivers none to (`infra.regions`).
        headers: The security headers added to every response.
        distribution: HTTPS only, `index.html` at the root.
    """

    def __init__(self, scope: Construct, construct_id: str, *, sign_in_url: str) -> None:
        """Create the bucket, its log bucket and the distribution.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            sign_in_url: The hosted UI's base URL, which the page's CSP must allow.
        """
        super().__init__(scope, construct_id)
        self.node.set_context(_LOGS_USE_BUCKET_POLICY, True)
        region = Stack.of(self).region
        # A distribution set to log to a bucket CloudFront cannot deliver to fails to
        # deploy; one that logs nothing only lacks the logs.
        self.cloudfront_logs = cloudfront_logs(region)
        self.logs = _log_bucket(self, acls=self.cloudfront_logs)
        self.bucket = _site_bucket(self, self.logs)
        self.headers = cloudfront.ResponseHeadersPolicy(
            self,
            "Headers",
            comment="Interlock card page: CSP, HSTS, no framing, no sniffing, no referrer.",
            security_headers_behavior=_security_headers(sign_in_url),
        )
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment="Interlock card page",
            default_root_object=DEFAULT_ROOT_OBJECT,
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                # Query strings (the chat id, the sign-in code) stay out of the cache key:
                # every URL of the page is the same file. A deployment invalidates.
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers,
                compress=True,
            ),
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            # Edge locations in North America and Europe: the cheapest class, and a page
            # of a few kilobytes loads quickly enough from them anywhere.
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            enable_logging=self.cloudfront_logs,
            log_bucket=self.logs if self.cloudfront_logs else None,
            log_file_prefix="cloudfront/" if self.cloudfront_logs else None,
        )
        _acknowledge(self.distribution, unlogged_in=None if self.cloudfront_logs else region)


def _security_headers(sign_in_url: str) -> cloudfront.ResponseSecurityHeadersBehavior:
    return cloudfront.ResponseSecurityHeadersBehavior(
        content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
            content_security_policy=content_security_policy(sign_in_url), override=True
        ),
        strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
            access_control_max_age=HSTS_MAX_AGE, include_subdomains=True, override=True
        ),
        content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
        frame_options=cloudfront.ResponseHeadersFrameOptions(
            frame_option=cloudfront.HeadersFrameOption.DENY, override=True
        ),
        # The page's URL carries the chat id, and briefly the sign-in code.
        referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
            referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True
        ),
    )


def _site_bucket(scope: Construct, logs: s3.IBucket) -> s3.Bucket:
    return s3.Bucket(
        scope,
        "Site",
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        # SSE-S3: CloudFront reads it through OAC without a KMS key policy to maintain.
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        server_access_logs_bucket=logs,
        server_access_logs_prefix="site/",
        # The content is rebuilt from the repository by every deployment; the bucket is
        # kept on stack deletion only because CloudFormation cannot delete a full one.
        removal_policy=RemovalPolicy.RETAIN,
    )


def _log_bucket(scope: Construct, *, acls: bool) -> s3.Bucket:
    bucket = s3.Bucket(
        scope,
        "AccessLogs",
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        # CloudFront's standard logs are delivered through an ACL grant, so where the
        # distribution logs, this one bucket keeps ACLs (owner-preferred: every object
        # still belongs to the account); elsewhere it has none, like every other bucket.
        object_ownership=(
            s3.ObjectOwnership.BUCKET_OWNER_PREFERRED
            if acls
            else s3.ObjectOwnership.BUCKET_OWNER_ENFORCED
        ),
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        lifecycle_rules=[
            s3.LifecycleRule(
                id="ExpireAccessLogs", expiration=Duration.days(ACCESS_LOG_RETENTION_DAYS)
            )
        ],
        removal_policy=RemovalPolicy.RETAIN,
    )
    Validations.of(bucket).acknowledge(
        Acknowledgment(
            id="AwsSolutions-S1",
            reason=(
                "This is the access-log destination of the page's bucket and distribution; "
                "logging it too would only move the finding to yet another bucket."
            ),
        )
    )
    return bucket


def _acknowledge(distribution: cloudfront.Distribution, *, unlogged_in: str | None) -> None:
    reasons = {
        "AwsSolutions-CFR1": (
            "The page is a static sign-in shell: every action it offers goes to the API, "
            "which requires a Cognito token. Who may approve is decided by the user pool, "
            "not by where they travel."
        ),
        "AwsSolutions-CFR2": (
            "The distribution serves only static files with GET and HEAD; there is no "
            "origin logic for a WAF rule to protect, and a web ACL adds a monthly charge. "
            "Associate one per deployment if the page must be shielded from floods."
        ),
        "AwsSolutions-CFR4": (
            "The distribution uses CloudFront's default *.cloudfront.net certificate, "
            "whose security policy cannot be raised. Modern browsers negotiate TLS 1.2 or "
            "1.3 with it; a custom domain with an ACM certificate allows TLSv1.2_2021."
        ),
    }
    if unlogged_in is not None:
        reasons["AwsSolutions-CFR3"] = (
            f"CloudFront delivers no standard logs to a bucket in {unlogged_in}, an opt-in "
            "region, and a distribution set to log there fails to deploy. The page's bucket "
            "still records CloudFront's reads of it in its S3 server access logs, and every "
            "action the page offers goes to the API."
        )
    for finding, reason in reasons.items():
        Validations.of(distribution).acknowledge(Acknowledgment(id=finding, reason=reason))


class WebHostingStack(Stack):
    """A stack holding only `WebHosting`, deployed before the API that names its domain.

    Attributes:
        hosting: The bucket, logs, headers policy and distribution.
        refs: The distribution and bucket for later stacks (they read this stack's outputs).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, sign_in_url: str, **kwargs: Any
    ) -> None:
        """Create the stack.

        Args:
            scope: The app or stage.
            construct_id: The stack id.
            sign_in_url: The hosted UI's base URL, for the page's CSP.
            **kwargs: Passed to `Stack` (env, stack_name, ...).
        """
        super().__init__(scope, construct_id, **kwargs)
        self.hosting = WebHosting(self, "Web", sign_in_url=sign_in_url)
        distribution, bucket = self.hosting.distribution, self.hosting.bucket
        outputs = {
            "domain_name": ("DistributionDomainName", distribution.distribution_domain_name),
            "distribution_id": ("DistributionId", distribution.distribution_id),
            "bucket_name": ("SiteBucketName", bucket.bucket_name),
            "bucket_arn": ("SiteBucketArn", bucket.bucket_arn),
        }
        for output_name, value in outputs.values():
            CfnOutput(self, output_name, value=value)
        CfnOutput(self, "SiteUrl", value=f"https://{distribution.distribution_domain_name}/")
        self.refs = SiteRefs(
            **{
                field: Fn.get_stack_output(self.stack_name, output_name)
                for field, (output_name, _) in outputs.items()
            }
        )
