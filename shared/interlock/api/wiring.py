"""Building the stores and the runtime from the environment, once per Lambda container.

The requests function needs only the stores; `runtime()` imports the Strands side
lazily so that function never loads strands (a cold-start budget, measured by
`bench/api_cycle.py`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.adapters.factory import stores_from_env
from interlock.adapters.parameters import load_json_parameter
from interlock.channels import Channel, ChannelName, Tap
from interlock.config import deployment
from interlock.notify import Notifier
from interlock.ports import Stores
from interlock.timing import StorePolicy

if TYPE_CHECKING:
    from interlock.adapters.queue import SqsSettleQueue
    from interlock.config import InterlockConfig
    from interlock.deps import Runtime


def policy_from_env() -> StorePolicy:
    """Store policy with the deployment's request lifetime and lease length."""
    return config().store_policy()


@cache
def stores() -> Stores:
    return stores_from_env(policy_from_env())


@cache
def config() -> InterlockConfig:
    """Defaults, then the environment, then the agent's document (a local JSON file
    named by `INTERLOCK_AGENT_CONFIG_FILE`, or the SSM parameter named by
    `INTERLOCK_AGENT_CONFIG_PARAM` when deployed), validated and frozen."""
    # The validated model loads pydantic: with the settings, not with this module.
    from interlock.config import assemble

    document = None
    settings = deployment()
    if path := settings.agent_config_file:
        document = json.loads(Path(path).read_text())
    elif name := settings.agent_config_param:
        import boto3

        document = load_json_parameter(boto3.client("ssm"), name)
    return assemble(os.environ, document)


@cache
def runtime() -> Runtime:
    """The service runtime: stores, the agent named by `INTERLOCK_AGENT`, the
    configured model, the fetch transport."""
    from interlock.agent import load_factory
    from interlock.deps import Runtime, TurnLimits
    from interlock.harness.agent import ModelConfig, build_model, check_agent
    from interlock.harness.transport import transport_for

    settings, where = config(), deployment()
    model = ModelConfig(settings.model_spec, os.environ.get("AWS_REGION"), openai_key)
    built = Runtime(
        stores(),
        lambda: build_model(model),
        agent=load_factory(where.agent),
        fetch=transport_for(where.fetch),
        # Renew well inside the lease so one slow beat never lets it lapse.
        limits=TurnLimits(
            heartbeat_s=max(settings.lease_ms / 3000, 0.2), max_model_calls=settings.max_model_calls
        ),
        config=settings,
        notifier=notifier(),
    )
    # A broken agent fails this cold start (a policy naming an undeclared field, a
    # missing import), not a person's first turn.
    check_agent(built)
    return built


SECRET_MAX_AGE_S = 300
"""How long a channel secret is cached: a rotated one is picked up within minutes."""


def channel_secret(channel: ChannelName) -> dict[str, str] | None:
    """A channel's secrets (JSON in Secrets Manager, named by `INTERLOCK_<CHANNEL>_SECRET`),
    read through Powertools parameters with caching; None when the channel is off.

    Slack's holds `botToken` and `signingSecret`; Telegram's `botToken` and
    `webhookSecret`. Never logged: callers keep them out of every message.
    """
    settings = deployment()
    name = settings.slack_secret if channel == "slack" else settings.telegram_secret
    if not name:
        return None
    from aws_lambda_powertools.utilities import parameters

    from interlock.adapters.parameters import quiet_response_bodies

    quiet_response_bodies()
    try:
        value = parameters.get_secret(name, transform="json", max_age=SECRET_MAX_AGE_S)
    except Exception as exc:  # unreadable or not JSON: the channel is off, turns go on
        logging.getLogger(__name__).warning(
            "the %s secret cannot be read: %s", channel, type(exc).__name__
        )
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        logging.getLogger(__name__).warning(
            "the %s secret is not a JSON object of strings", channel
        )
        return None
    return value


def openai_key() -> str | None:
    """The OpenAI-compatible endpoint's key: `INTERLOCK_OPENAI_API_KEY`, else the secret
    `INTERLOCK_OPENAI_KEY_SECRET` names (plain text, cached like the channels'); None
    when neither is set. Never logged."""
    settings = deployment()
    if key := settings.openai_api_key:
        return key
    name = settings.openai_key_secret
    if not name:
        return None
    from aws_lambda_powertools.utilities import parameters

    from interlock.adapters.parameters import quiet_response_bodies

    quiet_response_bodies()
    value = parameters.get_secret(name, max_age=SECRET_MAX_AGE_S)
    return value if isinstance(value, str) else None


def channels() -> dict[ChannelName, Channel]:
    """The configured channels' clients (their tokens read from the secrets)."""
    from interlock.adapters import slack, telegram
    from interlock.adapters.webclient import JsonHttp

    found: dict[ChannelName, Channel] = {}
    settings = deployment()
    # A secret not filled in yet (empty values) leaves its channel off.
    if (secret := channel_secret("slack")) and secret.get("botToken"):
        http = JsonHttp(settings.slack_api_url, {"Authorization": f"Bearer {secret['botToken']}"})
        found["slack"] = slack.SlackChannel(http)
    if (secret := channel_secret("telegram")) and secret.get("botToken"):
        http = JsonHttp(settings.telegram_api_url)
        found["telegram"] = telegram.TelegramChannel(http, secret["botToken"])
    return found


@cache
def notifier() -> Notifier:
    """Posts and settles cards on the configured channels."""
    from interlock.timing import SystemClock

    built = stores()
    return Notifier(
        built.channels,
        channels(),
        SystemClock().now_ms,
        deployment().page_url,
        requests=built.requests,
    )


@cache
def settle_queue() -> SqsSettleQueue:
    """The queue the expiry finder fans overdue requests out on (`INTERLOCK_SETTLE_QUEUE_URL`)."""
    import boto3

    from interlock.adapters.queue import SqsSettleQueue

    (url,) = deployment().required("settle_queue_url")
    return SqsSettleQueue(boto3.client("sqs"), url)


@cache
def lambda_client() -> Any:
    """A Lambda client, made once per container (the hand-overs to the resume function)."""
    import boto3

    return boto3.client("lambda")


_local_taps: Callable[[Tap], None] | None = None


def use_local_taps(apply: Callable[[Tap], None] | None) -> None:
    """Let the local server apply taps itself (deployed, the resume function does)."""
    global _local_taps
    _local_taps = apply


def hand_over_tap(tap: Tap) -> None:
    """Apply a screened tap asynchronously: an `Event` invoke of the resume function
    (only its role may claim), or, locally, the server's own worker thread."""
    if name := deployment().resume_function:
        from interlock.api.forward import tap_event

        lambda_client().invoke(
            FunctionName=name, InvocationType="Event", Payload=json.dumps(tap_event(tap)).encode()
        )
        return
    if _local_taps is None:
        raise ValueError("no resume function to hand taps to")
    _local_taps(tap)
