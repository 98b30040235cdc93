"""Local mode's state file: the table and bucket come back as they were, binary
attributes included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from local.persist import LocalState

ITEM = {
    "pk": {"S": "CHAT#c1"},
    "sk": {"S": "REQUEST"},
    "digest_bytes": {"B": b"\x1f\x8b\x00binary"},
    # A map whose key looks like the file's own tag stays a map
    "card": {"M": {"$base64": {"S": "not bytes"}}},
}


def test_a_saved_table_and_bucket_are_restored_as_they_were(
    aws: dict[str, Any], tmp_path: Path
) -> None:
    dynamodb, s3 = aws["dynamodb"], aws["s3"]
    dynamodb.put_item(TableName=aws["table"], Item=ITEM)
    s3.put_object(Bucket=aws["bucket"], Key="snapshots/c1/x.json.gz", Body=b"\x00\x01")
    state = LocalState(tmp_path, dynamodb, s3, aws["table"], aws["bucket"])
    state.save()

    # When everything is gone and the state is put back
    dynamodb.delete_item(TableName=aws["table"], Key={"pk": ITEM["pk"], "sk": ITEM["sk"]})
    s3.delete_object(Bucket=aws["bucket"], Key="snapshots/c1/x.json.gz")
    assert state.restore() == 1

    # Then it is as it was, byte for byte
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    assert dynamodb.get_item(TableName=aws["table"], Key=key)["Item"] == ITEM
    body = s3.get_object(Bucket=aws["bucket"], Key="snapshots/c1/x.json.gz")["Body"].read()
    assert body == b"\x00\x01"
