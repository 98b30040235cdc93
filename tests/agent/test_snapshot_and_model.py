"""Snapshots with a schema version; the scripted model; the configurable Bedrock path."""

from __future__ import annotations

import pytest
from strands.models.bedrock import BedrockModel

from examples.analyst.script import DEMO_SCENARIOS
from interlock.errors import IncompatibleSnapshot, InvalidInput
from interlock.harness.agent import ModelConfig, build_model
from interlock.harness.model import ScriptedModel
from interlock.harness.snapshot import (
    SCHEMA_VERSION,
    load_snapshot,
    paused_batch_tools,
    take_snapshot,
)
from tests.agent.support import analyst_agent
from tests.agent.test_hooks import ctx
from tests.agent.test_tools import run


def paused_snapshot() -> dict:
    built = analyst_agent(ScriptedModel(DEMO_SCENARIOS), roles=frozenset())
    assert run(built, ctx(), "please download the table").stop_reason == "interrupt"
    return take_snapshot(built.agent, {"chat_id": "c1"})


def test_a_snapshot_round_trips_into_a_fresh_agent() -> None:
    snapshot = paused_snapshot()
    fresh = analyst_agent(ScriptedModel(DEMO_SCENARIOS), roles=frozenset())

    app_data = load_snapshot(fresh.agent, snapshot)

    assert snapshot["interlock_schema"] == SCHEMA_VERSION
    assert app_data == {"chat_id": "c1"}
    assert len(fresh.agent.messages) == 4
    assert paused_batch_tools(snapshot) == ["request_approval"]


@pytest.mark.parametrize(
    "broken",
    [
        {"interlock_schema": SCHEMA_VERSION + 1},
        {"interlock_schema": None},
        {"interlock_schema": SCHEMA_VERSION, "strands": {"scope": "agent"}},
    ],
)
def test_an_incompatible_snapshot_is_refused_clearly(broken: dict) -> None:
    snapshot = {**paused_snapshot(), **broken}
    fresh = analyst_agent(ScriptedModel(DEMO_SCENARIOS), roles=frozenset())
    with pytest.raises(IncompatibleSnapshot):
        load_snapshot(fresh.agent, snapshot)


def test_the_scripted_model_continues_from_the_history_in_a_new_instance() -> None:
    snapshot = paused_snapshot()
    fresh_model = ScriptedModel(DEMO_SCENARIOS)
    fresh = analyst_agent(fresh_model, roles=frozenset())
    load_snapshot(fresh.agent, snapshot)

    assert fresh_model.scenario_for(fresh.agent.messages).name == "download"
    assert fresh_model.calls == 0


def test_the_model_is_chosen_by_configuration() -> None:
    scripted = ModelConfig.from_env({"INTERLOCK_MODEL": "scripted"})
    assert isinstance(build_model(scripted, DEMO_SCENARIOS), ScriptedModel)
    with pytest.raises(ValueError, match="scripted stand-in"):
        build_model(scripted)  # an agent with no script of its own names its real model
    config = ModelConfig.from_env(
        {"INTERLOCK_MODEL": "bedrock:amazon.nova-lite-v1:0", "AWS_REGION": "eu-west-1"}
    )
    model = build_model(config)
    assert isinstance(model, BedrockModel)
    assert model.get_config()["model_id"] == "amazon.nova-lite-v1:0"
    assert ModelConfig.from_env({}).provider == "bedrock", "Bedrock is the default"
    with pytest.raises(InvalidInput, match="model"):
        ModelConfig.from_env({"INTERLOCK_MODEL": "gpt"})
