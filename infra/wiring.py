"""The one place that decides which stacks make up Interlock and how they are checked."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.api import InterlockApiStack
from infra.storage import StorageStack

STORAGE_STACK_ID = "InterlockStorage"
API_STACK_ID = "InterlockApi"


@dataclass(frozen=True)
class Stacks:
    """The stacks of one Interlock deployment.

    Attributes:
        storage: The table and bucket; stateful, so kept apart from everything else.
        api: The functions, the user pool and the REST API in front of them.
    """

    storage: StorageStack
    api: InterlockApiStack


def build(app: App) -> Stacks:
    """Add the Interlock stacks to `app` and register the AWS Solutions checks.

    The checks run as a validation plugin during synthesis: an unacknowledged finding,
    error or warning, fails `cdk synth`, so a finding cannot pass unnoticed.

    Args:
        app: The app to add to, carrying the `cdk.json` context.

    Returns:
        The stacks, for tests and for stacks that need their resources.
    """
    storage = StorageStack(app, STORAGE_STACK_ID)
    api = InterlockApiStack(app, API_STACK_ID, storage=storage.refs)
    # Named output references carry no dependency of their own: deploy storage first.
    api.add_stack_dependency(storage, "reads the table and bucket from the storage stack's outputs")
    stacks = Stacks(storage=storage, api=api)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stacks
