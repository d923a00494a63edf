"""A message on the deletion dead-letter queue for each request that ran out of attempts.

The body is the workflow input that restarts the request as a redrive; TARGET_ARN
tells the redrive tool where to deliver it. Sent before the request is marked FAILED,
so a crash in between leaves a message too many (the redrive is idempotent) rather
than a FAILED request nobody hears about.
"""

from __future__ import annotations

import json

from botocore.exceptions import ClientError

from erasure import claims, config, state
from erasure.errors import DeletionStoreUnavailableError
from shared import clients, settings


def send(deletion_request_id: str, user_id: str, reason: str) -> str:
    """Put the request on the dead-letter queue; returns the message id."""
    attributes = {
        "DELETION_REQUEST_ID": deletion_request_id,
        "USER_ID": user_id,
        "ERROR_MESSAGE": reason[:1000] or "unknown",
    }
    target = settings.optional("ACCOUNT_DELETION_STATE_MACHINE_ARN")
    if target:
        attributes["TARGET_ARN"] = target
    try:
        sent = clients.client("sqs").send_message(
            QueueUrl=settings.required("DELETION_DLQ_QUEUE_URL"),
            MessageBody=json.dumps({"deletion_request_id": deletion_request_id, "redrive": True}),
            MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
        )
    except ClientError as exc:
        raise DeletionStoreUnavailableError(
            f"dead-lettering {deletion_request_id}: {exc.response['Error'].get('Code')}"
        ) from exc
    return sent["MessageId"]


def send_on_last_attempt(request: state.Request, reason: str) -> None:
    """Put ``request`` on the queue if its attempt that just failed or vanished was its
    last: the caller then gives it back as FAILED."""
    if claims.is_last_attempt(request.attempts, config.max_attempts()):
        send(request.deletion_request_id, request.user_id, reason)
