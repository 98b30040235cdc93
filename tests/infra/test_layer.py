"""The layer: local bundling into `python/` with bytecode of the runtime's own Python,
the interpreter that compiles it, and a hash of exactly what goes in."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from aws_cdk import App, BundlingOptions, DockerImage, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from infra.bundling import (
    PYTHON_VARIABLE,
    LayerBuildError,
    ToolFailed,
    pip_platform_arguments,
    run_tool,
    runtime_python,
)
from infra.layer import PACKAGE_DIR, InterlockLayer, PipLocalBundling, layer_fingerprint

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
# The interpreter running the tests stands in for the runtime's: the bundle compiles with
# a Python of the version asked for, whichever it is.
TEST_RUNTIME = lambda_.Runtime(f"python{HERE}", lambda_.RuntimeFamily.PYTHON)


@pytest.fixture
def requirements(tmp_path: Path) -> Path:
    """An empty requirements file: bundling then costs no pip run and no download."""
    path = tmp_path / "requirements.txt"
    path.write_text("# nothing to install\n")
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
    bundler = PipLocalBundling(requirements, package, runtime=TEST_RUNTIME)
    # Called the way the jsii runtime calls it: the options struct as one argument
    return bundler.try_bundle(str(output), BundlingOptions(image=DockerImage.from_registry("x")))


def test_bundle_puts_the_package_under_python_compiled(
    requirements: Path, package: Path, tmp_path: Path
) -> None:
    # When the layer is bundled locally with no third-party requirements
    output = tmp_path / "asset"
    bundled = _bundle(requirements, package, output)

    # Then the package sits where the Lambda runtime looks for layer code
    site = output / "python"
    assert bundled is True
    assert (site / "interlock" / "__init__.py").is_file()
    assert not (site / "interlock" / "stray.pyc").exists(), "the source tree's caches stay out"
    # with bytecode for every module, from the runtime's Python, valid whatever the
    # file times in the zip (hash-based, never checked against the source)
    sources = sorted(site.rglob("*.py"))
    tag = sys.implementation.cache_tag
    for source in sources:
        cached = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        header = cached.read_bytes()[:8]
        assert header[:4] == importlib.util.MAGIC_NUMBER, source
        assert int.from_bytes(header[4:8], "little") == 0b01, "hash-based, unchecked"
    assert len(list(site.rglob("*.pyc"))) == len(sources), "no stale bytecode"


def test_the_bytecode_is_reproducible(requirements: Path, package: Path, tmp_path: Path) -> None:
    # Given the same inputs bundled twice, in different directories
    first, second = tmp_path / "one", tmp_path / "two"
    _bundle(requirements, package, first)
    _bundle(requirements, package, second)

    # Then every file is byte for byte the same (tracebacks name the runtime's path)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)
    cached = first / "python" / "interlock" / "__pycache__"
    assert b"/opt/python/interlock/" in next(cached.glob("config.*.pyc")).read_bytes()


def test_a_named_interpreter_of_another_version_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PYTHON_VARIABLE, sys.executable)
    with pytest.raises(LayerBuildError, match=rf"is Python {HERE}; the functions run Python 3\.99"):
        runtime_python("3.99")


def test_no_interpreter_of_the_runtimes_version_fails_the_bundle(
    requirements: Path, package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a machine with no Python 3.99 anywhere
    monkeypatch.delenv(PYTHON_VARIABLE, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    bundler = PipLocalBundling(
        requirements, package, runtime=lambda_.Runtime("python3.99", lambda_.RuntimeFamily.PYTHON)
    )

    # Then bundling says what is missing, before anything is installed
    output = tmp_path / "asset"
    output.mkdir()
    with pytest.raises(LayerBuildError, match=rf"No Python 3\.99 .* {PYTHON_VARIABLE}"):
        bundler.try_bundle(str(output), BundlingOptions(image=DockerImage.from_registry("x")))
    assert list(output.iterdir()) == []


def test_pyenv_versions_are_found_newest_patch_first(tmp_path: Path) -> None:
    # Given pyenv holding two patch releases of the runtime's version (stand-ins)
    for patch in ("9", "10"):
        bin_dir = tmp_path / "versions" / f"{HERE}.{patch}" / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / f"python{HERE}").symlink_to(sys.executable)

    # Then, with none on PATH, the newest is the one used
    found = runtime_python(HERE, {"PATH": str(tmp_path / "empty"), "PYENV_ROOT": str(tmp_path)})
    assert found == str(tmp_path / "versions" / f"{HERE}.10" / "bin" / f"python{HERE}")


def test_a_lock_is_installed_exactly_for_the_functions_platform(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("boto3==1.0.0 \\\n    --hash=sha256:00\n")
    pinned = tmp_path / "requirements.txt"
    pinned.write_text("boto3==1.0.0\n")

    locked = PipLocalBundling(lock, PACKAGE_DIR).pip_command(tmp_path)
    resolved = PipLocalBundling(pinned, PACKAGE_DIR).pip_command(tmp_path)

    assert {"--require-hashes", "--no-deps", "--no-compile"} <= set(locked)
    assert "--require-hashes" not in resolved and "--no-deps" not in resolved
    platforms = [locked[i + 1] for i, arg in enumerate(locked) if arg == "--platform"]
    assert platforms == ["manylinux2014_aarch64", "manylinux_2_28_aarch64"]
    assert locked[locked.index("--python-version") + 1] == "3.12"


def test_a_failing_pip_fails_the_bundle_with_pips_own_message(
    package: Path, tmp_path: Path
) -> None:
    # Given a requirement the index does not have
    missing = tmp_path / "missing.txt"
    missing.write_text("interlock-no-such-distribution==0.0.1\n")

    # Then bundling (and so the synth) stops, saying what pip said
    with pytest.raises(LayerBuildError, match=r"pip install -r missing\.txt failed: ERROR: "):
        _bundle(missing, package, tmp_path / "asset")


def test_an_error_pip_reports_while_exiting_0_fails_too() -> None:
    # pip reports dependency conflicts on stderr and still exits 0
    script = "import sys; sys.stderr.write('ERROR: pip found a conflict\\nx 1 needs y<2\\n')"
    with pytest.raises(ToolFailed, match=r"^pip install failed: ERROR: pip found a conflict$"):
        run_tool([sys.executable, "-c", script], "pip install")


def test_a_failing_step_says_its_last_words_on_one_line() -> None:
    script = "import sys; print('warning: noise', file=sys.stderr); sys.exit('bad\\nworse')"
    with pytest.raises(ToolFailed) as raised:
        run_tool([sys.executable, "-c", script], "uv pip compile")
    assert str(raised.value) == "uv pip compile failed: bad worse"
    assert "warning: noise" in raised.value.stderr
    assert run_tool([sys.executable, "-c", "print('fine')"], "step") == "fine\n"


def test_fingerprint_is_stable_and_ignores_bytecode(requirements: Path, package: Path) -> None:
    before = layer_fingerprint(requirements, package)
    (package / "__pycache__" / "other.cpython-312.pyc").write_bytes(b"\x00")
    assert layer_fingerprint(requirements, package) == before
    assert len(before) == 64


def _flip_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda req, pkg: req.write_text("boto3==1.0.0\n"), id="requirements"),
        pytest.param(lambda req, pkg: _flip_one_byte(req), id="one-lock-byte"),
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
    requirements.write_text("boto3==1.44.8 \\\n    --hash=sha256:0123456789abcdef\n")
    before = layer_fingerprint(requirements, package)
    change(requirements, package)
    assert layer_fingerprint(requirements, package) != before


def test_fingerprint_covers_the_lock_the_layer_is_resolved_beside(
    requirements: Path, package: Path, tmp_path: Path
) -> None:
    beside = tmp_path / "beside.lock"
    beside.write_text("pydantic==2.14.4 \\\n    --hash=sha256:00\n")
    alone = layer_fingerprint(requirements, package)
    resolved = layer_fingerprint(requirements, package, beside=beside)
    assert resolved != alone
    beside.write_text("pydantic==2.14.5 \\\n    --hash=sha256:00\n")
    assert layer_fingerprint(requirements, package, beside=beside) != resolved


def test_fingerprint_covers_the_target_platform(
    requirements: Path, package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = layer_fingerprint(requirements, package)
    assert layer_fingerprint(requirements, package, lambda_.Architecture.X86_64) != before
    # The platform's own arguments are what tell them apart
    x86 = pip_platform_arguments(architecture=lambda_.Architecture.X86_64)
    monkeypatch.setattr("infra.layer.pip_platform_arguments", lambda *_: x86)
    assert layer_fingerprint(requirements, package) != before


def test_layer_targets_python_3_12_on_arm64(requirements: Path, tmp_path: Path) -> None:
    # Given an app that bundles no stack, so synthesis runs neither pip nor a compiler
    app = App(context={"aws:cdk:bundling-stacks": []}, outdir=str(tmp_path))
    stack = Stack(app, "LayerOnly")

    # When the layer is added
    InterlockLayer(stack, "Layer", requirements=requirements)

    # Then it declares the runtime and architecture the functions will use
    Template.from_stack(stack).has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {"CompatibleRuntimes": ["python3.12"], "CompatibleArchitectures": ["arm64"]},
    )
