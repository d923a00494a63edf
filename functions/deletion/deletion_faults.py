"""Fault injection at the step boundaries, through the faults table, on every backend.

A test or a notebook arms a fault with an item
``{"fault_key": "<step>.<point>#<deletion_request_id>", "kind": ..., "remaining": N}``;
the next N workers that reach that point for that request fail there. The counter lives
in DynamoDB, not in memory, because a retry may run in another execution environment
and must stop failing once the fault is used up.
"""

from __future__ import annotations

import os
import sys
import time

from botocore.exceptions import ClientError

import deletion_config as config
from deletion_errors import InjectedFault, InvalidDeletionInput

BEFORE = "before"  # nothing of the step has happened yet
AFTER_EFFECT = "after_effect"  # the effect happened; its progress is not recorded
AFTER_PROGRESS = "after_progress"  # the progress is recorded; the reply is not sent
POINTS = (BEFORE, AFTER_EFFECT, AFTER_PROGRESS)

# A crash ends the invocation without its code recording anything: no except, no
# finally, no reply. Inside Lambda that is a run past the function's timeout, which
# AWS, LocalStack and the embedded backend all end the same way: Lambda stops the
# invocation and answers with a timeout error (Lambda developer guide, "Configure Lambda
# function timeout"; LocalStack 4.14 has an AWS-validated test of it). Exiting the
# process is not portable: LocalStack 4.14 does not report a handler's exit (its own
# test, test_lambda_handler_exit, is skipped as not yet supported) and the invocation
# hangs until the timeout anyway. So the process exits only outside Lambda, where there
# is no timeout to run past (in-process tests that run the steps in a child process).
CRASH = "crash"
TIMEOUT = "timeout"  # the step hangs past its Lambda timeout; outside Lambda, a stall
ERROR = "error"  # the step raises InjectedFault
KINDS = (CRASH, TIMEOUT, ERROR)

CRASH_EXIT_CODE = 70
# Outside Lambda (in-process tests) there is no deadline to outlive: a "timeout" is a
# stall this long: time for another worker to claim the request while this one sleeps,
# even on a busy machine.
STALL_SECONDS_WITHOUT_CONTEXT = 3.0


def fault_key(step: str, point: str, deletion_request_id: str) -> str:
    return f"{step}.{point}#{deletion_request_id}"


def arm(table, step: str, point: str, deletion_request_id: str, kind: str, times: int = 1) -> str:
    """Make the next ``times`` workers reaching ``step``/``point`` for this request fail."""
    if point not in POINTS:
        raise InvalidDeletionInput(f"fault point must be one of {', '.join(POINTS)}, not {point!r}")
    if kind not in KINDS:
        raise InvalidDeletionInput(f"fault kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if times < 1:
        raise InvalidDeletionInput(f"times must be at least 1, not {times}")
    key = fault_key(step, point, deletion_request_id)
    table.put_item(Item={"fault_key": key, "kind": kind, "remaining": times})
    return key


def strike(step: str, point: str, deletion_request_id: str, context=None) -> None:
    """Fail here, the armed way, if a fault is armed for this boundary; else return."""
    kind = _take(fault_key(step, point, deletion_request_id))
    if kind is None:
        return
    print(f"fault injected: {kind} at {step}.{point} for {deletion_request_id}", file=sys.stderr, flush=True)
    if kind == CRASH and context is None:
        os._exit(CRASH_EXIT_CODE)
    if kind in (CRASH, TIMEOUT):
        if context is None:
            time.sleep(STALL_SECONDS_WITHOUT_CONTEXT)
            return
        # Inside Lambda the runtime ends the invocation at its timeout. Should that stop come
        # late (a busy host), the step must still never go on: a crashed worker that woke up
        # would claim or write as a zombie nobody asked for. So it sleeps until it is stopped.
        while True:
            time.sleep(max(context.get_remaining_time_in_millis() / 1000, 0) + 1)
    raise InjectedFault(f"injected error at {step}.{point} for {deletion_request_id}")


def _take(key: str) -> str | None:
    """Use up one strike of the fault at ``key``; its kind, or None when none is left."""
    name = config.optional("FAULTS_TABLE")
    if name is None:
        return None
    table = config.table("faults")
    # A plain read first: almost every call finds nothing, and reads are cheap.
    item = table.get_item(Key={"fault_key": key}, ConsistentRead=True).get("Item")
    if not item:
        return None
    try:
        table.update_item(
            Key={"fault_key": key},
            UpdateExpression="SET remaining = remaining - :one",
            ConditionExpression="remaining > :zero",
            ExpressionAttributeValues={":one": 1, ":zero": 0},
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return None  # used up by an earlier worker
        raise
    return item.get("kind", ERROR)
