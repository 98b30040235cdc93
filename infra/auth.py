"""Who may call the API: a Cognito user pool of invited users, and their roles as groups.

API Gateway's Cognito authorizer validates the ID token and hands the handlers its
claims: `sub` is the user id Interlock stores approvals and audit events under, and
`cognito:groups` carries the roles that decide which tools the agent may offer.

People sign in on Cognito's hosted UI: the card page sends them to the pool's domain
with the authorization code flow and PKCE (`web/auth.js`) and gets them back, with a
code, on its own URL, the client's only callback URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from aws_cdk import Acknowledgment, Aws, Duration, RemovalPolicy, Validations
from aws_cdk import aws_cognito as cognito
from constructs import Construct

# Group name -> what membership allows. The names are the roles `interlock` checks.
GROUPS: Final[Mapping[str, str]] = {
    "reporter": "May have the agent send reports.",
    "admin": "May manage the pre-approved sites and packages of every chat.",
}
MIN_PASSWORD_LENGTH: Final = 12
# What the card page asks for: an ID token (openid) that names the person (email, profile).
SCOPES: Final = (cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL, cognito.OAuthScope.PROFILE)
# Room for "-<12-digit account id>" within Cognito's 63 characters.
_STACK_PART_MAX: Final = 50


def domain_prefix(configured: str | None, stack_name: str) -> str:
    """The hosted UI's domain prefix: `configured`, or `<stack name>-<account id>`.

    Prefixes are global per region, so the default names both the deployment (its stack)
    and the account. Stack names allow only letters, digits and hyphens: lowercased, they
    are valid in a prefix.
    """
    return configured or f"{stack_name.lower()[:_STACK_PART_MAX]}-{Aws.ACCOUNT_ID}"


def hosted_ui_url(prefix: str) -> str:
    """The hosted UI's base URL, as `UserPoolDomain.base_url()` builds it.

    Usable in any stack of the pool's account and region, before the pool exists.
    """
    return f"https://{prefix}.auth.{Aws.REGION}.amazoncognito.com"


@dataclass(frozen=True)
class TokenIssuer:
    """What a function needs to verify a person's ID token itself: the pool that issued
    it (whose published keys sign it) and the clients a token may have been issued to.

    Attributes:
        user_pool_id: The pool's id (`<region>_<id>`).
        client_ids: The ids of the pool's clients that sign people in.
    """

    user_pool_id: str
    client_ids: tuple[str, ...]


class Auth(Construct):
    """The user pool, the client the card page signs in with, and the role groups.

    Attributes:
        user_pool: The pool, for the API's authorizer.
        domain: The pool's hosted UI domain, where the card page signs people in.
        client: A public client (no secret): it runs in the browser. Scripts sign in
            through it too (the admin password flow), so it is the pool's only client.
        issuer: The pool and its sign-in clients, for functions that verify ID tokens.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        site_url: str,
        domain_prefix: str,
        retain: bool = True,
    ) -> None:
        """Create the pool, its domain, its client and its groups.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            site_url: The card page's URL (`https://<host>/`): the only place the hosted
                UI sends people back to, after signing in or out.
            domain_prefix: The hosted UI's domain prefix (`domain_prefix`).
            retain: Whether the pool outlives the stack (and is protected from deletion).
        """
        super().__init__(scope, construct_id)
        self.user_pool = _user_pool(self, retain)
        self.domain = self.user_pool.add_domain(
            "SignIn",
            cognito_domain=cognito.CognitoDomainOptions(domain_prefix=domain_prefix),
        )
        self.client = self.user_pool.add_client(
            "CardPage",
            # A browser keeps no secret: PKCE (which the page always sends) is what binds
            # the code to the tab that asked for it.
            generate_secret=False,
            # The admin flow lets an operator with IAM credentials fetch a token from a
            # terminal; SRP serves SDK clients. No plain password flow.
            auth_flows=cognito.AuthFlow(user_srp=True, admin_user_password=True),
            o_auth=cognito.OAuthSettings(
                # The code flow only: the implicit flow would put tokens in the URL.
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=list(SCOPES),
                callback_urls=[site_url],
                logout_urls=[site_url],
            ),
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            prevent_user_existence_errors=True,
            id_token_validity=Duration.hours(1),
            access_token_validity=Duration.hours(1),
            refresh_token_validity=Duration.days(30),
            enable_token_revocation=True,
        )
        for name, description in GROUPS.items():
            cognito.UserPoolGroup(
                self,
                f"Group-{name}",
                user_pool=self.user_pool,
                group_name=name,
                description=description,
            )
        self.issuer = TokenIssuer(
            user_pool_id=self.user_pool.user_pool_id,
            client_ids=(self.client.user_pool_client_id,),
        )


def _user_pool(scope: Construct, retain: bool) -> cognito.UserPool:
    pool = cognito.UserPool(
        scope,
        "Users",
        # Invitation only: an administrator creates each user.
        self_sign_up_enabled=False,
        sign_in_aliases=cognito.SignInAliases(email=True),
        auto_verify=cognito.AutoVerifiedAttrs(email=True),
        account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
        password_policy=cognito.PasswordPolicy(
            min_length=MIN_PASSWORD_LENGTH,
            require_lowercase=True,
            require_uppercase=True,
            require_digits=True,
            require_symbols=True,
            temp_password_validity=Duration.days(3),
        ),
        # An approval lets the agent fetch from the internet in the user's name: worth a
        # second factor. TOTP only, so no SMS role and no per-message cost.
        mfa=cognito.Mfa.REQUIRED,
        mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
        feature_plan=cognito.FeaturePlan.ESSENTIALS,
        # Users' `sub`s key their approvals and audit trail in the table: a replaced pool
        # would orphan them, so the pool outlives the stack like the table does (unless
        # the stage is torn down with its data).
        deletion_protection=retain,
        removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
    )
    Validations.of(pool).acknowledge(
        Acknowledgment(
            id="AwsSolutions-COG8",
            reason=(
                "The Plus feature plan (threat protection) is billed per monthly active user. "
                "The pool is invitation-only with a 12-character password policy and "
                "required TOTP MFA; an operator can move it to Plus without a replacement."
            ),
        )
    )
    return pool
