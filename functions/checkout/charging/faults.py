"""Fault injection through the faults table, so it works on every backend.

A caller arms a fault with an item ``{"fault_key": "<point>#<idempotency key>",
"remaining": N, "fault": <what happens>}``; the next N invocations that reach that point
for that key fail there. Arming through a table (not the request) matters: a retry
repeats the request exactly, and must not fail again just because the first attempt did.

What can happen at a point:

- ``TIME_OUT``: the invocation runs past its function timeout, so it ends without its code
  recording anything (no except, no finally, no result stored). This is how a crash is
  injected, because it behaves alike everywhere: on AWS and LocalStack the runtime stops
  a timed-out invocation, and the embedded backend kills its worker. A handler that exits
  its own process is not one of those cases: LocalStack 4.14 does not support it (its
  test of a handler that exits is skipped) and the invocation can hang until the timeout.
- ``LOSE_ANSWER``: the card processor charged, and its answer never reached the checkout
  (a read timeout, a dropped connection). The checkout cannot tell whether it charged.
"""

from __future__ import annotations

import os
import sys
import time

import boto3
from botocore.exceptions import ClientError

from charging.errors import ChargeUnknown
from charging.fault_points import AFTER_CHARGE, FAULTS, LOSE_ANSWER, TIME_OUT, fault_key

__all__ = ["AFTER_CHARGE", "LOSE_ANSWER", "TIME_OUT", "fail_if_armed"]

# Past the deadline by this much, so the runtime has stopped the invocation for sure.
OVERRUN_SECONDS = 1.0
# Only reached where no Lambda runtime stops the sleeping handler (called in-process):
# the process ends the way a stopped invocation does, with nothing recorded.
NO_RUNTIME_EXIT_CODE = 70

dynamodb = boto3.client("dynamodb")


def fail_if_armed(point: str, idempotency_key: str, context) -> None:
    """Fail here the armed way, when a fault is armed for this point and key."""
    fault = _take(point, idempotency_key)
    if fault is None:
        return
    print(f"fault injected: {fault} at {point} for {idempotency_key!r}", file=sys.stderr, flush=True)
    if fault == LOSE_ANSWER:
        raise ChargeUnknown(f"the card processor's answer for {idempotency_key!r} was lost (fault injected at {point})")
    time.sleep(context.get_remaining_time_in_millis() / 1000 + OVERRUN_SECONDS)
    os._exit(NO_RUNTIME_EXIT_CODE)


def _take(point: str, idempotency_key: str) -> str | None:
    """The armed fault's kind, used up once; None when nothing is armed here."""
    table = os.environ.get("FAULTS_TABLE")  # unset: this deployment injects no faults
    if not table:
        return None
    key = {"fault_key": {"S": fault_key(point, idempotency_key)}}
    # A plain read first: almost every invocation finds nothing, and reads are cheap.
    item = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    if item is None:
        return None
    fault = item.get("fault", {}).get("S", TIME_OUT)
    if fault not in FAULTS:
        raise RuntimeError(f"bug: unknown fault {fault!r} armed at {point}; use one of {', '.join(FAULTS)}")
    try:
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET remaining = remaining - :one",
            ConditionExpression="remaining > :zero",
            ExpressionAttributeValues={":one": {"N": "1"}, ":zero": {"N": "0"}},
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return None  # used up by an earlier invocation
        raise
    return fault
