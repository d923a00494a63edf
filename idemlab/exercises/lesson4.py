"""Lesson 4 exercise: choose the idempotency key of an SQS record.

The learner writes ``reservation_key(record)``: given one record of the event Lambda
hands an SQS consumer, return the key under which its stock reservation is made once.
``exercise(stack).check(reservation_key)`` sends real order lines to the deployed
``orders_by_message_id`` queue (its consumer paused), including a producer's retry,
receives them twice as Lambda would, and checks the keys.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Callable

from idemlab.embedded.sqs_event_source import lambda_record
from idemlab.exercises import Exercise, ExerciseFailed, attempt
from idemlab.lessons.queues import Orders, line

QUEUE = "orders_by_message_id"

HINT = """\
What stays the same when the producer sends the same order line again, and when SQS
delivers the same message again? Not the messageId (each SendMessage gets a new one),
not the receiptHandle or ApproximateReceiveCount (each delivery gets new ones). The
order line itself says which reservation it is: parse record["body"] with json.loads
and build the key from its order_id and line number."""


def by_message_id(record: dict) -> str:
    """The starting point: the key fulfil_by_message_id uses."""
    return record["messageId"]


def reservation_key(record: dict) -> str:
    order_line = json.loads(record["body"])
    # The business key: the same order line is the same reservation, whichever message carried it.
    return f"{order_line['order_id']}#{order_line['line']}"


def exercise(stack: dict) -> Exercise:
    title = "Key a queue consumer's side effect on the business operation"
    return Exercise(title, HINT, reservation_key, verify, stack)


def verify(candidate: Callable[[dict], str], stack: dict) -> str:
    orders = Orders(stack)
    order_id = f"exercise-{uuid.uuid4().hex[:8]}"
    first, other = line(order_id, "sku-exercise", number=1), line(order_id, "sku-exercise", number=2)
    with orders.paused(QUEUE):
        orders.send(QUEUE, first, first, other)  # the second send is the producer's retry
        deliveries = _receive(orders, order_id, 3)
        # Lambda did not delete them (say the batch failed): they are delivered again.
        for record in deliveries:
            orders.sqs.change_message_visibility(QueueUrl=orders.url(QUEUE), ReceiptHandle=record["receiptHandle"], VisibilityTimeout=0)
        redeliveries = _receive(orders, order_id, 3)
        for record in redeliveries:
            orders.sqs.delete_message(QueueUrl=orders.url(QUEUE), ReceiptHandle=record["receiptHandle"])
    keyed = [
        (r, attempt(candidate, r, what="reservation_key", advice=f" for a record with body {r['body']}"))
        for r in deliveries + redeliveries
    ]
    of_first = [(r, k) for r, k in keyed if json.loads(r["body"]) == first]
    of_other = [(r, k) for r, k in keyed if json.loads(r["body"]) == other]
    keys_of_first = {k for _, k in of_first}
    if len(keys_of_first) != 1:
        ids = sorted({r["messageId"][:8] for r, _ in of_first})
        raise ExerciseFailed(
            f"one order line, sent twice (messages {', '.join(ids)}) and delivered twice each, got {len(keys_of_first)} "
            f"different keys: {sorted(keys_of_first)[:4]}. Each would reserve stock again"
        )
    if keys_of_first & {k for _, k in of_other}:
        raise ExerciseFailed(f"two different order lines got the same key {keys_of_first.pop()!r}: the second would never be reserved")
    return "a producer's retry and a redelivery get the line's own key, and another line gets another"


def _receive(orders: Orders, order_id: str, count: int, timeout: float = 30) -> list[dict]:
    """`count` messages of this order from the queue, as records shaped like Lambda's."""
    records, deadline = [], time.monotonic() + timeout
    arn = orders.stack["queue_arns"][QUEUE]
    while len(records) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(records)} of {count} messages came back from {QUEUE}")
        batch = orders.sqs.receive_message(
            QueueUrl=orders.url(QUEUE), MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=60,
            MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"],
        ).get("Messages", [])
        for message in batch:
            if json.loads(message["Body"]).get("order_id") == order_id:
                records.append(lambda_record(message, arn, orders.stack["region"]))
            else:  # someone else's line: leave it for its consumer
                orders.sqs.change_message_visibility(QueueUrl=orders.url(QUEUE), ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    return records

