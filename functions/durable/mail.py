"""The mail provider, as the lesson sees it: a table of sent messages (``email_outbox``,
hash ``idempotency_key``). A send with a key is kept once, as a provider that honours
idempotency keys does; a send without one is a new message every time."""

from __future__ import annotations

import time
import uuid

from boto3.dynamodb.conditions import Attr
from botocore.exceptions import ClientError

from shared import clients

KIND = "goodbye"


def send(user_id: str, address: str, idempotency_key: str | None) -> str:
    """Send one goodbye; the message's id (the key, when there is one)."""
    item = {"kind": KIND, "user_id": user_id, "to": address, "sent_at": int(time.time())}
    if idempotency_key is None:
        message_id = f"message#{uuid.uuid4()}"
        clients.dynamodb_table("email_outbox").put_item(Item={"idempotency_key": message_id, **item})
        return message_id
    try:
        clients.dynamodb_table("email_outbox").put_item(
            Item={"idempotency_key": idempotency_key, **item},
            ConditionExpression=Attr("idempotency_key").not_exists(),
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        # The provider already has this message: a repeat with its key sends nothing.
    return idempotency_key
