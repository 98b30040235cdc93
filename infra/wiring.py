"""The one place that decides which stacks make up Interlock and how they are checked."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from aws_cdk import App, Environment, RemovalPolicies, RemovalPolicy, Validations

from .api import InterlockApiStack
from .auth import domain_prefix, hosted_ui_url
from .checks import interlock_checks
from .hosting import WebHostingStack
from .settings import AgentChoice, Settings
from .storage import StorageStack
from .tools import ToolAccess
from .web import WebContentStack

# Billed while they exist, so they go or stay with the stage's data: every log group and
# KMS key of Interlock's stacks, those CDK's own constructs add included (the log group
# of the function that copies the page).
FOLLOW_THE_STAGE: Final = ("AWS::Logs::LogGroup", "AWS::KMS::Key")


@dataclass(frozen=True)
class Stacks:
    """The stacks of one Interlock deployment.

    Attributes:
        storage: The table and bucket; stateful, so kept apart from everything else.
        web: The card page's bucket and CloudFront distribution.
        api: The functions, the user pool and the REST API in front of them.
        web_content: The page's files and its generated `config.json`.
    """

    storage: StorageStack
    web: WebHostingStack
    api: InterlockApiStack
    web_content: WebContentStack


def build(
    app: App,
    env: Environment | None = None,
    *,
    agent: AgentChoice | None = None,
    tools: ToolAccess | None = None,
) -> Stacks:
    """Add the Interlock stacks to `app` and register cdk-nag's AWS Solutions and
    Serverless checks over them.

    The checks run as validation plugins during synthesis: an unacknowledged finding of
    either pack, error or warning, in one of Interlock's stacks fails `cdk synth`, so a
    finding cannot pass unnoticed; the app's other stacks are not Interlock's to judge.

    Args:
        app: The app to add to, carrying the `cdk.json` context.
        env: The account and region to deploy to, when known at synth: then the model
            is checked against the region. None leaves the stacks environment-agnostic.
        agent: The agent the functions serve (`AgentChoice.of`); None: the one the
            context names (`interlock:agent`), else the demo.
        tools: What the agent's own tools need (IAM statements, environment, VPC,
            memory, timeout), for the functions that run it and no other.

    Returns:
        The stacks, for tests and for stacks that need their resources.
    """
    settings = Settings.from_context(app.node)
    if agent is not None:
        settings = replace(settings, agent=agent)
    if tools is not None:
        settings = replace(settings, tools=tools)
    # A stage names every stack, so several deployments share an account and region.
    ids = {part: settings.stack_id(part) for part in ("Storage", "Web", "Api", "WebContent")}
    # Computed once: the hosting stack's CSP must name the domain the API stack creates.
    sign_in_prefix = domain_prefix(settings.auth_domain_prefix, ids["Api"])
    # Named stages other than prod are torn down with their data (`interlock:removalPolicy`).
    removal = RemovalPolicy.RETAIN if settings.retain_data else RemovalPolicy.DESTROY
    storage = StorageStack(
        app,
        ids["Storage"],
        removal_policy=removal,
        upgrade_step=settings.upgrade_step,
        env=env,
    )
    web = WebHostingStack(app, ids["Web"], sign_in_url=hosted_ui_url(sign_in_prefix), env=env)
    api = InterlockApiStack(
        app,
        ids["Api"],
        storage=storage.refs,
        site=web.refs,
        sign_in_prefix=sign_in_prefix,
        settings=settings,
        env=env,
    )
    content = WebContentStack(app, ids["WebContent"], site=web.refs, api=api.refs, env=env)
    # Named output references carry no dependency of their own: the order is explicit.
    api.add_stack_dependency(storage, "reads the table and bucket from the storage stack's outputs")
    api.add_stack_dependency(web, "names the card page's URL as its CORS origin and callback")
    content.add_stack_dependency(web, "copies the page into the hosting stack's bucket")
    content.add_stack_dependency(api, "writes the API's outputs into the page's config.json")
    stacks = Stacks(storage=storage, web=web, api=api, web_content=content)
    for stack in (storage, web, api, content):
        RemovalPolicies.of(stack).apply(removal, apply_to_resource_types=list(FOLLOW_THE_STAGE))
    # Over Interlock's own stacks only: the app may hold a team's own stacks too.
    Validations.of(app).add_plugins(*interlock_checks([storage, web, api, content]))
    return stacks
