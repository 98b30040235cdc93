"""The Lambda layer that carries the `interlock` package and its pinned dependencies.

The layer is bundled on the synthesizing machine by pip, asking for wheels built for the
Lambda runtime rather than for the host, so synthesis needs no Docker. It does need
pip's package index, except when bundling is skipped (as in the tests) or the bundle for
the same fingerprint is already in `cdk.out`.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path
from typing import Final

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
PACKAGE_DIR: Final = REPO_ROOT / "shared" / "interlock"
REQUIREMENTS: Final = REPO_ROOT / "requirements.txt"

RUNTIME: Final = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE: Final = lambda_.Architecture.X86_64
# Wheels for the Lambda runtime, not for the machine running the synth: any manylinux
# x86_64 CPython wheel of the runtime's version, and never an sdist, which would build
# for the host instead.
PIP_PLATFORM_ARGUMENTS: Final = (
    "--platform", "manylinux2014_x86_64",
    "--platform", "manylinux_2_28_x86_64",
    "--implementation", "cp",
    "--python-version", RUNTIME.name.removeprefix("python"),
    "--only-binary=:all:",
)  # fmt: skip
# Bytecode caches belong to the interpreter that wrote them, never to the runtime: they
# stay out of the layer and out of its hash.
_IGNORED: Final = ("__pycache__", "*.pyc")


class InterlockLayer(Construct):
    """A layer version with `python/interlock` and the runtime requirements.

    Attributes:
        layer_version: The layer, to attach to each function.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        requirements: Path = REQUIREMENTS,
        package_dir: Path = PACKAGE_DIR,
        description: str = "The interlock package and its pinned runtime dependencies.",
    ) -> None:
        """Create the layer.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            requirements: A pip requirements file of pinned runtime dependencies. It is
                hashed as bytes, so files it includes with `-r` are not tracked.
            package_dir: The package copied into the layer as `python/<name>`.
            description: The layer version's description.
        """
        super().__init__(scope, construct_id)
        self.layer_version = lambda_.LayerVersion(
            self,
            "Layer",
            code=lambda_.Code.from_asset(
                str(package_dir),
                # A hash of exactly what goes in: fingerprinting a directory would either
                # miss requirements.txt or walk .venv and node_modules.
                asset_hash_type=AssetHashType.CUSTOM,
                asset_hash=layer_fingerprint(requirements, package_dir),
                bundling=BundlingOptions(
                    # Never pulled: local bundling always succeeds or raises.
                    image=DockerImage.from_registry("local-bundling-only"),
                    # The stub's try_bundle takes keywords; jsii passes one struct.
                    local=PipLocalBundling(requirements, package_dir),  # type: ignore[arg-type]
                ),
            ),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description=description,
        )


@jsii.implements(ILocalBundling)
class PipLocalBundling:
    """Builds the layer directory with the pip of the interpreter running the synth."""

    def __init__(self, requirements: Path, package_dir: Path) -> None:
        """Remember what to bundle.

        Args:
            requirements: The pip requirements file to install.
            package_dir: The package to copy next to the installed requirements.
        """
        self._requirements = requirements
        self._package_dir = package_dir

    # jsii calls back with the options struct as one positional argument, not with the
    # keyword arguments that the generated ILocalBundling stub shows.
    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        """Install the requirements and copy the package under `<output_dir>/python`.

        Args:
            output_dir: The empty directory CDK zips into the layer.
            options: The asset's bundling options; nothing here depends on them.

        Returns:
            True: bundling never falls back to Docker.

        Raises:
            subprocess.CalledProcessError: pip failed (the synth fails with it).
        """
        site_packages = Path(output_dir) / "python"
        subprocess.run(
            [
                sys.executable, "-m", "pip", "install",
                # --no-compile: the host's bytecode is for the host's Python version.
                "--quiet", "--disable-pip-version-check", "--no-compile",
                *PIP_PLATFORM_ARGUMENTS,
                "--target", str(site_packages),
                "-r", str(self._requirements),
            ],
            check=True,
        )  # fmt: skip
        # Console scripts name the synthesizing interpreter in their shebang and are not
        # on the runtime's PATH: dead weight in a layer.
        shutil.rmtree(site_packages / "bin", ignore_errors=True)
        shutil.copytree(
            self._package_dir,
            site_packages / self._package_dir.name,
            ignore=shutil.ignore_patterns(*_IGNORED),
        )
        return True


def layer_fingerprint(requirements: Path, package_dir: Path) -> str:
    """A SHA-256 over the pip target, the requirements and the package sources.

    Args:
        requirements: The requirements file, hashed as bytes.
        package_dir: The package; cached bytecode is left out, as in the bundle.

    Returns:
        The hex digest, stable across machines and checkouts.
    """
    parts = [
        ("pip", " ".join(PIP_PLATFORM_ARGUMENTS).encode()),
        ("requirements", requirements.read_bytes()),
        *_package_files(package_dir),
    ]
    digest = hashlib.sha256()
    for name, data in parts:
        # Name and length first, so moving bytes from one file to the next is a change.
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def _package_files(package_dir: Path) -> list[tuple[str, bytes]]:
    files = []
    for path in sorted(package_dir.rglob("*")):
        relative = path.relative_to(package_dir)
        ignored = any(fnmatch(part, pattern) for part in relative.parts for pattern in _IGNORED)
        if path.is_file() and not ignored:
            files.append((relative.as_posix(), path.read_bytes()))
    return files
