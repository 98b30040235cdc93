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
    from interlock.adapters.handover import KmsHandOverKey
    from interlock.adapters.queue import SqsSettleQueue
    from interlock.api.identity import Tokens
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
_local_tokens: Tokens | None = None


def use_local_taps(apply: Callable[[Tap], None] | None) -> None:
    """Let the local server apply taps itself (deployed, the resume function does)."""
    global _local_taps
    _local_taps = apply


def use_local_tokens(tokens: Tokens | None) -> None:
    """Let the local server's token check stand for the user pool's."""
    global _local_tokens
    _local_tokens = tokens


@cache
def _pool_tokens(pool_id: str, clients: str) -> Tokens:
    from interlock.adapters.cognito import CognitoTokens, issuer_of, keys_url

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    client_ids = [c.strip() for c in clients.split(",") if c.strip()]
    return CognitoTokens(
        issuer_of(region, pool_id), client_ids, keys_url(region, pool_id, endpoint)
    )


def tokens() -> Tokens | None:
    """How this process verifies a person's token: the user pool named by
    `INTERLOCK_USER_POOL_ID` (deployed), else local mode's check, else None (and then
    nobody is believed)."""
    settings = deployment()
    if settings.user_pool_id and settings.user_pool_client_ids:
        return _pool_tokens(settings.user_pool_id, settings.user_pool_client_ids)
    return _local_tokens


@cache
def hand_over_key() -> KmsHandOverKey | None:
    """The KMS key hand-overs of taps are signed with (`INTERLOCK_HAND_OVER_KEY`)."""
    name = deployment().hand_over_key
    if not name:
        return None
    import boto3

    from interlock.adapters.handover import KmsHandOverKey

    return KmsHandOverKey(boto3.client("kms"), name)


def hand_over_tap(tap: Tap) -> None:
    """Apply a screened tap asynchronously: an `Event` invoke of the resume function
    (only its role may claim), signed with the hand-over key, or, locally, the server's
    own worker thread.

    Raises:
        ValueError: a resume function is named but no hand-over key to sign with.
    """
    if name := deployment().resume_function:
        from interlock.api.forward import tap_event

        key = hand_over_key()
        if key is None:
            raise ValueError("INTERLOCK_HAND_OVER_KEY must be set to hand taps over")
        lambda_client().invoke(
            FunctionName=name,
            InvocationType="Event",
            Payload=json.dumps(tap_event(tap, key.sign)).encode(),
        )
        return
    if _local_taps is None:
        raise ValueError("no resume function to hand taps to")
    _local_taps(tap)
