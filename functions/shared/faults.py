"""The one fault contract of every lesson: named points where an armed fault strikes.

A lesson's code calls ``strike(point, key, context)`` at each point a fault can be
injected, and nothing else of it differs between production and a lesson: with no fault
armed, ``strike`` reads one item and returns. A fault is armed from outside the function
(the harness, ``idemlab.faults.arm``) with one item in the ``faults`` table, the same
shape for every lesson::

    {"fault_key": "<point>#<key>", "kind": <what happens>, "times": N, "reached": 0}

The first N arrivals at that point for that key fail the ``kind`` way; ``reached``
counts every arrival while the item exists (an atomic ADD, so racing arrivals each get
their own count and exactly N fail). The counter lives in DynamoDB, not in memory,
because a retry may run in another execution environment and must stop failing once
the fault is used up; and a table, unlike a backend feature, works on AWS, LocalStack
and the embedded backend alike. Arming through a table rather than the request matters
too: a retry repeats its request exactly, and must not fail again just because the
first attempt did.
"""

from __future__ import annotations

import sys
import time

from botocore.exceptions import ClientError

from shared import clients, settings

# The item's attributes: written here, read by the harness that arms a fault.
FAULT_KEY = "fault_key"
KIND = "kind"
TIMES = "times"  # how many arrivals fail
REACHED = "reached"  # how many arrivals there were while the fault was armed

# What happens at the point. A crash ends the invocation without its code recording
# anything: no except, no finally, no reply. That is a run past the function's timeout,
# which AWS, LocalStack and the embedded backend all end the same way: Lambda stops the
# invocation and answers with a timeout error (Lambda developer guide, "Configure Lambda
# function timeout"). Exiting the process is not portable: LocalStack 4.14 does not
# report a handler's exit (its own test_lambda_handler_exit is skipped as not yet
# supported), and the invocation hangs until the timeout anyway.
CRASH = "crash"  # the invocation dies here
TIMEOUT = "timeout"  # the invocation hangs here past its timeout (ends as a crash does)
ERROR = "error"  # InjectedFaultError is raised here; the lesson's code may name it its own way
PAUSE = "pause"  # the invocation stalls here, then goes on: a zombie that wakes up
KINDS = (CRASH, TIMEOUT, ERROR, PAUSE)

# A pause long enough for another worker to claim meanwhile, even on a busy machine,
# and well inside the deletion steps' timeouts (10 s and more), so the paused invocation
# does go on. At a point of a function with a shorter timeout it would be a timeout.
PAUSE_SECONDS = 3.0
# Past the deadline by this much each time, so the runtime has stopped the invocation for sure.
OVERRUN_SECONDS = 1.0


class InjectedFaultError(Exception):
    """An ``error`` fault armed at this point struck."""


def fault_key(point: str, key: str) -> str:
    """The ``faults`` item key of ``point`` for one request (or order, or deletion)."""
    return f"{point}#{key}"


def item(point: str, key: str, kind: str, times: int = 1) -> dict:
    """The faults-table item (resource form) that makes the next ``times`` arrivals at
    ``point`` for ``key`` fail the ``kind`` way; ValueError for a kind or count that is not one."""
    if kind not in KINDS:
        raise ValueError(f"fault kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"times must be a whole number of at least 1, not {times!r}")
    return {FAULT_KEY: fault_key(point, key), KIND: kind, TIMES: times, REACHED: 0}


def strike(point: str, key: str, context) -> None:
    """Fail here, the armed way, if a fault is armed at ``point`` for ``key``; else return.

    ``context`` is the invocation's Lambda context: a crash or a timeout runs past the
    time it has left.
    """
    kind = _take(fault_key(point, key))
    if kind is None:
        return
    print(f"fault injected: {kind} at {point} for {key!r}", file=sys.stderr, flush=True)
    if kind == PAUSE:
        time.sleep(PAUSE_SECONDS)
        return
    if kind == ERROR:
        raise InjectedFaultError(f"injected error at {point} for {key!r}")
    # Lambda ends the invocation at its timeout. Should that stop come late (a busy host),
    # the code must still never go on: a crashed worker that woke up would write as a
    # zombie nobody asked for. So it sleeps until it is stopped.
    while True:
        time.sleep(max(context.get_remaining_time_in_millis() / 1000, 0) + OVERRUN_SECONDS)


def _take(key: str) -> str | None:
    """Count one arrival at the fault ``key``; its kind while it has strikes left, else None."""
    if settings.optional("FAULTS_TABLE") is None:
        return None  # this deployment injects no faults
    table = clients.dynamodb_table("faults")
    # A plain read first: almost every arrival finds nothing, and reads are cheap.
    if "Item" not in table.get_item(Key={FAULT_KEY: key}, ConsistentRead=True):
        return None
    try:
        counted = table.update_item(
            Key={FAULT_KEY: key},
            UpdateExpression="ADD #reached :one",
            ConditionExpression="attribute_exists(#key)",  # disarmed since the read: nothing to count
            ExpressionAttributeNames={"#reached": REACHED, "#key": FAULT_KEY},
            ExpressionAttributeValues={":one": 1},
            ReturnValues="ALL_NEW",
        )["Attributes"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return None
        raise
    if counted[REACHED] > counted[TIMES]:
        return None  # used up by earlier arrivals
    kind = counted[KIND]
    if kind not in KINDS:
        raise RuntimeError(f"bug: unknown fault kind {kind!r} armed at {key}; use one of {', '.join(KINDS)}")
    return kind
