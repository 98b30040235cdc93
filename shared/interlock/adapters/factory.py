"""The one place that wires clients, names and policy into the stores."""

from __future__ import annotations

from typing import Any

from interlock.adapters.admission import TurnStore
from interlock.adapters.approvals import ApprovalStore
from interlock.adapters.blobs import BlobStore
from interlock.adapters.channelstore import ChannelStore
from interlock.adapters.chats import ChatStore
from interlock.adapters.limits import LimitStore
from interlock.adapters.outbox import Outbox
from interlock.adapters.requests import RequestStore
from interlock.config import deployment
from interlock.ports import Stores
from interlock.timing import StorePolicy

__all__ = ["Stores", "build_stores", "stores_from_env"]


def build_stores(
    dynamodb: Any, s3: Any, table_name: str, bucket: str, policy: StorePolicy | None = None
) -> Stores:
    """Build the stores on injected boto3 clients."""
    policy = policy or StorePolicy()
    return Stores(
        requests=RequestStore(dynamodb, table_name, policy),
        approvals=ApprovalStore(dynamodb, table_name, policy.approval_ttl_s),
        chats=ChatStore(dynamodb, table_name, policy.retention_s * 10),
        turns=TurnStore(dynamodb, table_name, policy.retention_s * 10),
        limits=LimitStore(dynamodb, table_name),
        outbox=Outbox(dynamodb, table_name, policy.retention_s * 10),
        blobs=BlobStore(s3, bucket, policy.max_snapshot_bytes),
        policy=policy,
        channels=ChannelStore(dynamodb, table_name, policy.retention_s * 10),
    )


def stores_from_env(policy: StorePolicy | None = None) -> Stores:
    """Build the stores from `INTERLOCK_TABLE` and `INTERLOCK_BUCKET`.

    boto3 is imported here, not at module import, so domain-only callers never load it.
    Clients honour `AWS_ENDPOINT_URL`, which is how local mode points them at moto.
    """
    import boto3

    table, bucket = deployment().required("table", "bucket")
    session = boto3.session.Session()
    return build_stores(session.client("dynamodb"), session.client("s3"), table, bucket, policy)
