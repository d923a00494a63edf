"""The naive consumer: reserve stock for every record, fail the invocation if any failed.

It tries every line (one bad line should not hold up the others) and then raises, so
Lambda retries. But Lambda deletes a batch only when the invocation succeeds: every line
of the batch comes back after the visibility timeout, and the lines already reserved
are reserved again (Lambda developer guide, services-sqs-errorhandling.html).
"""

from __future__ import annotations

from fulfilment import orders, stock
from fulfilment.errors import FulfilmentError


class BatchFailedError(Exception):
    """At least one line of the batch could not be fulfilled."""


def handler(event, context):
    failed = []
    for record in event["Records"]:
        try:
            line = orders.parse(record["body"])
            stock.reserve(line, record["messageId"], record["attributes"]["ApproximateReceiveCount"])
        except FulfilmentError as exc:
            failed.append(f"{record['messageId']}: {exc}")
    if failed:
        raise BatchFailedError(f"{len(failed)} of {len(event['Records'])} lines failed: " + "; ".join(failed))
    return {"reserved": len(event["Records"])}
