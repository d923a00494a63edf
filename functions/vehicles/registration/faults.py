"""Where a registration can be made to fail: the notify step, armed by the request itself.

A request's ``fault_injection.notify_failures`` asks for its first N notifications to
fail. The first attempt to arrive arms that as a fault of the shared contract (one item
in the ``faults`` table, ``shared.faults``); every attempt then strikes it, so the first
N fail whichever execution environment they run in, and the item's ``reached`` counts how
often notify ran (``idemlab.lessons.vehicles.notify_attempts``).
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from shared import clients, faults

from .errors import NotifyTransientError
from .request import RegistrationRequest

NOTIFY = "notify"  # the notify step, before it tells the owner


def arm_from_request(request: RegistrationRequest) -> None:
    """Arm the failures the request asks for, once for all of its attempts."""
    if request.notify_failures <= 0:
        return  # the request asks for none: the faults table is not touched
    item = faults.item(NOTIFY, request.request_id, faults.ERROR, request.notify_failures)
    try:
        # Only the first attempt arms: a retry or a copy must not give the fault its strikes back.
        clients.dynamodb_table("faults").put_item(
            Item=item,
            ConditionExpression="attribute_not_exists(#key)",
            ExpressionAttributeNames={"#key": faults.FAULT_KEY},
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise


def strike(point: str, request_id: str, context) -> None:
    """``shared.faults.strike``, its injected error named as the workflow retries it."""
    try:
        faults.strike(point, request_id, context)
    except faults.InjectedFaultError as exc:
        raise NotifyTransientError(f"notification for request {request_id} failed (injected transient fault)") from exc
