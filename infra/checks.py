"""cdk-nag's packs over Interlock's own stacks, and nothing else of the app.

A pack registered as it is (`Validations.of(app).add_plugins(AwsSolutionsChecks(app))`)
walks the whole app, so Interlock added to a team's own app would fail that app's
synthesis over stacks Interlock never touched. `ScopedChecks` runs the same pack over
the stacks it is given, and reports what the pack reports: Interlock's findings still
fail synthesis, a neighbour's are the neighbour's business.
"""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import (
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    PolicyValidationPluginReport,
    PolicyViolation,
)
from cdk_nag import AwsSolutionsChecks, NagPack, ServerlessChecks
from constructs import IConstruct


@jsii.implements(IPolicyValidationPlugin)
class ScopedChecks:
    """A cdk-nag pack as a validation plugin whose findings are those of `scopes`."""

    def __init__(self, pack: NagPack, scopes: Sequence[IConstruct]) -> None:
        self._pack = pack
        self._scopes = tuple(scopes)

    @property
    def name(self) -> str:
        """The pack's name, as the validation report shows it."""
        return str(self._pack.read_pack_name)

    @property
    def rule_ids(self) -> list[str] | None:
        """Every rule of the pack (none singled out)."""
        return None

    @property
    def version(self) -> str | None:
        """Not versioned apart from cdk-nag itself."""
        return None

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        """The pack's findings over each scope, together (the pack starts each walk
        afresh, so the scopes are walked one at a time and their findings joined)."""
        violations: list[PolicyViolation] = []
        for scope in self._scopes:
            violations += self._pack.validate_scope(scope).violations
        return PolicyValidationPluginReport(success=not violations, violations=violations)


def interlock_checks(scopes: Sequence[IConstruct]) -> list[ScopedChecks]:
    """AWS Solutions and Serverless checks over `scopes`: every finding of either pack,
    error or warning, fails synthesis unless acknowledged with a reason."""
    return [ScopedChecks(AwsSolutionsChecks(), scopes), ScopedChecks(ServerlessChecks(), scopes)]
