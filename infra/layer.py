"""The Lambda layer that carries the `interlock` package and its locked dependencies.

The layer is bundled on the synthesizing machine (`infra.bundling`): pip installs the
lock's wheels for the functions' runtime and architecture, so synthesis needs no Docker,
and a Python of the runtime's version compiles their bytecode. It does need pip's
package index and that Python, except when bundling is skipped (as in the tests) or the
bundle for the same fingerprint is already in `cdk.out`.

The agent's layer is built by the same class `beside` Interlock's lock: its requirements
are resolved with Interlock's pins and never replace them (`infra.agent_lock`). Every
stack with a layer also checks, once bundled, that each of its functions fits Lambda's
250 MB unzipped (`infra.sizes`).
"""

from __future__ import annotations

import hashlib
from fnmatch import fnmatch
from functools import partial
from pathlib import Path
from typing import Final

from aws_cdk import AssetHashType, BundlingOptions, DockerImage, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .agent_lock import check_pins, lock_beside
from .assets import LOCK, PACKAGE_DIR
from .bundling import (
    ARCHITECTURE,
    COMPILE_ARGUMENTS,
    RUNTIME,
    PipLocalBundling,
    pip_platform_arguments,
)
from .sizes import UnzippedSizeCheck

__all__ = [
    "ARCHITECTURE",
    "LOCK",
    "PACKAGE_DIR",
    "RUNTIME",
    "InterlockLayer",
    "PipLocalBundling",
    "layer_fingerprint",
]

# Bytecode caches in the source tree belong to the interpreter that wrote them: they stay
# out of the layer (which compiles its own) and out of its hash.
_IGNORED: Final = ("__pycache__", "*.pyc")
# The stack's one size check, whichever layer registers it first.
_SIZE_CHECK_ID: Final = "UnzippedSizeCheck"


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
        beside: Path | None = None,
    ) -> None:
        """Create the layer.

        Args:
            scope: The parent construct.
            construct_id: The construct id.
            requirements: A lock (`requirements.lock`, installed exactly) or a pip
                requirements file of pinned dependencies (resolved by pip, or by uv when
                `beside` is given). It is hashed as bytes, so files it includes with `-r`
                are not tracked.
            package_dir: The package copied into the layer as `python/<name>`.
            description: The layer version's description.
            architecture: The functions' architecture: it picks the wheels.
            beside: The lock of the layer this one is attached after (Interlock's, for
                the agent's layer): the requirements are resolved with its pins as
                constraints, and what it ships is left out (`infra.agent_lock`).

        Raises:
            infra.agent_lock.RequirementConflict: The requirements pin a package of
                `beside` at another version (checked here, with no index).
        """
        super().__init__(scope, construct_id)
        if beside is not None:
            check_pins(requirements, beside)
        resolve = partial(lock_beside, beside=beside, architecture=architecture) if beside else None
        self.layer_version = lambda_.LayerVersion(
            self,
            "Layer",
            code=lambda_.Code.from_asset(
                str(package_dir),
                # A hash of exactly what goes in: fingerprinting a directory would either
                # miss the lock or walk .venv and node_modules.
                asset_hash_type=AssetHashType.CUSTOM,
                asset_hash=layer_fingerprint(requirements, package_dir, architecture, beside),
                bundling=BundlingOptions(
                    # Never pulled: local bundling always succeeds or raises.
                    image=DockerImage.from_registry("local-bundling-only"),
                    # The stub's try_bundle takes keywords; jsii passes one struct.
                    local=PipLocalBundling(  # type: ignore[arg-type]
                        requirements, package_dir, architecture=architecture, resolve=resolve
                    ),
                ),
            ),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[architecture],
            description=description,
        )
        _check_sizes(Stack.of(self))


def _check_sizes(stack: Stack) -> None:
    # A child of the stack, so two layers in it add one check, not one each.
    if stack.node.try_find_child(_SIZE_CHECK_ID) is None:
        Construct(stack, _SIZE_CHECK_ID).node.add_validation(UnzippedSizeCheck(stack))


def layer_fingerprint(
    requirements: Path,
    package_dir: Path,
    architecture: lambda_.Architecture = ARCHITECTURE,
    beside: Path | None = None,
) -> str:
    """A SHA-256 over how the layer is built, the lock and the package sources.

    Args:
        requirements: The lock (or requirements file), hashed as bytes: a new transitive
            version or hash is a new layer.
        package_dir: The package; cached bytecode is left out, as in the bundle.
        architecture: The wheels' platform.
        beside: The lock the requirements are resolved against: a new pin there is a
            new layer here too.

    Returns:
        The hex digest, stable across machines and checkouts.
    """
    build = (*pip_platform_arguments(RUNTIME, architecture), RUNTIME.name, *COMPILE_ARGUMENTS)
    parts = [
        ("build", " ".join(build).encode()),
        ("requirements", requirements.read_bytes()),
        # Absent for Interlock's own layer, whose hash stays what it was.
        *([("beside", beside.read_bytes())] if beside is not None else []),
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
