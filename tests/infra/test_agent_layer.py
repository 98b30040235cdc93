"""The agent's layer beside Interlock's: resolved with Interlock's pins, shipping none of
them, refused when it contradicts one; and every function's unzipped size checked
against Lambda's 250 MB once its stack is bundled."""

from __future__ import annotations

import sys
import zipfile
from functools import partial
from pathlib import Path

import pytest
from aws_cdk import App, BundlingOptions, DockerImage, Stack
from aws_cdk import aws_lambda as lambda_

from infra.agent_lock import (
    RequirementConflict,
    compile_command,
    lock_beside,
    shipped_pins,
)
from infra.bundling import PipLocalBundling, requirement_names
from infra.layer import LOCK, InterlockLayer
from infra.lock import UV_PLATFORMS
from infra.sizes import (
    EXTERNAL_LAYER_ALLOWANCE,
    MB,
    UNZIPPED_LIMIT,
    UnzippedSizeCheck,
    size_problem,
    unzipped_size,
)

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
# The interpreter running the tests compiles the bundle, as in test_layer.py.
TEST_RUNTIME = lambda_.Runtime(f"python{HERE}", lambda_.RuntimeFamily.PYTHON)
# A small pure-Python distribution Interlock does not ship, that needs one it does
# (typing-extensions) and one it does not (mypy-extensions).
AGENT_PIN = "typing-inspect==0.9.0"


def _requirements(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent" / "requirements.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _agent_package(tmp_path: Path) -> Path:
    package = tmp_path / "agent" / "my_agent"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A stand-in agent."""\n')
    return package


def test_the_agent_is_resolved_with_interlocks_pins_and_ships_none_of_them(
    tmp_path: Path,
) -> None:
    # Given an agent whose one requirement depends on a package Interlock's layer ships
    requirements = _requirements(tmp_path, f"{AGENT_PIN}\n")
    bundler = PipLocalBundling(
        requirements,
        _agent_package(tmp_path),
        runtime=TEST_RUNTIME,
        resolve=partial(lock_beside, beside=LOCK),
    )

    # When its layer is bundled
    output = tmp_path / "asset"
    output.mkdir()
    bundler.try_bundle(str(output), BundlingOptions(image=DockerImage.from_registry("x")))

    # Then it holds the agent, its requirement and what only that needs
    site = output / "python"
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert installed == {"typing_inspect", "mypy_extensions"}
    assert (site / "typing_inspect.py").is_file()
    assert (site / "my_agent" / "__init__.py").is_file()
    # and nothing of Interlock's lock: Lambda would unpack it over Interlock's own
    shipped = {name.replace("-", "_") for name in shipped_pins(LOCK)}
    assert not installed & shipped
    assert not (site / "typing_extensions.py").exists()


def test_the_agents_lock_is_hashed_for_the_functions_platform(tmp_path: Path) -> None:
    lock = lock_beside(_requirements(tmp_path, f"{AGENT_PIN}\n"), tmp_path)

    text = lock.read_text()
    entries = requirement_names(text.replace("\\\n", " ").splitlines())
    assert entries == {"typing-inspect": "0.9.0", "mypy-extensions": entries["mypy-extensions"]}
    assert text.count("--hash=sha256:") >= 2
    command = compile_command("uv", Path("requirements.txt"), lock)
    assert command[command.index("--constraint") + 1] == str(LOCK)
    assert command[command.index("--python-platform") + 1] == UV_PLATFORMS["arm64"]
    left_out = {command[i + 1] for i, arg in enumerate(command) if arg == "--no-emit-package"}
    assert left_out == set(shipped_pins(LOCK))


def test_a_pin_against_interlocks_fails_the_synth_naming_both_versions(tmp_path: Path) -> None:
    # Given an agent pinning another pydantic than Interlock's
    requirements = _requirements(tmp_path, "pydantic==2.0.0\n")
    app = App(context={"aws:cdk:bundling-stacks": []}, outdir=str(tmp_path / "out"))
    stack = Stack(app, "Api")

    # Then its layer is refused as it is declared, with no index and no bundling
    with pytest.raises(RequirementConflict) as raised:
        InterlockLayer(
            stack,
            "AgentLayer",
            requirements=requirements,
            package_dir=_agent_package(tmp_path),
            beside=LOCK,
        )
    message = str(raised.value)
    assert "\n" not in message
    assert "pydantic==2.0.0" in message
    assert f"pydantic=={shipped_pins(LOCK)['pydantic']}" in message


def test_a_range_against_interlocks_pin_fails_with_the_resolvers_reason(tmp_path: Path) -> None:
    # A range is no exact pin: uv finds the conflict, and says it on one line
    with pytest.raises(RequirementConflict) as raised:
        lock_beside(_requirements(tmp_path, "pydantic<2\n"), tmp_path)
    message = str(raised.value)
    assert "\n" not in message
    assert "pydantic<2" in message
    assert f"pydantic=={shipped_pins(LOCK)['pydantic']}" in message


def test_one_size_check_per_stack_whatever_its_layers(tmp_path: Path) -> None:
    app = App(context={"aws:cdk:bundling-stacks": []}, outdir=str(tmp_path / "out"))
    stack = Stack(app, "Api")
    empty = _requirements(tmp_path, "# none\n")
    InterlockLayer(stack, "Layer", requirements=empty)
    InterlockLayer(stack, "AgentLayer", requirements=empty, package_dir=_agent_package(tmp_path))

    checks = [c for c in stack.node.children if c.node.id == "UnzippedSizeCheck"]
    assert len(checks) == 1
    app.synth()  # bundling skipped: nothing to measure, nothing refused


def test_unzipped_size_counts_files_and_zip_members(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "python" / "pkg").mkdir(parents=True)
    (tree / "python" / "pkg" / "a.py").write_bytes(b"x" * 1000)
    (tree / "python" / "b.bin").write_bytes(b"y" * 24)
    archive = tmp_path / "code.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("handler.py", b"z" * 5000)

    assert unzipped_size(tree) == 1024
    assert unzipped_size(archive) == 5000


def test_a_function_over_250_mb_is_named_with_every_part(tmp_path: Path) -> None:
    # Given a layer directory of 200 MB (a sparse file: its size, none of the disk)
    layer = tmp_path / "agent-layer"
    layer.mkdir()
    with (layer / "big.so").open("wb") as big:
        big.truncate(200 * MB)
    parts = {
        "code": 10_000,
        "Layer/Layer": 45 * MB,
        "AgentLayer/Layer": unzipped_size(layer),
        "outside layer 3 (allowance)": EXTERNAL_LAYER_ALLOWANCE,
    }

    # Then the function is over Lambda's limit, and the message says by what
    problem = size_problem("Api/Run/Function", parts)
    assert problem is not None
    assert problem.startswith("Api/Run/Function unzips to 255.0 MB")
    assert "250.0 MB (262,144,000 bytes)" in problem
    assert "AgentLayer/Layer 200.0 MB" in problem
    # and without the agent's big file it fits
    assert size_problem("Api/Run/Function", {**parts, "AgentLayer/Layer": 1 * MB}) is None
    assert UNZIPPED_LIMIT == 262_144_000


def _stack_with_a_function(tmp_path: Path, app: App) -> Stack:
    code, layer = tmp_path / "code", tmp_path / "layer" / "python"
    code.mkdir()
    layer.mkdir(parents=True)
    (code / "handler.py").write_bytes(b"#" * 3000)
    (layer / "dependency.py").write_bytes(b"#" * 7000)
    stack = Stack(app, "Api")
    built = lambda_.LayerVersion(stack, "Layer", code=lambda_.Code.from_asset(str(layer.parent)))
    adapter = lambda_.LayerVersion.from_layer_version_arn(
        stack, "Adapter", "arn:aws:lambda:us-east-1:123456789012:layer:Adapter:1"
    )
    lambda_.Function(
        stack,
        "Run",
        code=lambda_.Code.from_asset(str(code)),
        handler="handler.handler",
        runtime=lambda_.Runtime.PYTHON_3_12,
        layers=[built, adapter],
    )
    return stack


def test_the_check_measures_the_bundles_and_fails_the_synth(tmp_path: Path) -> None:
    # Given a bundled stack whose function is 3,000 + 7,000 bytes and an outside layer
    app = App(outdir=str(tmp_path / "out"))
    stack = _stack_with_a_function(tmp_path, app)
    limit = 10_000 + EXTERNAL_LAYER_ALLOWANCE - 1
    stack.node.add_validation(UnzippedSizeCheck(stack, limit=limit))

    # Then the synth fails naming the function and each part
    with pytest.raises(RuntimeError, match=r"Api/Run unzips to .* code 0\.0 MB, Layer 0\.0 MB"):
        app.synth()


def test_the_check_passes_a_function_that_fits(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path / "out"))
    stack = _stack_with_a_function(tmp_path, app)
    check = UnzippedSizeCheck(stack, limit=10_000 + EXTERNAL_LAYER_ALLOWANCE)
    stack.node.add_validation(check)

    app.synth()
    assert check.validate() == []
