"""What the request view tells a person about a request that ended: never an answer
that did not run."""

from __future__ import annotations

import pytest

from interlock.api.views import request_view
from interlock.ports import Stores
from interlock.records import RequestState
from interlock.timing import ManualClock
from tests.adapters.test_requests import pause


@pytest.mark.parametrize(
    ("state", "said"),
    [
        pytest.param(RequestState.CANCELLED, "Cancelled", id="cancelled"),
        pytest.param(RequestState.EXPIRED, "Expired", id="expired"),
    ],
)
def test_an_approval_recorded_then_ended_is_not_shown_as_approved(
    stores: Stores, clock: ManualClock, state: RequestState, said: str
) -> None:
    # Given an approval that was recorded (a claim), then the request ended before it ran
    opened = pause(stores, clock)
    recorded = opened.request.with_changes(
        state=state,
        decision="approved",
        decided_by="alice",
        decided_at_ms=clock.now_ms(),
        ended_reason="cancelled by the user",
    )

    view = request_view(recorded, clock.now_ms(), None)

    # Then the view says how it ended, and that the approval never ran
    assert view["state"] == state.value
    assert view["decision"] == state.value
    assert view["decided"].startswith(f"{said}: ") and "never carried out" in view["decided"]
    assert not view["decided"].startswith("Approved")


def test_a_done_request_still_says_who_decided(stores: Stores, clock: ManualClock) -> None:
    opened = pause(stores, clock)
    done = opened.request.with_changes(
        state=RequestState.DONE,
        decision="approved",
        decided_by="alice",
        decided_at_ms=clock.now_ms(),
    )

    view = request_view(done, clock.now_ms(), None)

    assert view["decision"] == "approved"
    assert view["decided"].startswith("Approved by alice at ")
