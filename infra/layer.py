"""The Lambda layer that carries the `interlock` package and its locked dependencies.

The layer is bundled on the synthesizing machine (`infra.bundling`): pip installs the
lock's wheels for the functions' runtime and architecture, so synthesis needs no Docker,
and a Python of the runtime's version compiles their bytecode. It does need pip's
package index and that Python, except when bundling is skipped (as in the tests) or the
bundle for the same fingerprint is already in `cdk.out`.
"""

from __future__ import annotations

import hashlib
from fnmatch import fnmatch
from pathlib import Path
from typing import Final

from aws_cdk import AssetHashType, BundlingOptions, DockerImage
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .assets import LOCK, PACKAGE_DIR
from .bundling import (
    ARCHITECTURE,
    COMPILE_ARGUMENTS,
    RUNTIME,
    PipLocalBundling,
    pip_platform_arguments,
)

__all__ = [
    "ARCHITECTURE",
    "PACKAGE_DIR",
    "RUNTIME",
    "InterlockLayer",
    "PipLocalBundling",
    "layer_fingerprint",
]

# Bytecode caches in the source tree belong to the interpreter that wrote them: they stay
# out of the layer (which compiles its own) and out of its hash.
_IGNORED: Final = ("__pycache__", "*.pyc")


class InterlockLayer(Construct):
    """A layer version with `python/interlock` and the runtime requirements, compiled.

    Attributes:
        layer_version: The layer, to attach to each function.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        requirements: Path = LOCK,
        package_dir: Path = PACKAGE_DIR,
        description: str = "The interlock package and its locked runtime dependencies.",
        architecture: lambda_.Architecture = ARCHITECTURE,
    ) -> None:
        """Create the layer.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            requirements: A lock (`requirements.lock`, installed exactly) or a pip
                requirements file of pinned dependencies (resolved by pip). It is hashed
                as bytes, so files it includes with `-r` are not tracked.
            package_dir: The package copied into the layer as `python/<name>`.
            description: The layer version's description.
            architecture: The functions' architecture: it picks the wheels.
        """
        super().__init__(scope, construct_id)
        self.layer_version = lambda_.LayerVersion(
            self,
            "Layer",
            code=lambda_.Code.from_asset(
                str(package_dir),
                # A hash of exactly what goes in: fingerprinting a directory would either
                # miss the lock or walk .venv and node_modules.
                asset_hash_type=AssetHashType.CUSTOM,
                asset_hash=layer_fingerprint(requirements, package_dir, architecture),
                bundling=BundlingOptions(
                    # Never pulled: local bundling always succeeds or raises.
                    image=DockerImage.from_registry("local-bundling-only"),
                    # The stub's try_bundle takes keywords; jsii passes one struct.
                    local=PipLocalBundling(  # type: ignore[arg-type]
                        requirements, package_dir, architecture=architecture
                    ),
                ),
            ),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[architecture],
            description=description,
        )


def layer_fingerprint(
    requirements: Path, package_dir: Path, architecture: lambda_.Architecture = ARCHITECTURE
) -> str:
    """A SHA-256 over how the layer is built, the lock and the package sources.

    Args:
        requirements: The lock (or requirements file), hashed as bytes: a new transitive
            version or hash is a new layer.
        package_dir: The package; cached bytecode is left out, as in the bundle.
        architecture: The wheels' platform.

    Returns:
        The hex digest, stable across machines and checkouts.
    """
    build = (*pip_platform_arguments(RUNTIME, architecture), RUNTIME.name, *COMPILE_ARGUMENTS)
    parts = [
        ("build", " ".join(build).encode()),
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
