"""A model that cannot be reached when a paused run resumes: the run fails, the claim
is released, and the person is told why (the SDK's own words); the same answer, once
the model is back, continues the run from its journal."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from strands.types.streaming import StreamEvent
from strands.vended_interventions.hitl import HumanInTheLoop

from interlock import errors
from interlock.adapters.factory import Stores
from interlock.agent import AgentInputs, AgentSpec
from interlock.config import assemble
from interlock.harness.model import ToolsModel
from interlock.records import RequestState
from interlock.resume import resume_turn
from interlock.timing import ManualClock
from interlock.turns import Caller, Runtime, run_turn
from tests.agent.test_tools_stand_in import refund_order


class Unreachable(ToolsModel):
    """A model whose endpoint refuses every connection."""

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterable[StreamEvent]:
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9/model/m/converse-stream")
        yield {}  # pragma: no cover - makes this an async generator


def agent(inputs: AgentInputs) -> AgentSpec:
    return AgentSpec(tools=[refund_order], interventions=[HumanInTheLoop()])


def test_a_resume_whose_model_is_unreachable_says_so_and_can_be_answered_again(
    stores: Stores, clock: ManualClock
) -> None:
    settings = assemble({"INTERLOCK_MODEL": "tools"})
    caller, chat = Caller("newcomer"), "unreachable-resume"
    paused = run_turn(
        Runtime(stores, ToolsModel, clock=clock, agent=agent, config=settings),
        caller,
        chat,
        "call refund_order order_id=A-1",
    )
    assert paused.offer is not None

    with pytest.raises(errors.RunFailed) as failed:
        resume_turn(
            Runtime(stores, Unreachable, clock=clock, agent=agent, config=settings),
            caller,
            chat,
            interrupt_id=paused.offer.request.interrupt_id,
            secret=paused.offer.secret,
            status="resolved",
            payload={"decision": "approve"},
        )

    # The approved tool ran before the model was asked: the answer stands
    said = str(failed.value)
    assert said.startswith("the model could not answer: Could not connect to the endpoint URL")
    assert said.endswith("it will be continued with that answer, which can no longer be changed")
    request = stores.requests.get(chat, clock.now_ms())
    assert request is not None and request.state is not RequestState.DONE

    # With the model back, the same answer finishes the run
    done = resume_turn(
        Runtime(stores, ToolsModel, clock=clock, agent=agent, config=settings),
        caller,
        chat,
        interrupt_id=paused.offer.request.interrupt_id,
        secret=paused.offer.secret,
        status="resolved",
        payload={"decision": "approve"},
    )
    assert done.outcome == "completed"
    assert "refund_order returned: Refunded 10.00 on order A-1." in (done.text or "")
