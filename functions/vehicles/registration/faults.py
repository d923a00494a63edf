"""Fault injection that works on every backend: a counter per fault in the faults table.

The counter lives in DynamoDB rather than in the function's memory because a retry may
land in a different execution environment, and because it must work the same on AWS,
LocalStack and the embedded backend.
"""

from __future__ import annotations

from .store import table

NOTIFY = "notify"  # the notify step, before it tells the owner
ATTEMPTS = "attempts"  # the counter: how many calls reached the point for the request


def fault_key(point: str, request_id: str) -> str:
    return f"{point}#{request_id}"


def should_fail(fault_key: str, failures: int) -> bool:
    """True for the first ``failures`` calls with ``fault_key``, False from then on."""
    if failures <= 0:
        return False
    # ADD is atomic, so concurrent attempts each see their own count.
    response = table("faults").update_item(
        Key={"fault_key": fault_key},
        UpdateExpression="ADD #attempts :one",
        ExpressionAttributeNames={"#attempts": ATTEMPTS},
        ExpressionAttributeValues={":one": 1},
        ReturnValues="UPDATED_NEW",
    )
    return int(response["Attributes"][ATTEMPTS]) <= failures
