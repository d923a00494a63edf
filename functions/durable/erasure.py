"""The account deletion as one durable function: three erasure steps and a goodbye email.

Each ``@durable_step`` is checkpointed by Lambda when it returns; after a failure Lambda
invokes the handler again, from the top, and a step that has a checkpoint returns its
stored result without running (Lambda developer guide, durable-basic-concepts). A step
that was interrupted after its effect and before its checkpoint has no result stored, so
it runs again: at least once per retry, the default (same page). The three erasures are
safe to run twice (deleting what is gone changes nothing); the email is not, which is
what the lesson's two senders (``mail.py``) differ in.
"""

from __future__ import annotations

from aws_durable_execution_sdk_python import DurableContext, StepContext, durable_step
from aws_durable_execution_sdk_python.config import StepConfig

import mail
from shared import clients, faults, settings

# The fault points of the send step: after it has started and before the provider has the
# email; and between the email's effect (the provider took it) and the step's checkpoint.
BEFORE_SEND = "send_goodbye.before_effect"
AFTER_SEND = "send_goodbye.after_effect"
# The step names, in order: a step's name is part of its checkpoint, and of the mail key.
STEPS = ("delete_records", "delete_files", "delete_identity", "send_goodbye")


@durable_step
def delete_records(step: StepContext, user_id: str) -> int:
    """Every record of the user (user_records: hash user_id, range record_id)."""
    table = clients.dynamodb_table("user_records")
    found = table.query(
        KeyConditionExpression="user_id = :user",
        ExpressionAttributeValues={":user": user_id},
        ProjectionExpression="user_id, record_id",
    )["Items"]
    with table.batch_writer() as batch:
        for item in found:
            batch.delete_item(Key={"user_id": item["user_id"], "record_id": item["record_id"]})
    return len(found)


@durable_step
def delete_files(step: StepContext, user_id: str) -> int:
    """Every object under the user's prefix of the files bucket."""
    s3 = clients.client("s3")
    bucket = settings.required("USER_FILES_BUCKET")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{user_id}/").get("Contents", [])]
    if keys:
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in keys], "Quiet": True})
    return len(keys)


@durable_step
def delete_identity(step: StepContext, user_id: str) -> bool:
    """The user's sign-in identity."""
    clients.dynamodb_table("identities").delete_item(Key={"user_id": user_id})
    return True


@durable_step
def send_goodbye(step: StepContext, request: dict, provider_key: str | None, lambda_context) -> str:
    """One goodbye email through the provider; ``provider_key`` None sends without a key."""
    # Fault hook: the step has started, the provider has nothing yet.
    faults.strike(BEFORE_SEND, request["deletion_request_id"], lambda_context)
    message_id = mail.send(request["user_id"], request["goodbye_address"], provider_key)
    # Fault hook: the provider has the email, the step has not returned, so nothing is checkpointed.
    faults.strike(AFTER_SEND, request["deletion_request_id"], lambda_context)
    return message_id


def erase(event: dict, context: DurableContext, provider_key, send_config: StepConfig | None = None) -> dict:
    """The deletion, step by step; ``provider_key(request, execution_arn, step_name)`` gives the
    email's key (None: no key)."""
    user_id = event["user_id"]
    records = context.step(delete_records(user_id), name="delete_records")
    files = context.step(delete_files(user_id), name="delete_files")
    context.step(delete_identity(user_id), name="delete_identity")
    key = provider_key(event, context.execution_context.durable_execution_arn, "send_goodbye")
    message_id = context.step(
        send_goodbye(event, key, context.lambda_context),
        name="send_goodbye",
        config=send_config,
    )
    return {"deleted_records": records, "deleted_files": files, "message_id": message_id}
