"""Cold start: what each function's handler costs to import, next to strands and boto3.

- Median import time over fresh interpreters of `import strands`, `import boto3` and
  each handler: run and resume are the streaming app as the Web Adapter starts it
  (`interlock.api.serve`: uvicorn, the app, and the service modules its first request
  imports); requests is `functions/requests/handler.py`. Rounds are interleaved, after
  one warm-up round that writes the bytecode cache (the layer ships bytecode), with the environment
  Lambda gives a function (`LAMBDA_TASK_ROOT` set: the X-Ray SDK then builds no
  sampling client). Wall and CPU time are both reported; the ratios use CPU time, the
  import's own work, which other processes on a shared machine do not inflate.
- Targets: run and resume within 1.2 times `import strands`, requests within 2 times
  `import boto3`.
- `--layer`: the `interlock` layer bundled exactly as `cdk synth` bundles it (needs the
  package index and a Python of the runtime's version): its size, and whether every
  module has bytecode of the runtime's magic number; then the same lock bundled for this
  machine's architecture, and every function's entry point imported from it alone by
  the runtime's Python, naming the distributions no function imports.

Prints JSON.

    .venv/bin/python bench/cold_start.py [--runs 5] [--layer]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

PROBE: Final = """
import importlib.util, json, os, sys, time
wall, cpu = time.perf_counter(), time.process_time()
target = sys.argv[1]
if target.endswith(".py"):
    spec = importlib.util.spec_from_file_location("handler", target)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
elif target in ("run", "resume"):  # as functions/stream/run.sh starts them
    os.environ["INTERLOCK_FUNCTION"] = target
    from interlock.api import serve  # uvicorn and the app's modules
    serve.ready()  # the app, and what its first request imports
else:
    __import__(target)
print(json.dumps({"ms": (time.perf_counter() - wall) * 1000,
                  "cpu_ms": (time.process_time() - cpu) * 1000,
                  "modules": len(sys.modules)}))
"""
TARGETS: Final = {
    "strands": "strands",
    "boto3": "boto3",
    "run": "run",
    "resume": "resume",
    "requests": str(ROOT / "functions" / "requests" / "handler.py"),
}
RUN_TO_STRANDS: Final = 1.2
REQUESTS_TO_BOTO3: Final = 2.0
# What Lambda sets, and what the handlers read at import.
LAMBDA_ENVIRONMENT: Final = {
    "LAMBDA_TASK_ROOT": "/var/task",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_SERVICE_NAME": "interlock",
    "POWERTOOLS_METRICS_NAMESPACE": "Interlock",
}


def measure(runs: int = 5) -> dict[str, Any]:
    """Median import times, the modules each import loads, the ratios and whether each
    target is met."""
    with tempfile.TemporaryDirectory() as cache:
        env = _environment(cache)
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in TARGETS}
        for round_ in range(runs + 1):
            for name, target in TARGETS.items():
                sample = _probe(sys.executable, target, env)
                if round_:  # the first round writes the bytecode cache
                    samples[name].append(sample)
    figures = {
        name: {
            "median_ms": round(statistics.median(s["ms"] for s in taken), 1),
            "median_cpu_ms": round(statistics.median(s["cpu_ms"] for s in taken), 1),
            # Counted, not timed: the same in every run, whatever the machine is doing.
            "modules": max(int(s["modules"]) for s in taken),
        }
        for name, taken in samples.items()
    }
    return {"runs": runs, "import": figures, **_judged(figures)}


def _judged(figures: dict[str, dict[str, float]]) -> dict[str, Any]:
    def ratio(name: str, base: str) -> float:
        return round(figures[name]["median_cpu_ms"] / figures[base]["median_cpu_ms"], 2)

    ratios = {
        "run_to_strands": ratio("run", "strands"),
        "resume_to_strands": ratio("resume", "strands"),
        "requests_to_boto3": ratio("requests", "boto3"),
    }
    return {
        "ratios": ratios,
        "targets": {
            "run_within_1_2x_strands": ratios["run_to_strands"] <= RUN_TO_STRANDS,
            "resume_within_1_2x_strands": ratios["resume_to_strands"] <= RUN_TO_STRANDS,
            "requests_within_2x_boto3": ratios["requests_to_boto3"] <= REQUESTS_TO_BOTO3,
        },
    }


def _environment(cache: str) -> dict[str, str]:
    env = {**os.environ, **LAMBDA_ENVIRONMENT, "PYTHONPATH": str(ROOT / "shared")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # One cache for every interpreter of the run, outside the checkout.
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def _probe(python: str, target: str, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run(
        [python, "-c", PROBE, target],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    sample: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return sample


def layer() -> dict[str, Any]:
    """The layer as `cdk synth` bundles it, then imported by every function from alone."""
    from infra.bundling import PipLocalBundling, runtime_python, runtime_version
    from infra.layer import PACKAGE_DIR
    from infra.lock import LOCK

    python = runtime_python(runtime_version())
    with tempfile.TemporaryDirectory() as out:
        PipLocalBundling(LOCK, PACKAGE_DIR).try_bundle(out, None)  # type: ignore[arg-type]
        shipped = _shipped(Path(out) / "python", python)
    with tempfile.TemporaryDirectory() as out:
        PipLocalBundling(LOCK, PACKAGE_DIR, architecture=_host_architecture()).try_bundle(
            out,
            None,  # type: ignore[arg-type]
        )
        imports = _imports(Path(out) / "python", python)
    return {"runtime_python": python, **shipped, "imports": imports}


def _shipped(site: Path, python: str) -> dict[str, Any]:
    files = sorted(p for p in site.rglob("*") if p.is_file())
    magic = subprocess.run(
        [python, "-c", "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    compiled = [p for p in files if p.suffix == ".pyc"]
    sources = [p for p in files if p.suffix == ".py"]
    tree = hashlib.sha256()
    for path in files:
        tree.update(path.relative_to(site).as_posix().encode() + b"\0" + path.read_bytes())
    return {
        "unzipped_mb": round(sum(p.stat().st_size for p in files) / 1_000_000, 1),
        "distributions": len(list(site.glob("*.dist-info"))),
        "modules": len(sources),
        "modules_without_bytecode": sum(1 for p in sources if not _cached(p).is_file()),
        "every_pyc_has_the_runtimes_magic": all(
            p.read_bytes()[:4].hex() == magic for p in compiled
        ),
        # Two bundles of the same inputs give the same digest.
        "tree_sha256": tree.hexdigest(),
    }


def _cached(source: Path) -> Path:
    # The runtime's tag (cpython-312): compiled by the runtime's Python.
    found = list((source.parent / "__pycache__").glob(f"{source.stem}.cpython-*.pyc"))
    return found[0] if found else source.with_suffix(".missing")


def _host_architecture() -> Any:
    from aws_cdk import aws_lambda as lambda_

    arm = platform.machine() in ("aarch64", "arm64")
    return lambda_.Architecture.ARM_64 if arm else lambda_.Architecture.X86_64


IMPORT_CHECK: Final = """
import json, os, sys
from pathlib import Path
site, entry = sys.argv[1], sys.argv[2]
if entry.endswith(".py"):
    import importlib.util
    spec = importlib.util.spec_from_file_location("handler", entry)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
else:  # the app as run.sh starts it, then the first request's modules
    os.environ["INTERLOCK_FUNCTION"] = entry
    from interlock.api import serve
    serve.ready()
    import interlock.respond, interlock.api.agui
    import interlock.api.models
    from interlock.api import wiring
    wiring.runtime()  # the agent, built at start
owner = {}
for record in Path(site).glob("*.dist-info/RECORD"):
    for line in record.read_text().splitlines():
        owner[line.split(",")[0]] = record.parent.name.rsplit("-", 1)[0]
used = set()
for module in list(sys.modules.values()):
    path = getattr(module, "__file__", None) or ""
    if path.startswith(site):
        relative = os.path.relpath(path, site)
        used.add(owner.get(relative, relative.split("/")[0]))
print(json.dumps(sorted(used)))
"""


def _imports(site: Path, python: str) -> dict[str, Any]:
    entries = {
        "run": "run",
        "resume": "resume",
        **{d.name: str(d / "handler.py") for d in sorted((ROOT / "functions").glob("*/"))},
    }
    entries.pop("stream", None)
    env = {
        "PATH": os.environ.get("PATH", ""),
        **LAMBDA_ENVIRONMENT,
        "INTERLOCK_TABLE": "t",
        "INTERLOCK_BUCKET": "b",
        "INTERLOCK_MODEL": "scripted",
        # The agent's layer: the example agents, beside the interlock layer.
        "PYTHONPATH": "",
    }
    failed, used = {}, set()
    for name, entry in entries.items():
        if not Path(entry).is_file() and entry.endswith(".py"):
            continue
        # Isolated, and without the interpreter's own site-packages: the layer alone.
        code = f"import sys; sys.path[:0] = [{str(site)!r}, {str(ROOT)!r}]\n" + IMPORT_CHECK
        done = subprocess.run(
            [python, "-I", "-S", "-c", code, str(site), entry],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode:
            failed[name] = done.stderr.strip().splitlines()[-1:]
        else:
            used |= set(json.loads(done.stdout.splitlines()[-1]))
    shipped = {p.name.rsplit("-", 1)[0] for p in site.glob("*.dist-info")}
    return {
        "functions": sorted(entries),
        "failed": failed,
        "imported_by_no_function": sorted(shipped - used - {"interlock"}),
    }


def main() -> None:
    """Print the figures as JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--layer", action="store_true", help="bundle and check the layer")
    args = parser.parse_args()
    figures = measure(args.runs)
    if args.layer:
        figures["layer"] = layer()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
