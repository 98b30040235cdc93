"""The layer: local pip bundling into `python/`, and a hash of exactly what goes in."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from aws_cdk import App, BundlingOptions, DockerImage, Stack
from aws_cdk.assertions import Template

from infra.layer import PACKAGE_DIR, InterlockLayer, PipLocalBundling, layer_fingerprint


@pytest.fixture
def requirements(tmp_path: Path) -> Path:
    """An empty requirements file: bundling then costs one quick pip run, no download."""
    path = tmp_path / "requirements.txt"
    path.write_text("")
    return path


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the real package with bytecode caches planted in it."""
    path = tmp_path / "src" / "interlock"
    shutil.copytree(PACKAGE_DIR, path, ignore=shutil.ignore_patterns("__pycache__"))
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "__init__.cpython-312.pyc").write_bytes(b"\x00stale")
    (path / "stray.pyc").write_bytes(b"\x00stale")
    return path


def _bundle(requirements: Path, package: Path, output: Path) -> bool:
    output.mkdir()
    bundler = PipLocalBundling(requirements, package)
    # Called the way the jsii runtime calls it: the options struct as one argument
    return bundler.try_bundle(str(output), BundlingOptions(image=DockerImage.from_registry("x")))


def test_bundle_puts_the_package_under_python(
    requirements: Path, package: Path, tmp_path: Path
) -> None:
    # When the layer is bundled locally with no third-party requirements
    output = tmp_path / "asset"
    bundled = _bundle(requirements, package, output)

    # Then the package sits where the Lambda runtime looks for layer code
    assert bundled is True
    assert (output / "python" / "interlock" / "__init__.py").is_file()
    assert (output / "python" / "interlock" / "adapters" / "schema.py").is_file()
    assert not [p for p in output.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]


def test_fingerprint_is_stable_and_ignores_bytecode(requirements: Path, package: Path) -> None:
    before = layer_fingerprint(requirements, package)
    (package / "__pycache__" / "other.cpython-312.pyc").write_bytes(b"\x00")
    assert layer_fingerprint(requirements, package) == before
    assert len(before) == 64


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda req, pkg: req.write_text("boto3==1.0.0\n"), id="requirements"),
        pytest.param(lambda req, pkg: (pkg / "__init__.py").write_text("# x\n"), id="source"),
        pytest.param(lambda req, pkg: (pkg / "new.py").write_text(""), id="new-module"),
        pytest.param(
            lambda req, pkg: (pkg / "adapters" / "schema.py").rename(pkg / "adapters" / "s.py"),
            id="rename",
        ),
    ],
)
def test_fingerprint_changes_with_what_goes_in(
    requirements: Path, package: Path, change: Callable[[Path, Path], object]
) -> None:
    before = layer_fingerprint(requirements, package)
    change(requirements, package)
    assert layer_fingerprint(requirements, package) != before


def test_layer_targets_python_3_12_on_x86_64(requirements: Path, tmp_path: Path) -> None:
    # Given an app that bundles no stack, so synthesis does not run pip
    app = App(context={"aws:cdk:bundling-stacks": []}, outdir=str(tmp_path))
    stack = Stack(app, "LayerOnly")

    # When the layer is added
    InterlockLayer(stack, "Layer", requirements=requirements)

    # Then it declares the runtime and architecture the functions will use
    Template.from_stack(stack).has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {"CompatibleRuntimes": ["python3.12"], "CompatibleArchitectures": ["x86_64"]},
    )
