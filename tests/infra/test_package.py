"""Interlock as a team adopts it: a wheel with the runtime and the CDK construct, installed
into a fresh virtualenv, synthesizing the team's own app (`team-app/`) beside a stack of
the team's, with cdk-nag judging Interlock's stacks and only those.

The fresh virtualenv gets the wheel and nothing of this repository; the third-party
packages the wheel depends on (aws-cdk-lib, Strands, ...) are read from the development
environment's site-packages through a `.pth` line rather than downloaded again, so the
test needs no network. What it proves is that the installed wheel alone carries what the
construct deploys: its handlers, the card page, the layer's lock and the runtime.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from infra.assets import REQUIREMENTS
from infra.bundling import requirement_names

ROOT = Path(__file__).resolve().parents[2]
TEAM_APP = ROOT / "team-app"
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel .` builds from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [*PIP_WHEEL, "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("interlock-*.whl")
    return built


def test_the_wheel_holds_the_runtime_the_construct_and_what_it_deploys(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"interlock", "interlock_cdk", "interlock-0.1.0.dist-info"}
    for expected in (
        "interlock/agent.py",
        "interlock_cdk/wiring.py",
        "interlock_cdk/_assets/functions/stream/run.sh",
        "interlock_cdk/_assets/web/index.html",
        "interlock_cdk/_assets/requirements.lock",
        "interlock_cdk/_assets/examples/analyst/__init__.py",
    ):
        assert expected in names, expected
    assert not [n for n in names if "__pycache__" in n or n.startswith("tests/")]


def test_the_wheels_dependencies_are_the_layers_pins() -> None:
    # The wheel declares what the layer ships, so `pip install interlock` runs the code
    # the functions run.
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert requirement_names(declared) == requirement_names(REQUIREMENTS.read_text().splitlines())


def _fresh_venv(at: Path) -> Path:
    """A virtualenv with nothing installed, seeing the development environment's
    third-party packages (not this repository: it is on no path of this environment)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(at)], check=True, timeout=120
    )
    python = at / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _clean_env(**extra: str) -> dict[str, str]:
    # Nothing of this checkout on the path: not PYTHONPATH, not the working directory.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CDK_"))}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", **extra}


def test_a_team_app_synthesizes_from_the_installed_wheel_beside_its_own_stack(
    wheel: Path, tmp_path: Path
) -> None:
    # Given the wheel installed into a fresh virtualenv, and the team's app copied
    # somewhere that is not this repository
    python = _fresh_venv(tmp_path / "venv")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv, "uv installs the wheel (it is in requirements-dev.txt)"
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--no-deps", "--python", str(python), str(wheel)],
        check=True,
        timeout=120,
    )
    app_dir = shutil.copytree(TEAM_APP, tmp_path / "team-app")
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import interlock, interlock_cdk; print(interlock.__file__); "
            "print(interlock_cdk.__file__)",
        ],
        cwd=app_dir,
        env=_clean_env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert all(Path(p).is_relative_to(tmp_path / "venv") for p in where), where

    # When the app is synthesized as `cdk synth` runs it (its cdk.json context, assets
    # not bundled: bundling installs the lock's wheels for Lambda, a download)
    out = tmp_path / "cdk.out"
    context = json.loads((app_dir / "cdk.json").read_text())["context"]
    context["aws:cdk:bundling-stacks"] = []
    done = subprocess.run(
        [str(python), "app.py"],
        cwd=app_dir,
        env=_clean_env(CDK_OUTDIR=str(out), CDK_CONTEXT_JSON=json.dumps(context)),
        capture_output=True,
        text=True,
        timeout=600,
    )

    # Then it synthesizes: Interlock's stacks pass every check, and the team's stack,
    # which Interlock's checks would fail, is not judged by them
    assert done.returncode == 0, done.stderr[-4000:]
    templates = {p.name.removesuffix(".template.json") for p in out.glob("*.template.json")}
    interlock = {f"InterlockTeam{part}" for part in ("Storage", "Web", "Api", "WebContent")}
    assert templates == {"TeamReports", *interlock}
    report = json.loads((out / "validation-report.json").read_text())
    assert [v for plugin in report["pluginReports"] for v in plugin["violations"]] == []
    # And the team's agent is the one the functions serve, shipped as its own layer,
    # with what its tools need (the team's table)
    api = (out / "InterlockTeamApi.template.json").read_text()
    assert "my_agent.agent:build" in api and "REFUNDS_TABLE" in api
