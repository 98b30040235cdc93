"""Building a layer directory on the synthesizing machine, for the Lambda runtime.

pip installs wheels built for the functions' platform rather than the host's, so no
Docker is needed; a Python of the runtime's own version then compiles the bytecode, so
no cold start compiles a module from source. The bytecode is reproducible: hash-based
and unchecked (valid whatever the file times in the zip), with the runtime's paths in
its tracebacks and a fixed hash seed (set literals are marshalled in hash order).

Every pip, uv and compiler run goes through `run_tool`: a failure, or an `ERROR:` pip
prints while still exiting 0 (its conflict report), fails the bundle and so the synth,
with the tool's own message.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import jsii
from aws_cdk import BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

RUNTIME: Final = lambda_.Runtime.PYTHON_3_12
# Graviton: the same cold start at a lower price per GB-second; every wheel the layer
# ships exists for manylinux aarch64, and the Web Adapter publishes an arm64 layer.
ARCHITECTURE: Final = lambda_.Architecture.ARM_64


def lambda_architecture(name: str) -> lambda_.Architecture:
    """The Lambda architecture called `name` (`arm64` or `x86_64`)."""
    return lambda_.Architecture.X86_64 if name == "x86_64" else lambda_.Architecture.ARM_64


PLATFORM_TAGS: Final = {
    lambda_.Architecture.ARM_64.name: ("manylinux2014_aarch64", "manylinux_2_28_aarch64"),
    lambda_.Architecture.X86_64.name: ("manylinux2014_x86_64", "manylinux_2_28_x86_64"),
}
# Where Lambda unpacks a layer's `python/`: the path tracebacks name.
RUNTIME_SITE: Final = "/opt/python"
PYTHON_VARIABLE: Final = "INTERLOCK_LAYER_PYTHON"
"""Names the interpreter that compiles the layer's bytecode, when it is not found alone."""
COMPILE_ARGUMENTS: Final = (
    "-m", "compileall", "-q", "-j", "0",
    "--invalidation-mode", "unchecked-hash",
    "-d", RUNTIME_SITE,
)  # fmt: skip
# Console scripts name the synthesizing interpreter in their shebang and are not on the
# runtime's PATH: dead weight in a layer.
_DEAD_WEIGHT: Final = ("bin",)


# pip's notices about its own configuration (a find-links location that is absent) and
# uv's warnings: not the failure, and left out of its message.
_NOISE: Final = re.compile(r"^(WARNING: Location '.*' is ignored|warning: )")

Resolver = Callable[[Path, Path], Path]
"""Turns a requirements file into a lock written in a scratch directory, before install:
`(requirements, scratch) -> lock` (`infra.agent_lock.lock_beside`)."""


class LayerBuildError(RuntimeError):
    """The layer cannot be built as the runtime needs it: no interpreter of its version,
    or pip, uv or the compiler failed (the message is the tool's own)."""


class ToolFailed(LayerBuildError):
    """A build step failed; `stderr` holds all it wrote there."""

    def __init__(self, message: str, stderr: str) -> None:
        """Keep the tool's whole error output beside the one-line message."""
        super().__init__(message)
        self.stderr = stderr


def run_tool(
    command: Sequence[str],
    what: str,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run one build step quietly; its output is shown only when it fails.

    Args:
        command: The command line.
        what: The step, as the failure's message names it (`pip install ...`).
        cwd: Where to run it.
        env: Its environment (this process's by default).

    Returns:
        What it wrote to stdout.

    Raises:
        ToolFailed: It exited non-zero, or wrote an `ERROR:` line (pip reports
            dependency conflicts so and still exits 0).
        LayerBuildError: It could not be started.
    """
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, cwd=cwd, env=env, check=False
        )
    except OSError as error:
        raise LayerBuildError(f"{what} could not start: {error}") from error
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    if done.returncode != 0 or errors:
        message = f"{what} failed: {tool_message(done.stderr, done.stdout)}"
        raise ToolFailed(message, done.stderr)
    return done.stdout


def tool_message(stderr: str, stdout: str = "") -> str:
    """A tool's failure as one line: its `ERROR:` lines when it wrote any, otherwise the
    last lines of what it wrote (pip's and uv's explanation end their output)."""
    lines = [line.strip() for line in (stderr or stdout).splitlines()]
    lines = [line for line in lines if line and not _NOISE.match(line)]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return " ".join(errors or lines[-6:]) or "(no output)"


def runtime_version(runtime: lambda_.Runtime = RUNTIME) -> str:
    """`3.12` for `python3.12`."""
    return runtime.name.removeprefix("python")


def pip_platform_arguments(
    runtime: lambda_.Runtime = RUNTIME, architecture: lambda_.Architecture = ARCHITECTURE
) -> tuple[str, ...]:
    """pip's arguments for wheels of the runtime's CPython on the functions' platform,
    never an sdist (it would build for the host)."""
    platforms = [arg for tag in PLATFORM_TAGS[architecture.name] for arg in ("--platform", tag)]
    return (
        *platforms,
        "--implementation", "cp",
        "--python-version", runtime_version(runtime),
        "--only-binary=:all:",
    )  # fmt: skip


def is_lock(requirements: Path) -> bool:
    """A requirements file with hashes is a complete lock: installed as it is, with no
    resolution (pip checks every hash once any requirement carries one)."""
    return "--hash=" in requirements.read_text()


def runtime_python(version: str, environ: Mapping[str, str] = os.environ) -> str:
    """An interpreter of the runtime's version, to compile the layer's bytecode.

    Looked for in order: `INTERLOCK_LAYER_PYTHON`, `python<version>` on PATH, pyenv's
    versions, then the interpreter running this.

    Raises:
        LayerBuildError: The named interpreter is another version, or none is found:
            a layer with the wrong bytecode or none would compile at every cold start.
    """
    if named := environ.get(PYTHON_VARIABLE):
        found = _version_of(named)
        if found != version:
            raise LayerBuildError(
                f"{PYTHON_VARIABLE}={named} is Python {found or '(not runnable)'}; the "
                f"functions run Python {version}, and the layer's bytecode must match it"
            )
        return named
    on_path = shutil.which(f"python{version}", path=environ.get("PATH"))
    for candidate in (on_path, *_pyenv_pythons(version, environ), sys.executable):
        if candidate and _version_of(candidate) == version:
            return candidate
    raise LayerBuildError(
        f"No Python {version} to compile the layer's bytecode for the functions' runtime: "
        f"install python{version} (on PATH) or name one in {PYTHON_VARIABLE}"
    )


def _pyenv_pythons(version: str, environ: Mapping[str, str]) -> list[str]:
    root = Path(environ.get("PYENV_ROOT") or Path(environ.get("HOME", "~")).expanduser() / ".pyenv")
    found = root.glob(f"versions/{version}.*/bin/python{version}")
    # The newest patch release first: 3.12.10 before 3.12.9.
    return [str(p) for p in sorted(found, key=_patch_number, reverse=True)]


def _patch_number(path: Path) -> int:
    match = re.search(r"\.(\d+)$", path.parent.parent.name)
    return int(match.group(1)) if match else -1


def _version_of(python: str) -> str | None:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@jsii.implements(ILocalBundling)
class PipLocalBundling:
    """Builds the layer directory: pip's wheels, the package, then the bytecode."""

    def __init__(
        self,
        requirements: Path,
        package_dir: Path,
        *,
        runtime: lambda_.Runtime = RUNTIME,
        architecture: lambda_.Architecture = ARCHITECTURE,
        resolve: Resolver | None = None,
    ) -> None:
        """Remember what to bundle, and for which runtime and platform.

        Args:
            requirements: A lock (every requirement hashed: installed exactly) or a file
                of pinned requirements (resolved by pip, or by `resolve` when given).
            package_dir: The package to copy next to the installed requirements.
            runtime: The functions' runtime: its version picks the wheels and compiles.
            architecture: The functions' architecture: it picks the wheels.
            resolve: Locks the requirements first (the agent's, against Interlock's
                lock); its lock is then installed exactly.
        """
        self._requirements = requirements
        self._package_dir = package_dir
        self._runtime = runtime
        self._architecture = architecture
        self._resolve = resolve

    # jsii calls back with the options struct as one positional argument, not with the
    # keyword arguments that the generated ILocalBundling stub shows.
    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        """Install the requirements and the package under `<output_dir>/python`, compiled.

        Args:
            output_dir: The empty directory CDK zips into the layer.
            options: The asset's bundling options; nothing here depends on them.

        Returns:
            True: bundling never falls back to Docker.

        Raises:
            LayerBuildError: No interpreter of the runtime's version (checked first), or
                the resolver, pip or the compiler failed (so does the synth).
        """
        python = runtime_python(runtime_version(self._runtime))
        site_packages = Path(output_dir) / "python"
        with tempfile.TemporaryDirectory(prefix="interlock-layer-") as scratch:
            requirements = self._requirements
            if self._resolve is not None and _has_requirements(requirements):
                requirements = self._resolve(requirements, Path(scratch))
            if _has_requirements(requirements):
                run_tool(
                    self.pip_command(site_packages, requirements),
                    f"pip install -r {requirements.name}",
                )
        for name in _DEAD_WEIGHT:
            shutil.rmtree(site_packages / name, ignore_errors=True)
        shutil.copytree(
            self._package_dir,
            site_packages / self._package_dir.name,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        compile_tree(python, site_packages)
        return True

    def pip_command(self, target: Path, requirements: Path | None = None) -> list[str]:
        """The pip install of the requirements (or the lock resolved from them) into
        `target`, for the runtime's platform."""
        requirements = requirements or self._requirements
        exact = ("--require-hashes", "--no-deps") if is_lock(requirements) else ()
        return [
            sys.executable, "-m", "pip", "install",
            # The bytecode is compiled after, by the runtime's version of Python.
            "--quiet", "--disable-pip-version-check", "--no-compile",
            *exact,
            *pip_platform_arguments(self._runtime, self._architecture),
            "--target", str(target),
            "-r", str(requirements),
        ]  # fmt: skip


def compile_tree(python: str, site_packages: Path) -> None:
    """Compile every module under `site_packages` with `python`, reproducibly."""
    environ = {**os.environ, "PYTHONHASHSEED": "0"}
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    run_tool([python, *COMPILE_ARGUMENTS, str(site_packages)], "compileall", env=environ)


def _has_requirements(path: Path) -> bool:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return any(lines)


def requirement_names(lines: Sequence[str]) -> dict[str, str]:
    """`name==version` pins by normalized name (PEP 503), from requirements lines."""
    pins = {}
    for line in lines:
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line.strip()):
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins
