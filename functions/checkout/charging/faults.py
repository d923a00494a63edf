"""Fault injection through the faults table, so it works on every backend.

A test arms a fault with an item ``{"fault_key": "<point>#<idempotency key>",
"remaining": N}``; the next N invocations that reach that point for that key fail
there. Arming through a table (not the request) matters: a retry repeats the
request exactly, and must not crash again just because the first attempt did.
"""

from __future__ import annotations

import os
import sys

import boto3
from botocore.exceptions import ClientError

from charging import settings

AFTER_CHARGE = "after_charge"  # the card is charged, the result not yet recorded
CRASH_EXIT_CODE = 70

dynamodb = boto3.client("dynamodb")


def fault_key(point: str, idempotency_key: str) -> str:
    return f"{point}#{idempotency_key}"


def crash_if_armed(point: str, idempotency_key: str) -> None:
    """Kill this process on the spot when a fault is armed here: no except, no finally."""
    if _take(point, idempotency_key):
        print(f"fault injected: crashing at {point} for {idempotency_key!r}", file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT_CODE)


def _take(point: str, idempotency_key: str) -> bool:
    table = settings.optional("FAULTS_TABLE")
    if table is None:
        return False
    key = {"fault_key": {"S": fault_key(point, idempotency_key)}}
    # A plain read first: almost every invocation finds nothing, and reads are cheap.
    if "Item" not in dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True):
        return False
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
            return False  # used up by an earlier invocation
        raise
    return True
