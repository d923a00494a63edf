"""The naive deletion, for contrast: every step in one go, with no claim, no progress
record and no fencing. Run twice, it does everything twice; crash it halfway and the
retry starts again from the top. The goodbye email has no idempotency key."""

from __future__ import annotations

import time
import uuid

from boto3.dynamodb.conditions import Key

from erasure import faults, state
from erasure import input as checked
from shared import clients, settings


def handler(event, context):
    request_id = checked.identifier(event, "deletion_request_id")
    request = state.read(clients.dynamodb_table("deletion_requests"), request_id)
    user_id = request.user_id
    for step in state.STEPS:  # the same steps, in the same order, as the workflow
        effect = EFFECTS[step]
        faults.strike(faults.at(step, faults.BEFORE), request_id, context)
        effect(user_id, request_id)
        faults.strike(faults.at(step, faults.AFTER_EFFECT), request_id, context)
    clients.dynamodb_table("deletion_requests").update_item(
        Key={"deletion_request_id": request_id},
        UpdateExpression="SET #s = :done",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":done": state.Status.COMPLETED.value},
    )
    return {"deletion_request_id": request_id, "status": state.Status.COMPLETED.value}


def delete_records(user_id: str, request_id: str) -> None:
    records = clients.dynamodb_table("user_records")
    items = records.query(KeyConditionExpression=Key("user_id").eq(user_id)).get("Items", [])
    with records.batch_writer() as batch:
        for item in items:
            batch.delete_item(Key={"user_id": item["user_id"], "record_id": item["record_id"]})


def delete_files(user_id: str, request_id: str) -> None:
    s3 = clients.client("s3")
    bucket = settings.required("USER_FILES_BUCKET")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{user_id}/").get("Contents", [])
    for obj in listed:
        s3.delete_object(Bucket=bucket, Key=obj["Key"])


def delete_identity(user_id: str, request_id: str) -> None:
    clients.dynamodb_table("identities").delete_item(Key={"user_id": user_id})


def send_goodbye(user_id: str, request_id: str) -> None:
    # A fresh id per send: the mail service cannot tell a repeat from a new email.
    clients.dynamodb_table("email_outbox").put_item(
        Item={
            "idempotency_key": f"naive#{uuid.uuid4().hex}",
            "kind": "goodbye",
            "user_id": user_id,
            "deletion_request_id": request_id,
            "sent_at": int(time.time()),
        }
    )


# Each effect is named after its step (erasure.state.STEPS).
EFFECTS = {effect.__name__: effect for effect in (delete_records, delete_files, delete_identity, send_goodbye)}
