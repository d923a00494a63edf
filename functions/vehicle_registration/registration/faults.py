"""Fault injection that works on every backend: a counter per fault in the faults table.

The counter lives in DynamoDB rather than in the function's memory because a retry may
land in a different execution environment, and because it must work the same on AWS,
LocalStack and the embedded backend.
"""

from __future__ import annotations

from .store import table_from_env


def should_fail(fault_key: str, failures: int) -> bool:
    """True for the first ``failures`` calls with ``fault_key``, False from then on."""
    if failures <= 0:
        return False
    # ADD is atomic, so concurrent attempts each see their own count.
    response = table_from_env("FAULTS_TABLE").update_item(
        Key={"fault_key": fault_key},
        UpdateExpression="ADD attempts :one",
        ExpressionAttributeValues={":one": 1},
        ReturnValues="UPDATED_NEW",
    )
    return int(response["Attributes"]["attempts"]) <= failures
