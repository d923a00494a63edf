"""Step 5: send one goodbye email.

Sending has no natural "already done" to look at afterwards, so the email carries an
idempotency key derived from the request: the mail service (here, the outbox table
that stands for it) keeps the first message with a key and ignores repeats.
"""

from __future__ import annotations

import time

from boto3.dynamodb.conditions import Attr
from botocore.exceptions import ClientError

from erasure import claims, state
from erasure.steps import run_step
from shared import clients

STEP = "send_goodbye"


def handler(event, context):
    return run_step(STEP, event, context, send_goodbye)


def goodbye_key(deletion_request_id: str) -> str:
    return f"goodbye#{deletion_request_id}"


def send_goodbye(claim: claims.Claim, request: state.Request, context=None) -> None:
    """One email to the address captured before the identity was deleted; a user who
    had no address gets none (there is nowhere to send it)."""
    if not request.goodbye_address:
        print(f"{claim.deletion_request_id}: no address was captured; no goodbye to send")
        return
    try:
        clients.dynamodb_table("email_outbox").put_item(
            Item={
                "idempotency_key": goodbye_key(claim.deletion_request_id),
                "kind": "goodbye",
                "user_id": claim.user_id,
                "to": request.goodbye_address,
                "deletion_request_id": claim.deletion_request_id,
                "sent_at": int(time.time()),
            },
            ConditionExpression=Attr("idempotency_key").not_exists(),
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        # Sent by an earlier attempt: the key makes this repeat a no-op.
