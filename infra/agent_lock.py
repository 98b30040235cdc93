"""The agent's layer, resolved together with Interlock's: its lock is made at synthesis.

Lambda unpacks every layer of a function into the same `/opt/python`, the later one over
the earlier. The agent's layer is attached after Interlock's, so anything it installed
that Interlock's lock also pins would replace Interlock's version on the functions that
run the agent. The agent's requirements are therefore compiled with uv against
Interlock's lock as constraints, for the functions' platform and Python, with hashes;
what Interlock's layer already ships is left out of the result, and the rest is
installed from it exactly (`--require-hashes --no-deps`). A requirement that contradicts
one of Interlock's pins fails the synth with one line naming the package and both
versions.

Only the lock is made here; `infra.bundling` installs it. Resolving needs uv (beside the
running interpreter or on PATH) and the package index, as bundling does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from aws_cdk import aws_lambda as lambda_

from .assets import LOCK
from .bundling import (
    ARCHITECTURE,
    RUNTIME,
    LayerBuildError,
    ToolFailed,
    requirement_names,
    run_tool,
    runtime_version,
)
from .lock import UV_PLATFORMS, find_uv

AGENT_LOCK_NAME: Final = "agent-requirements.lock"
"""The file, in the bundle's scratch directory, that the agent's layer is installed from."""
# uv's explanation of an unsatisfiable resolution, in its plain (not a terminal) or its
# drawn form: the part worth one line.
_UV_DECORATION: Final = re.compile(r"^(error:|cause:|hint:|[\u00d7\u2570\u2500\u25b6\u2502 ]+)\s*")


class RequirementConflict(LayerBuildError):
    """The agent's requirements contradict a version Interlock's layer pins."""


def shipped_pins(lock: Path = LOCK) -> dict[str, str]:
    """What Interlock's layer installs: version by normalized name, from its lock."""
    return requirement_names(lock.read_text().replace("\\\n", " ").splitlines())


def check_pins(requirements: Path, beside: Path = LOCK) -> None:
    """Refuse an exact pin of the agent's that Interlock's lock pins at another version.

    Needs no index, so it also runs when bundling is skipped. Requirements with a marker,
    a range, or in an included file are left to the resolver (`lock_beside`).

    Raises:
        RequirementConflict: One line naming the package and both versions.
    """
    shipped = shipped_pins(beside)
    lines = [line for line in requirements.read_text().splitlines() if ";" not in line]
    for name, version in requirement_names(lines).items():
        if name in shipped and shipped[name] != version:
            raise RequirementConflict(
                f"{requirements.name} pins {name}=={version}, but Interlock's layer ships "
                f"{name}=={shipped[name]} ({beside.name}): the agent's layer may not replace "
                f"it; pin {name}=={shipped[name]} or drop the pin"
            )


def compile_command(
    uv: str,
    requirements: Path,
    output: Path,
    *,
    beside: Path = LOCK,
    architecture: lambda_.Architecture = ARCHITECTURE,
) -> list[str]:
    """The `uv pip compile` of the agent's requirements with Interlock's lock as
    constraints, leaving out every package that lock pins."""
    left_out = [arg for name in sorted(shipped_pins(beside)) for arg in ("--no-emit-package", name)]
    return [
        uv, "pip", "compile", str(requirements),
        "--constraint", str(beside),
        "--python-platform", UV_PLATFORMS[architecture.name],
        "--python-version", runtime_version(RUNTIME),
        # Wheels only, as the layer installs them: an sdist would build for the host.
        "--only-binary", ":all:",
        "--no-python-downloads",
        "--generate-hashes",
        "--no-header",
        "--quiet",
        *left_out,
        "--output-file", str(output),
    ]  # fmt: skip


def lock_beside(
    requirements: Path,
    scratch: Path,
    *,
    beside: Path = LOCK,
    architecture: lambda_.Architecture = ARCHITECTURE,
    uv: str | None = None,
) -> Path:
    """Lock the agent's requirements beside Interlock's layer (an `infra.bundling.Resolver`).

    Args:
        requirements: The agent's pip requirements file.
        scratch: A directory for the lock; it lives only as long as the bundling.
        beside: Interlock's lock: its pins constrain the agent's, and its packages are
            left out of the result.
        architecture: The functions' architecture: it picks the wheels.
        uv: The uv executable (found with `infra.lock.find_uv` by default).

    Returns:
        The lock: every remaining distribution pinned and hashed (possibly none).

    Raises:
        RequirementConflict: An agent requirement contradicts one of Interlock's pins, or
            uv cannot satisfy both (its explanation, in one line).
        LayerBuildError: uv is missing, or failed for another reason.
    """
    check_pins(requirements, beside)
    uv = uv or find_uv()
    if uv is None:
        raise LayerBuildError(
            "uv is needed to resolve the agent's requirements with Interlock's pins: "
            "install it beside the CDK app's Python (pip install uv)"
        )
    output = scratch / AGENT_LOCK_NAME
    command = compile_command(uv, requirements, output, beside=beside, architecture=architecture)
    try:
        run_tool(command, "uv pip compile", cwd=requirements.parent)
    except ToolFailed as error:
        if "No solution found" in error.stderr:
            raise RequirementConflict(
                f"{requirements.name} cannot be resolved with Interlock's pins "
                f"({beside.name}): {uv_explanation(error.stderr)}"
            ) from None
        raise
    return output


def uv_explanation(message: str) -> str:
    """uv's reason a resolution failed, on one line: `Because you require pydantic<2 and
    pydantic==2.14.4, ...`, without its decorations."""
    lines = (line for line in message.splitlines() if not line.startswith("warning:"))
    parts = (_UV_DECORATION.sub("", line).strip() for line in lines)
    text = " ".join(part for part in parts if part)
    start = text.find("Because")
    return re.sub(r"\s+", " ", text[start:] if start >= 0 else text)
