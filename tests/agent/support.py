"""Helpers for the Strands tier: a recording transport, a counting model factory."""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Callable
from typing import Any

from strands.models.model import Model

from examples import analyst
from examples.analyst.script import DEMO_SCENARIOS
from interlock.agent import AgentFactory, AgentInputs
from interlock.config import InterlockConfig
from interlock.deps import Runtime
from interlock.harness.agent import BuiltAgent, compose
from interlock.harness.journal import Journal
from interlock.harness.model import Scenario, ScriptedModel, Step
from interlock.ports import Stores
from interlock.timing import Clock


class Transport:
    """A fetch transport that records every URL it was asked for."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def __call__(self, url: str) -> str:
        self.urls.append(url)
        return f"id,value\n1,42 ({url})"


class Models:
    """A model factory that keeps every model it built, to count their calls."""

    def __init__(self, scenarios: list[Scenario] | tuple[Scenario, ...] = DEMO_SCENARIOS) -> None:
        self.scenarios = scenarios
        self.built: list[ScriptedModel] = []

    def __call__(self) -> ScriptedModel:
        model = ScriptedModel(self.scenarios)
        self.built.append(model)
        return model

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.built)


def scenario(*steps: Step | list[dict[str, Any]], name: str = "test") -> Scenario:
    """A scenario from steps; a plain list of blocks is a step that ignores results."""
    return Scenario(name, [s if callable(s) else _const(s) for s in steps])


def _const(blocks: list[dict[str, Any]]) -> Callable[[list[str]], list[dict[str, Any]]]:
    return lambda results: blocks


def analyst_agent(
    model: Model,
    *,
    roles: frozenset[str] = frozenset(),
    messages: list[Any] | None = None,
    max_model_calls: int = 12,
    journal: Journal | None = None,
    config: InterlockConfig | None = None,
) -> BuiltAgent:
    """The analyst example as Interlock composes it, outside any service function."""
    inputs = AgentInputs(
        user_id="alice",
        roles=roles,
        chat_id="chat-1",
        can_ask_a_human=True,
        max_model_calls=max_model_calls,
        settings=config or InterlockConfig(),
        _history=lambda: [],
        _model=lambda scripted: model,
    )
    spec = analyst.build(inputs)
    return compose(
        spec,
        model=model,
        messages=messages,
        max_model_calls=max_model_calls,
        journal=journal,
    )


def own_agent_runtime(stores: Stores, clock: Clock, agent: AgentFactory) -> Runtime:
    """A service runtime for a user's own agent, which brings its scripted model itself
    (`inputs.model(scripted=...)`): no model factory of Interlock's is ever called."""
    return Runtime(
        stores,
        lambda: None,  # type: ignore[arg-type, return-value]
        clock=clock,
        agent=agent,
        config=InterlockConfig(model="scripted"),
    )


def everything_stored(aws: dict[str, Any]) -> str:
    """Every item and every object, as text: what a leak test searches."""
    items = aws["dynamodb"].scan(TableName=aws["table"])["Items"]
    objects = aws["s3"].list_objects_v2(Bucket=aws["bucket"]).get("Contents", [])
    bodies = [
        gzip.decompress(aws["s3"].get_object(Bucket=aws["bucket"], Key=o["Key"])["Body"].read())
        for o in objects
    ]
    return json.dumps(items, default=_readable) + "".join(body.decode() for body in bodies)


def _readable(value: Any) -> str:
    """A binary attribute as text (a snapshot kept on its item is gzipped JSON)."""
    raw = bytes(value)
    with contextlib.suppress(OSError):
        raw = gzip.decompress(raw)
    return raw.decode(errors="replace")


def as_recorded(card: dict[str, Any], response: Any) -> Any:
    """`response` as Interlock records it when a person gives it: an approval carries the
    fingerprint execution is held to (`answers.decide`); anything else passes as given,
    for tests of what the harness makes of answers it could never have recorded."""
    from interlock import answers, errors

    try:
        return answers.decide(card, "resolved", response)[1]
    except errors.InvalidInput:
        return response
