"""The table and bucket layout, as plain data.

One source of truth: the CDK storage stack, the local server and the moto fixtures all
build the table from these names, so a test table cannot drift from the deployed one.
"""

from __future__ import annotations

from typing import Any, Final

# Re-exported: S3 prefixes are spelled in `interlock.keys`; each gets a lifecycle rule.
from interlock.keys import ANSWER_PREFIX as ANSWER_PREFIX
from interlock.keys import SNAPSHOT_PREFIX as SNAPSHOT_PREFIX
from interlock.keys import STEP_PREFIX as STEP_PREFIX

# The open requests' index partitions, spelled with the key builders (the finder walks them).
from interlock.keys import SWEEP_SHARDS as SWEEP_SHARDS
from interlock.timing import ANSWER_LIFECYCLE_DAYS as ANSWER_LIFECYCLE_DAYS
from interlock.timing import SNAPSHOT_LIFECYCLE_DAYS as SNAPSHOT_LIFECYCLE_DAYS

PARTITION_KEY: Final = "pk"
SORT_KEY: Final = "sk"
TTL_ATTRIBUTE: Final = "ttl"

# Sparse index for the expiry sweeper: only open requests (pending or claimed) carry
# `sweep_shard`, so the index holds exactly the requests that may still need sweeping,
# ordered by their logical expiry.
EXPIRY_INDEX: Final = "by_expiry"
EXPIRY_INDEX_PARTITION: Final = "sweep_shard"
EXPIRY_INDEX_SORT: Final = "expires_at"

# Sparse index of the claims a worker holds, by when their lease runs out: only an open
# request carries `sweep_shard`, and only a claimed one `lease_expires_at_ms`, so the index
# holds exactly the claims, and a query for leases that ran out long ago finds the runs
# whose worker died (the sweeper continues them; nobody has to click).
LEASE_INDEX: Final = "by_lease"
LEASE_INDEX_SORT: Final = "lease_expires_at_ms"

# Sparse index of the channel posts with a delivery due: a notice row carries
# `notice_due_ms` from its reservation until nothing is left to deliver (its post and its
# edit), so the finder reads exactly the posts and edits to retry, and the posts whose
# request may have ended without an edit, by when each is due.
NOTICE_INDEX: Final = "by_notice"
NOTICE_INDEX_SORT: Final = "notice_due_ms"

# Sparse index of each user's open requests, newest first: only an open request carries
# `inbox_user`. It projects what an inbox row shows, not the run's state.
INBOX_INDEX: Final = "by_user"
INBOX_INDEX_PARTITION: Final = "inbox_user"
# Milliseconds: two requests opened in the same second still list newest first.
INBOX_INDEX_SORT: Final = "created_ms"
INBOX_PROJECTION: Final = (
    "interrupt_id",
    "kind",
    "card",
    "created_at",
    "expires_at",
    "state",
    "also_asked",
)


def create_table_request(table_name: str) -> dict[str, Any]:
    """The `CreateTable` arguments for a table shaped like the deployed one."""
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": SORT_KEY, "AttributeType": "S"},
            {"AttributeName": EXPIRY_INDEX_PARTITION, "AttributeType": "S"},
            {"AttributeName": EXPIRY_INDEX_SORT, "AttributeType": "N"},
            {"AttributeName": INBOX_INDEX_PARTITION, "AttributeType": "S"},
            {"AttributeName": INBOX_INDEX_SORT, "AttributeType": "N"},
            {"AttributeName": LEASE_INDEX_SORT, "AttributeType": "N"},
            {"AttributeName": NOTICE_INDEX_SORT, "AttributeType": "N"},
        ],
        "KeySchema": [
            {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": EXPIRY_INDEX,
                "KeySchema": [
                    {"AttributeName": EXPIRY_INDEX_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": EXPIRY_INDEX_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
            {
                "IndexName": LEASE_INDEX,
                "KeySchema": [
                    {"AttributeName": EXPIRY_INDEX_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": LEASE_INDEX_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
            {
                "IndexName": NOTICE_INDEX,
                "KeySchema": [
                    {"AttributeName": EXPIRY_INDEX_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": NOTICE_INDEX_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
            {
                "IndexName": INBOX_INDEX,
                "KeySchema": [
                    {"AttributeName": INBOX_INDEX_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": INBOX_INDEX_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {
                    "ProjectionType": "INCLUDE",
                    "NonKeyAttributes": list(INBOX_PROJECTION),
                },
            },
        ],
    }


def create_storage(dynamodb: Any, s3: Any, table_name: str, bucket_name: str) -> None:
    """Create the table (with TTL) and the bucket on an emulated or empty account."""
    dynamodb.create_table(**create_table_request(table_name))
    dynamodb.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    )
    region = s3.meta.region_name
    if region == "us-east-1":
        s3.create_bucket(Bucket=bucket_name)
    else:
        s3.create_bucket(
            Bucket=bucket_name, CreateBucketConfiguration={"LocationConstraint": region}
        )


# What IAM keys on (`infra.permissions`): the partitions only the administrators' routes
# write, and the attributes only a claim (resume, settle) writes or names. A function
# that may not claim is denied any write that names one of these, so it can neither take
# a request's claim nor record its answer, journal or final text.
ADMIN_PARTITIONS: Final = ("ADMIN", "LINK#*", "LINKS#*")
# A link's own attributes: no other row names them, whatever its partition.
LINK_ATTRIBUTES: Final = ("linked_by", "external_id", "address")
CLAIM_ATTRIBUTES: Final = (
    "lease_token",
    "worker",
    "resume_deadline_ms",
    "journal_id",
    "decision",
    "response",
    "decided_by",
    "decided_at_ms",
    "decided_via",
    "failures",
    # The retry cap's count of claims that added nothing, and the steps a claim found.
    "stalls",
    "journal_seen",
    "answer",
    "answered_at",
    "final_text",
    # A journal step's body (`RequestStore.record_step`).
    "entry",
)
# Not among them: `acted`, which a cancel's condition reads (nothing was acted on), and
# `claim_count` and `lease_expires_at_ms`, which a new request starts and a cancel checks.
# Setting `acted` without a claim only makes a request fail closed (never answered anew).
DELIVERY_PARTITIONS: Final = ("DELIVERY#*",)
