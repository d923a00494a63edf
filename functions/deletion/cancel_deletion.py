"""Cancel a deletion while it is still SCHEDULED, for the user it deletes.

Cancel and the schedule firing race on one conditional write each, from SCHEDULED:
exactly one wins. A cancel that loses says what happened instead.

``user_id`` is the caller's identity. Behind an API it comes from the authenticated
caller (an API Gateway authorizer's claims, e.g. the Cognito ``sub``), never from a body
the caller writes; the request id alone authorises nothing, since anyone who knows a
user id can compute it. A cancel for another user's request is refused and changes nothing.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from erasure import input as checked
from erasure import state
from erasure.errors import DeletionStoreUnavailableError
from request_deletion import schedule_name
from shared import clients, settings


def handler(event, context):
    request_id = checked.identifier(event, "deletion_request_id")
    user_id = checked.identifier(event, "user_id")
    cancelled, request = state.cancel(clients.dynamodb_table("deletion_requests"), request_id, user_id)
    if cancelled:
        _delete_schedule(request_id)
    return {"deletion_request_id": request_id, "cancelled": cancelled, "status": request.status.value}


def _delete_schedule(request_id: str) -> None:
    # Tidiness only: if the schedule still fires, its claim finds CANCELLED and stops.
    try:
        clients.client("scheduler").delete_schedule(
            Name=schedule_name(request_id), GroupName=settings.required("SCHEDULE_GROUP")
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceNotFoundException":
            raise DeletionStoreUnavailableError(
                f"deleting the schedule of {request_id}: {exc.response['Error'].get('Code')}"
            ) from exc
