"""The configuration assembler: defaults → environment → per-agent → validated → frozen."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pydantic
import pytest

from interlock.config import (
    DEFAULT_MODEL_ID,
    KNOWN_TOOLS,
    Deployment,
    Env,
    InterlockConfig,
    ModelSpec,
    assemble,
    variable,
)
from interlock.errors import InvalidInput
from tests.agent.support import analyst_agent


def test_defaults_are_valid_frozen_and_versioned() -> None:
    config = assemble({})
    assert config == InterlockConfig()
    assert len(config.version) == 12 and config.version == assemble({}).version
    with pytest.raises(pydantic.ValidationError):
        config.sample_rate = 1.0  # type: ignore[misc]


def test_layers_apply_in_order_and_change_the_version() -> None:
    env = {"INTERLOCK_REQUEST_TTL_S": "600", "INTERLOCK_MAX_MODEL_CALLS": "5"}
    agent = {
        "max_model_calls": 7,
        "tool_policies": {"send_report": {"risk": "high"}},
        "timeouts": {"question": {"action": "reroute", "reroute_role": "supervisor"}},
    }

    config = assemble(env, agent)

    assert (config.request_ttl_s, config.max_model_calls) == (600, 7), "agent beats env"
    assert config.tool_policies["send_report"].risk == "high"
    assert config.timeouts["question"].reroute_role == "supervisor"
    assert config.timeouts["approval"].action == "deny", "untouched defaults survive"
    assert config.version != InterlockConfig().version


@pytest.mark.parametrize(
    ("env", "agent", "message"),
    [
        ({}, {"tools": ["fetch_url", "rm -rf /"]}, "not tool names"),
        ({}, {"tool_policies": {"": {"risk": "low"}}}, "not tool names"),
        ({"INTERLOCK_REQUEST_TTL_S": "10"}, None, "request_ttl_s"),
        ({}, {"lease_ms": 10_000_000}, "lease_ms"),
        ({}, {"sample_rate": 2}, "sample_rate"),
        ({}, {"timeouts": {"info": {"action": "reroute"}}}, "reroute"),
        ({}, {"tool_policies": {"send_report": {"risk": "extreme"}}}, "risk"),
        ({}, {"smtp_password": "hunter2"}, "secrets"),
        ({}, {"tool_policies": {"send_report": {"api_key": "abc"}}}, "secrets"),
    ],
)
def test_invalid_configuration_is_refused(env: dict, agent: dict | None, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        assemble(env, agent)


def test_the_default_tools_are_exactly_the_demos() -> None:
    built = analyst_agent(None, roles=frozenset({"reporter"}))  # type: ignore[arg-type]
    assert set(built.tools) == KNOWN_TOOLS


def test_a_policy_may_name_the_agents_own_tool() -> None:
    # A user's agent gates its own tool: the policy is its factory's to read
    policies = {"close_account": {"risk": "high", "impact": "x"}}
    config = assemble({}, {"tools": ["close_account"], "tool_policies": policies})
    assert config.tool_policies["close_account"].risk == "high"
    # A policy for a tool that is not enabled (a typo) would gate nothing: refused
    with pytest.raises(InvalidInput, match=r"policies for tools not in `tools`: \['send_reprot'\]"):
        assemble({}, {"tool_policies": {"send_reprot": {"risk": "high", "impact": "x"}}})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bedrock:", "name a model after 'bedrock:'"),
        ("gemini", "must be 'scripted', 'tools', 'bedrock[:id]' or 'openai:"),
        ("openai", "'openai:<http(s) base url>#<model>'"),
        ("openai:http://127.0.0.1:8000/v1", "'openai:<http(s) base url>#<model>'"),
        ("openai:file:///etc#m", "'openai:<http(s) base url>#<model>'"),
        ("openai:http://127.0.0.1:8000/v1#a b", "not a model name"),
        ("scripted:fast", "pace"),
        ("bedrock:not a model", "not a Bedrock model id"),
    ],
)
def test_a_model_setting_that_names_no_model_is_refused(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ModelSpec.parse(spec)


def test_an_openai_compatible_model_names_its_endpoint_and_model() -> None:
    spec = ModelSpec.parse("openai:http://127.0.0.1:11434/v1#llama3.1:8b")
    assert (spec.provider, spec.base_url, spec.model_id) == (
        "openai",
        "http://127.0.0.1:11434/v1",
        "llama3.1:8b",
    )
    assert ModelSpec.parse(spec.spec) == spec


def test_bedrock_alone_is_the_default_model() -> None:
    assert ModelSpec.parse("bedrock").model_id == DEFAULT_MODEL_ID


# -- deployment settings: every variable read in one place ----------------------------------

SHARED = Path(__file__).resolve().parents[2] / "shared" / "interlock"


def test_every_interlock_variable_is_read_by_exactly_one_settings_source() -> None:
    from interlock import config_model

    behaviour = set(config_model._ENV)
    wiring = {variable(f.name) for f in fields(Deployment)}
    named = {value for key, value in vars(Env).items() if key.isupper()}

    assert behaviour | wiring == named, "a variable no settings source reads, or one not in Env"
    assert not behaviour & wiring
    assert set(config_model._ENV.values()) <= set(InterlockConfig.model_fields)


def test_no_module_reads_an_interlock_variable_on_its_own() -> None:
    # The settings sources are the only readers: a module that wants a value asks them,
    # so each default is written once, where the variable is read.
    readers = re.compile(r"(os\.environ|getenv)[^\n]*(Env\.|INTERLOCK_)")
    found = [
        f"{path.relative_to(SHARED)}:{number}"
        for path in SHARED.rglob("*.py")
        if path.name not in {"config.py", "config_model.py"}
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if readers.search(line)
    ]
    assert found == []


def test_deployment_settings_have_their_defaults_and_an_empty_value_is_unset() -> None:
    settings = Deployment.from_env({"INTERLOCK_TABLE": "t", "INTERLOCK_RESUME_FUNCTION": ""})

    assert settings.table == "t" and settings.resume_function is None
    assert (settings.fetch, settings.function, settings.heartbeat_s) == ("http", None, 10.0)
    assert settings.slack_api_url.startswith("https://")
    assert Deployment.from_env({"INTERLOCK_HEARTBEAT_S": "0.3"}).heartbeat_s == 0.3


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("INTERLOCK_FETCH", "dmeo"),
        ("INTERLOCK_FUNCTION", "runn"),
        ("INTERLOCK_HEARTBEAT_S", "ten"),
        ("INTERLOCK_HEARTBEAT_S", "0"),
        ("INTERLOCK_SLACK_API_URL", "slack.com/api"),
        ("INTERLOCK_PAGE_URL", "ftp://example.org/"),
    ],
)
def test_a_malformed_deployment_setting_fails_naming_its_variable(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        Deployment.from_env({name: value})


def test_a_missing_required_setting_is_named_and_keys_stay_out_of_the_repr() -> None:
    settings = Deployment.from_env(
        {"INTERLOCK_TABLE": "t", "INTERLOCK_OPENAI_API_KEY": "sk-live-1", "INTERLOCK_DEV_KEY": "ab"}
    )

    with pytest.raises(ValueError, match="INTERLOCK_BUCKET must be set"):
        settings.required("table", "bucket")
    assert settings.required("table") == ("t",)
    assert "sk-live-1" not in repr(settings) and "'ab'" not in repr(settings)
