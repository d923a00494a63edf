"""The naive consumer: reserve stock for every record, fail the batch on any error.

Lambda deletes a batch only when the invocation succeeds. One bad line therefore sends
every line of its batch back to the queue, and the lines already reserved are reserved
again when they return (Lambda developer guide, services-sqs-errorhandling.html).
"""

from __future__ import annotations

from fulfilment import orders, stock


def handler(event, context):
    for record in event["Records"]:
        line = orders.parse(record["body"])
        stock.reserve(line, record["messageId"], record["attributes"]["ApproximateReceiveCount"])
    return {"reserved": len(event["Records"])}
