"""`./dev smoke`: its plan prints every step and touches nothing; a real run always
tears its stage down."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from local import smoke

ROOT = Path(__file__).resolve().parents[2]


def test_the_plan_prints_every_step_and_runs_none() -> None:
    shown = subprocess.run(
        [str(ROOT / "dev"), "smoke", "--plan", "--stage", "smk1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert shown.startswith("./dev smoke: 7 steps against stage 'smk1' (nothing is run)")
    for step in smoke.STEPS:
        assert step.name in shown
    # Deployed and destroyed under its own stage, with its data
    assert (
        "npx cdk deploy --all -c interlock:stage=smk1 -c interlock:removalPolicy=destroy" in shown
    )
    assert "npx cdk destroy --all -c interlock:stage=smk1" in shown
    # The second factor is enrolled the way the pool asks for it
    for call in ("ADMIN_USER_PASSWORD_AUTH", "MFA_SETUP", "VerifySoftwareToken"):
        assert call in shown
    assert "@ag-ui/client HttpAgent, unmodified" in shown


def test_the_codes_are_rfc_6238s() -> None:
    # The RFC's SHA-1 vectors: the seed "12345678901234567890", eight digits
    seed = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
    assert smoke.totp(seed, at=59, digits=8) == "94287082"
    assert smoke.totp(seed, at=1111111109, digits=8) == "07081804"
    assert smoke.totp(seed.lower(), at=59) == "287082"


def test_a_failed_step_still_destroys_the_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    done: list[str] = []

    def fails(run: smoke.Run) -> None:
        done.append("deploy")
        raise RuntimeError("the deploy failed halfway")

    steps = (
        smoke.Step("deploy", "", fails),
        smoke.Step("approve", "", lambda run: done.append("approve")),
        smoke.Step("destroy", "", lambda run: done.append("destroy"), always=True),
    )
    monkeypatch.setattr(smoke, "STEPS", steps)
    assert smoke.main(["--stage", "smk2"]) == 1
    assert done == ["deploy", "destroy"]
