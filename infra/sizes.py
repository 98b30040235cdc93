"""Lambda's 250 MB limit on a function's unzipped code and layers, checked at synthesis.

Lambda refuses a function whose code and layers together unzip to more than 262,144,000
bytes, but only at deployment, after the upload. `UnzippedSizeCheck` measures the same
sum in `cdk.out` once the stack's assets are bundled, for every function of the stack:
its own code, each layer the app builds (Interlock's and the agent's), and
`EXTERNAL_LAYER_ALLOWANCE` for a layer published outside the app (the Lambda Web
Adapter's). It fails the synth naming the function and every part's size. A stack whose
bundling is skipped (`aws:cdk:bundling-stacks`) has no bundles to measure and is not
checked.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import jsii
from aws_cdk import AssetStaging, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3_assets as s3_assets
from constructs import IConstruct, IValidation

MB: Final = 1024 * 1024
"""Lambda's megabyte: its 250 MB limit is 262,144,000 bytes."""
UNZIPPED_LIMIT: Final = 250 * MB
"""A function's code and all its layers, unzipped."""
EXTERNAL_LAYER_ALLOWANCE: Final = 10 * MB
"""What a layer from outside the app counts for. The Web Adapter's is one extension
binary of about 5 MB (`extensions/lambda-adapter`); twice that leaves room for its
releases, as its size cannot be read at synthesis."""


def unzipped_size(path: Path) -> int:
    """The bytes `path` unpacks to: a directory's files (links not followed), a zip's
    members, or a single file's own size."""
    if path.is_dir():
        return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() or p.is_symlink())
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            return sum(info.file_size for info in archive.infolist())
    return path.stat().st_size


def size_problem(
    function: str, parts: Mapping[str, int], limit: int = UNZIPPED_LIMIT
) -> str | None:
    """The message for a function over the limit, or None when it fits.

    Args:
        function: The function, as the message names it (its construct path).
        parts: Each part's unzipped bytes: its code and each layer, by name.
        limit: Lambda's limit.
    """
    total = sum(parts.values())
    if total <= limit:
        return None
    listed = ", ".join(f"{name} {_mb(size)}" for name, size in parts.items())
    return (
        f"{function} unzips to {_mb(total)} with its layers, over Lambda's "
        f"{_mb(limit)} ({limit:,} bytes): {listed}"
    )


@jsii.implements(IValidation)
class UnzippedSizeCheck:
    """Fails the synth for each function of a stack over `UNZIPPED_LIMIT` unzipped."""

    def __init__(self, stack: Stack, limit: int = UNZIPPED_LIMIT) -> None:
        """Check every function of `stack` when it is synthesized with its bundles."""
        self._stack = stack
        self._limit = limit

    def validate(self) -> list[str]:
        """One message per function over the limit; none when bundling was skipped."""
        if not self._stack.bundling_required:
            return []
        layers = _built_layers(self._stack)
        problems = []
        for construct in self._stack.node.find_all():
            if isinstance(construct, lambda_.Function):
                parts = function_parts(self._stack, construct, layers)
                if problem := size_problem(construct.node.path, parts, self._limit):
                    problems.append(problem)
        return problems


def function_parts(
    stack: Stack, function: lambda_.Function, layers: Mapping[str, tuple[str, int]]
) -> dict[str, int]:
    """A function's unzipped parts: its code, then its layers in order.

    Args:
        stack: The function's stack, to resolve its layers' references.
        function: The function.
        layers: The layers the stack builds, by logical id: name and unzipped size.
    """
    parts = {"code": _staged_size(function) or 0}
    resource = function.node.default_child
    listed = stack.resolve(resource.layers) if isinstance(resource, lambda_.CfnFunction) else None
    for index, layer in enumerate(listed or []):
        reference = layer.get("Ref") if isinstance(layer, dict) else None
        if isinstance(reference, str) and reference in layers:
            name, size = layers[reference]
            parts[name] = size
        else:
            parts[f"outside layer {index + 1} (allowance)"] = EXTERNAL_LAYER_ALLOWANCE
    return parts


def _built_layers(stack: Stack) -> dict[str, tuple[str, int]]:
    built = {}
    for construct in stack.node.find_all():
        if isinstance(construct, lambda_.LayerVersion):
            size = _staged_size(construct)
            resource = construct.node.default_child
            if size is not None and isinstance(resource, lambda_.CfnLayerVersion):
                name = construct.node.path.removeprefix(f"{stack.node.path}/")
                built[stack.get_logical_id(resource)] = (name, size)
    return built


def _staged_size(owner: IConstruct) -> int | None:
    """The unzipped size of the asset `owner` was given as `Code.from_asset`, if any."""
    asset = owner.node.try_find_child("Code")
    if not isinstance(asset, s3_assets.Asset):
        return None
    staging = asset.node.try_find_child("Stage")
    if not isinstance(staging, AssetStaging):
        return None
    return unzipped_size(Path(staging.absolute_staged_path))


def _mb(size: int) -> str:
    return f"{size / MB:.1f} MB"
