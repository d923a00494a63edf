"""The function the conformance suite deploys. Each entry point shows one Lambda behaviour.

The suite points a function's Handler at one of these (``handler.fail``, ...), so one zip
serves every Lambda test. The client is made at import, as production code does, so the
handler's own time goes to the work being measured.
"""

import os
import time

import boto3

_dynamodb = boto3.client("dynamodb")


class PaymentDeclined(Exception):
    """A handler's own error: Lambda reports the class name as ``errorType``."""


def fail(event, context):
    """Raise the handler's own exception, with the event's reason as its message."""
    raise PaymentDeclined(event.get("reason", "declined"))


def mark_then_sleep(event, context):
    """Write a ``started`` mark, sleep ``event["sleep"]`` seconds, then a ``finished`` mark.

    With a timeout shorter than the sleep, Lambda stops the invocation between the two:
    the first mark proves it ran, the missing second one that its later code never did.
    """
    _mark(event["id"], "started")
    time.sleep(event["sleep"])
    _mark(event["id"], "finished")
    return {"finished": True}


def _mark(run_id: str, phase: str) -> None:
    _dynamodb.put_item(TableName=os.environ["TABLE"], Item={"pk": {"S": f"{run_id}#{phase}"}})
