"""The layer's lock: `requirements-layer.txt` resolved for the functions' platform, with hashes.

`requirements-layer.txt` holds the pins a person edits; `requirements.lock` is generated from
it and is what the layer installs (`--require-hashes --no-deps`) and what its asset hash
covers. Regenerate it after changing a pin:

    .venv/bin/python -m infra.lock
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

from aws_cdk import aws_lambda as lambda_

from .assets import LOCK, REQUIREMENTS, ROOT
from .bundling import ARCHITECTURE, RUNTIME, runtime_version

UV_PLATFORMS: Final = {
    lambda_.Architecture.ARM_64.name: "aarch64-manylinux2014",
    lambda_.Architecture.X86_64.name: "x86_64-manylinux2014",
}
# Dependencies of the pins that no function imports (each function's entry point and
# first request, imported from the bundled layer: `bench/cold_start.py --layer`), left
# out of the lock and so of the layer. An agent that uses the Strands features needing
# them lists them in its own requirements (its layer).
NOT_SHIPPED: Final = {
    "mcp": "Strands imports it only for MCP tool providers (strands.tools.mcp)",
    "mcp-types": "only mcp imports it",
    "sse-starlette": "only mcp imports it",
    "httpx2": "mcp's client, and Starlette's test client",
    "httpcore2": "only httpx2 needs it",
    "truststore": "only httpcore2 needs it",
}


def compile_command(uv: str, architecture: lambda_.Architecture = ARCHITECTURE) -> list[str]:
    """The `uv pip compile` command that writes the lock (uv records it in the header)."""
    left_out = [arg for name in sorted(NOT_SHIPPED) for arg in ("--no-emit-package", name)]
    return [
        uv, "pip", "compile", REQUIREMENTS.name,
        "--python-platform", UV_PLATFORMS[architecture.name],
        "--python-version", runtime_version(RUNTIME),
        # Wheels only, as the layer installs them: an sdist would build for the host.
        "--only-binary", ":all:",
        "--no-python-downloads",
        "--generate-hashes",
        *left_out,
        "--output-file", LOCK.name,
    ]  # fmt: skip


def find_uv() -> str | None:
    """uv beside the running interpreter (the virtualenv's), else on PATH."""
    return shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


def main() -> None:
    """Write `requirements.lock` from `requirements-layer.txt` with uv (needs the index)."""
    uv = find_uv()
    if uv is None:
        sys.exit("infra.lock: uv is missing; ./dev setup installs it")
    subprocess.run(compile_command(uv), check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
