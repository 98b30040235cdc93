"""The one place that decides which stacks make up Interlock and how they are checked."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.storage import StorageStack

STORAGE_STACK_ID = "InterlockStorage"


@dataclass(frozen=True)
class Stacks:
    """The stacks of one Interlock deployment.

    Attributes:
        storage: The table and bucket; stateful, so kept apart from everything else.
    """

    storage: StorageStack


def build(app: App) -> Stacks:
    """Add the Interlock stacks to `app` and register the AWS Solutions checks.

    The checks run as a validation plugin during synthesis: an unacknowledged finding,
    error or warning, fails `cdk synth`, so a finding cannot pass unnoticed.

    Args:
        app: The app to add to, carrying the `cdk.json` context.

    Returns:
        The stacks, for tests and for stacks that need their resources.
    """
    stacks = Stacks(storage=StorageStack(app, STORAGE_STACK_ID))
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stacks
