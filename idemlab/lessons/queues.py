"""Lesson 4 plumbing (notebook 06): send order lines to the order queues, count reservations, draw them.

A reservation is counted in the `reservations` table (one row per reservation a
consumer made), never taken from what a consumer says about itself.

Queues and their consumers (terraform/modules/idempotency_lab/queue_lesson.tf):
``orders_naive`` -> fulfil_naive, ``orders`` -> fulfil_idempotent,
``orders_by_message_id`` -> fulfil_by_message_id, ``orders_fifo`` -> fulfil_naive.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from idemlab import lessons, pictures
from idemlab.clients import client

# How long to wait for Lambda to pause or resume a mapping. On AWS a mapping can take
# a while to reach Disabled; the embedded backend gets there within a long poll (1 s).
STATE_CHANGE_SECONDS = 120
UNITS_BOOKED_IN = 1000  # plenty: the lesson is about duplicates, not running out


def line(order_id: str, sku: str, number: int = 1, quantity: int = 1) -> dict:
    """An order line, as the producer sends it (functions/order_fulfilment/fulfilment/orders.py)."""
    return {"order_id": order_id, "line": number, "sku": sku, "quantity": quantity}


def business_key(order_line: dict) -> str:
    return f"{order_line['order_id']}#{order_line['line']}"


@dataclass
class Scenario:
    """One run of an experiment: its own order ids and SKUs, and what was seen when."""

    name: str
    prefix: str = ""
    started: float = field(default_factory=time.time)
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (time, business key, what)

    def __post_init__(self):
        self.prefix = self.prefix or f"{self.name}-{uuid.uuid4().hex[:8]}"

    def order_id(self, n: int = 0) -> str:
        return f"{self.prefix}-o{n}"

    def sku(self, name: str = "mug") -> str:
        return f"{self.prefix}-{name}"

    def owns(self, order_line: dict) -> bool:
        """Whether the line is one of this scenario's (a queue may hold an earlier run's too)."""
        return order_line["order_id"].startswith(self.prefix + "-")

    def note(self, order_line: dict, what: str) -> None:
        self.events.append((time.time(), business_key(order_line), what))


class Orders:
    """The deployed order queues, their consumers and the stock they reserve."""

    def __init__(self, stack: dict):
        self.stack = stack
        self.sqs = client("sqs")
        self.dynamodb = client("dynamodb")
        self.lambda_ = client("lambda")

    # -- the warehouse -----------------------------------------------------------------

    def book_in(self, sku: str, units: int = UNITS_BOOKED_IN) -> None:
        """Make `sku` reservable: until then every line for it fails (StockUnavailable)."""
        self.dynamodb.put_item(TableName=self.stack["tables"]["stock"], Item={"sku": {"S": sku}, "available": {"N": str(units)}})

    def reservation_rows(self, scenario: Scenario) -> list[dict]:
        """Every reservation made for the scenario's orders, oldest first."""
        pages = self.dynamodb.get_paginator("scan").paginate(
            TableName=self.stack["tables"]["reservations"],
            FilterExpression="begins_with(order_id, :prefix)",
            ExpressionAttributeValues={":prefix": {"S": scenario.prefix + "-"}},
            ConsistentRead=True,
        )
        rows = [
            {
                "key": f"{item['order_id']['S']}#{item['line']['N']}",
                "at": float(item["reserved_at"]["N"]),
                "receive_count": int(item["receive_count"]["N"]),
                "message_id": item["message_id"]["S"],
                "consumer": item["consumer"]["S"],
            }
            for page in pages
            for item in page["Items"]
        ]
        return sorted(rows, key=lambda row: row["at"])

    def reservations(self, scenario: Scenario) -> Counter:
        """Reservations per business key (order id # line)."""
        return Counter(row["key"] for row in self.reservation_rows(scenario))

    # -- the queues --------------------------------------------------------------------

    def url(self, queue: str) -> str:
        return self.stack["queues"][queue]

    def send(self, queue: str, *order_lines: dict, group: str | None = None) -> list[str]:
        """One SendMessage per line, as a producer does; returns the message ids SQS gave."""
        ids = []
        for order_line in order_lines:
            extra = {"MessageGroupId": group or order_line["order_id"]} if queue.endswith("fifo") else {}
            ids.append(self.sqs.send_message(QueueUrl=self.url(queue), MessageBody=json.dumps(order_line), **extra)["MessageId"])
        return ids

    def depth(self, queue: str) -> int:
        """Messages on the queue, visible or in flight."""
        return lessons.queue_depth(self.url(queue), self.sqs)

    def depths(self) -> dict[str, int]:
        """Every queue's depth now: a mark to count what arrives after it.

        A stack outlives a run: a DLQ may still hold an earlier run's dead letters (a
        learner who runs the notebook twice, or the tests after the notebook), so a
        lesson counts arrivals since its mark, never a queue's absolute depth.
        """
        return {queue: self.depth(queue) for queue in self.stack["queues"]}

    def arrived(self, queue: str, mark: dict[str, int]) -> int:
        """Messages on `queue` now beyond what it held at `mark` (from `depths()`)."""
        return self.depth(queue) - mark[queue]

    def _receive_all(self, queue: str) -> list[dict]:
        """Every message on the queue now, received (hidden for 30 s) batch after batch."""
        messages, receive = [], {"QueueUrl": self.url(queue), "MaxNumberOfMessages": 10, "VisibilityTimeout": 30}
        while batch := self.sqs.receive_message(**receive).get("Messages"):
            messages += batch
        return messages

    def peek(self, queue: str) -> list[dict]:
        """The order lines waiting on a queue (received and made visible again at once)."""
        messages = self._receive_all(queue)
        for handle in (message["ReceiptHandle"] for message in messages):
            self.sqs.change_message_visibility(QueueUrl=self.url(queue), ReceiptHandle=handle, VisibilityTimeout=0)
        return [json.loads(message["Body"]) for message in messages]

    def redrive(self, dead_letter_queue: str, queue: str) -> list[dict]:
        """Move every message of a dead-letter queue back to its source queue.

        What SQS's StartMessageMoveTask does on AWS and LocalStack; the embedded backend
        (moto) does not implement it, so the lab moves them itself on every backend: each
        message is sent again (a new messageId) and deleted only once the send succeeded.
        Returns the order lines moved: every dead letter, an earlier run's included.
        """
        moved = self._receive_all(dead_letter_queue)
        for message in moved:
            self.sqs.send_message(QueueUrl=self.url(queue), MessageBody=message["Body"])
            self.sqs.delete_message(QueueUrl=self.url(dead_letter_queue), ReceiptHandle=message["ReceiptHandle"])
        return [json.loads(message["Body"]) for message in moved]

    # -- the consumers -----------------------------------------------------------------

    def mapping(self, queue: str) -> dict:
        arn = self.stack["queue_arns"][queue]
        mappings = self.lambda_.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"]
        if len(mappings) != 1:
            raise RuntimeError(f"expected one event source mapping on {queue}, found {len(mappings)}; is the stack deployed?")
        return mappings[0]

    @contextmanager
    def paused(self, queue: str):
        """Stop the queue's consumer while the body sends, so the messages wait together.

        Lambda then reads them in as few batches as it can. On AWS it may still split
        them across batches (it runs several pollers); the counts say what happened.
        """
        uuid_ = self.mapping(queue)["UUID"]
        self._set_state(uuid_, enabled=False)
        try:
            yield
        finally:
            self._set_state(uuid_, enabled=True)

    def _set_state(self, uuid_: str, enabled: bool) -> None:
        wanted = "Enabled" if enabled else "Disabled"
        deadline = time.monotonic() + STATE_CHANGE_SECONDS
        while True:
            state = self.lambda_.get_event_source_mapping(UUID=uuid_)["State"]
            if state == wanted:
                return
            if state in ("Enabled", "Disabled"):  # not already changing: ask
                self.lambda_.update_event_source_mapping(UUID=uuid_, Enabled=enabled)
            if time.monotonic() > deadline:
                raise TimeoutError(f"mapping {uuid_} is still {state}, not {wanted}, after {STATE_CHANGE_SECONDS} s")
            time.sleep(0.2)

    def wait_until(self, condition, timeout: float, what: str):
        """Poll `condition` until it returns something true; TimeoutError names `what`."""
        if value := lessons.poll(condition, timeout, every=0.25):
            return value
        raise TimeoutError(f"{what}: not seen within {timeout:.0f} s")

    def visibility_timeout(self, queue: str) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url(queue), AttributeNames=["VisibilityTimeout"])["Attributes"]
        return int(attributes["VisibilityTimeout"])

    def max_receive_count(self, queue: str) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url(queue), AttributeNames=["RedrivePolicy"])["Attributes"]
        return int(json.loads(attributes["RedrivePolicy"])["maxReceiveCount"])


def draw_timeline(orders: Orders, scenario: Scenario, title: str | None = None):
    """One row per order line: a dot per reservation (labelled with the delivery's
    ApproximateReceiveCount), and the events the lesson noted (DLQ, redrive)."""
    rows = orders.reservation_rows(scenario)
    keys = sorted({row["key"] for row in rows} | {key for _, key, _ in scenario.events})
    y = {key: i for i, key in enumerate(keys)}
    axes = pictures.axes(None, 8, 0.6 + 0.5 * max(1, len(keys)))
    for row in rows:
        x = row["at"] - scenario.started
        axes.scatter(x, y[row["key"]], color="tab:blue", zorder=3)
        axes.annotate(f"#{row['receive_count']}", (x, y[row["key"]]), textcoords="offset points", xytext=(4, 6), fontsize=8)
    for at, key, what in scenario.events:
        axes.scatter(at - scenario.started, y[key], marker="x", color="tab:red", zorder=3)
        axes.annotate(what, (at - scenario.started, y[key]), textcoords="offset points", xytext=(4, -12), fontsize=8, color="tab:red")
    pictures.lanes(
        axes, [key.removeprefix(scenario.prefix + "-") for key in keys],
        "seconds since the first send (dots: reservations, #n: the delivery's receive count)", title or scenario.name,
    )
    axes.grid(axis="x", alpha=0.3)
    axes.figure.tight_layout()
    return axes.figure
