"""Clients and fresh storage on an emulator, for benchmarks and local tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3

from interlock.adapters.factory import Stores, build_stores
from interlock.adapters.schema import create_storage


@dataclass(frozen=True)
class LocalStorage:
    """A table and bucket on an emulator, their clients, and stores built on them."""

    dynamodb: Any
    s3: Any
    stores: Stores


def local_storage(endpoint: str, table: str, bucket: str) -> LocalStorage:
    """Create `table` and `bucket` at `endpoint` and build the stores on them."""
    session = boto3.session.Session(
        region_name="us-east-1", aws_access_key_id="local", aws_secret_access_key="local"
    )
    dynamodb = session.client("dynamodb", endpoint_url=endpoint)
    s3 = session.client("s3", endpoint_url=endpoint)
    create_storage(dynamodb, s3, table, bucket)
    return LocalStorage(dynamodb, s3, build_stores(dynamodb, s3, table, bucket))
