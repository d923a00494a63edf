"""Lesson 6 exercise (notebook 06): ``reservation_key(record)``, the key under which the stock
reservation of one record of Lambda's SQS event is made once. ``exercise(stack).check(reservation_key)``
sends real order lines, a producer's retry included, to the deployed ``orders_by_message_id``
queue (its consumer paused), receives them twice as Lambda would, and checks the keys.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

from idemlab import lessons
from idemlab.embedded.sqs_event_source import lambda_record
from idemlab.exercises import Exercise, attempt, expect
from idemlab.lessons.queues import Orders, line

QUEUE = "orders_by_message_id"

HINT = """\
What stays the same when the producer sends the same order line again, and when SQS
delivers the same message again? Not the messageId (each SendMessage gets a new one),
not the receiptHandle or ApproximateReceiveCount (each delivery gets new ones). The
order line itself says which reservation it is: parse record["body"] with json.loads
and build the key from its order_id and line number."""


def reservation_key(record: dict) -> str:
    order_line = json.loads(record["body"])
    # The business key: the same order line is the same reservation, whichever message carried it.
    return f"{order_line['order_id']}#{order_line['line']}"


def verify(candidate: Callable[[dict], str], stack: dict) -> str:
    orders = Orders(stack)
    order_id = f"exercise-{uuid.uuid4().hex[:8]}"
    first = line(order_id, "sku-exercise", number=1)
    other = line(order_id, "sku-exercise", number=2)
    with orders.paused(QUEUE):
        orders.send(QUEUE, first, first, other)  # the second send is the producer's retry
        deliveries = _receive(orders, order_id, 3)
        # Lambda did not delete them (say the batch failed): they are delivered again.
        orders.release(QUEUE, [record["receiptHandle"] for record in deliveries])
        redeliveries = _receive(orders, order_id, 3)
        for record in redeliveries:
            orders.sqs.delete_message(QueueUrl=orders.url(QUEUE), ReceiptHandle=record["receiptHandle"])
    records = deliveries + redeliveries
    keys = [
        attempt(candidate, r, what="reservation_key", advice=f" for a record with body {r['body']}") for r in records
    ]
    keyed = [(json.loads(r["body"]), r["messageId"], key) for r, key in zip(records, keys, strict=True)]
    keys_of_first = {key for body, _, key in keyed if body == first}
    ids = ", ".join(sorted({message_id[:8] for body, message_id, _ in keyed if body == first}))
    expect(
        len(keys_of_first) == 1,
        f"one order line, sent twice (messages {ids}) and delivered twice each, got "
        f"{len(keys_of_first)} different keys: {sorted(keys_of_first)[:4]}. Each would reserve stock again",
    )
    (key,) = keys_of_first
    expect(
        key not in {key for body, _, key in keyed if body == other},
        f"two different order lines got the same key {key!r}: the second would never be reserved",
    )
    return "a producer's retry and a redelivery get the line's own key, and another line gets another"


exercise = Exercise("Key a queue consumer's side effect on the business operation", HINT, reservation_key, verify)


def _receive(orders: Orders, order_id: str, count: int, timeout: float = 30) -> list[dict]:
    """`count` messages of this order from the queue, as records shaped like Lambda's."""
    records: list[dict] = []

    def more() -> bool:
        for message in orders.receive(QUEUE, wait_seconds=1, visibility=60):
            if json.loads(message["Body"]).get("order_id") == order_id:
                records.append(lambda_record(message, orders.stack["queue_arns"][QUEUE], orders.stack["region"]))
            else:  # someone else's line: leave it for its consumer
                orders.release(QUEUE, [message["ReceiptHandle"]])
        return len(records) >= count

    lessons.poll(more, timeout, every=0, what=f"{count} messages of {order_id} back from {QUEUE}")
    return records
