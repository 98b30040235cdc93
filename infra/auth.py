"""Who may call the API: a Cognito user pool of invited users, and their roles as groups.

API Gateway's Cognito authorizer validates the ID token and hands the handlers its
claims: `sub` is the user id Interlock stores approvals and audit events under, and
`cognito:groups` carries the roles that decide which tools the agent may offer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_cognito as cognito
from constructs import Construct

# Group name -> what membership allows. The names are the roles `interlock` checks.
GROUPS: Final[Mapping[str, str]] = {
    "reporter": "May have the agent send reports.",
    "admin": "May manage the pre-approved sites and packages of every chat.",
}
MIN_PASSWORD_LENGTH: Final = 12


class Auth(Construct):
    """The user pool, the client the card page signs in with, and the role groups.

    Attributes:
        user_pool: The pool, for the API's authorizer.
        client: A public client (no secret): it runs in the browser.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        """Create the pool, its client and its groups.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
        """
        super().__init__(scope, construct_id)
        self.user_pool = _user_pool(self)
        self.client = self.user_pool.add_client(
            "CardPage",
            generate_secret=False,
            # SRP for the browser; the admin flow lets an operator with IAM credentials
            # fetch a token from a terminal. No plain password flow.
            auth_flows=cognito.AuthFlow(user_srp=True, admin_user_password=True),
            # No hosted UI: sign-in happens in the card page itself.
            disable_o_auth=True,
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


def _user_pool(scope: Construct) -> cognito.UserPool:
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
        # would orphan them, so the pool outlives the stack like the table does.
        deletion_protection=True,
        removal_policy=RemovalPolicy.RETAIN,
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
