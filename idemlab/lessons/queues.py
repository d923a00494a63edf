"""Lesson 6 plumbing (notebook 06): send order lines to the order queues, count reservations, draw them.

A reservation is counted in the `reservations` table (one row per reservation a consumer made),
never taken from what a consumer says about itself. Which consumer reads which queue is
``var.event_sources`` (terraform/modules/idempotency_lab/variables.tf).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from boto3.dynamodb.conditions import Attr

from idemlab import lambda_code, lessons, settings
from idemlab.clients import client

# How long to wait for Lambda to pause or resume a mapping. On AWS a mapping can take
# a while to reach Disabled; the embedded backend gets there within a long poll (1 s).
STATE_CHANGE_SECONDS = 120
UNITS_BOOKED_IN = 1000  # plenty: the lesson is about duplicates, not running out

# The order line and its business key, as the producer and the consumers define them.
fulfilment_orders = lambda_code.load(settings.ROOT / "functions" / "queues", "fulfilment.orders")


def line(order_id: str, sku: str, number: int = 1) -> dict:
    """An order line (of one unit), as the producer sends it."""
    return fulfilment_orders.OrderLine(order_id, number, sku, 1).as_dict()


def business_key(order_line: dict) -> str:
    """One reservation per order line, whichever message carried it."""
    return fulfilment_orders.parse(order_line).business_key


def reserved_key(row: dict) -> str:
    """The business key of a reservation row (its numbers come back from DynamoDB as Decimal,
    which the strict order-line parser rightly refuses)."""
    return fulfilment_orders.OrderLine(row["order_id"], int(row["line"]), row["sku"], int(row["quantity"])).business_key


@dataclass
class Scenario:
    """One run of an experiment: its own order ids and SKUs, and what was seen when."""

    name: str
    started: float = field(default_factory=time.time)
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (time, business key, what)

    def __post_init__(self):
        self.prefix = f"{self.name}-{uuid.uuid4().hex[:8]}"

    def order_id(self, n: int = 0) -> str:
        return f"{self.prefix}-o{n}"

    def sku(self, name: str = "mug") -> str:
        return f"{self.prefix}-{name}"

    def owns(self, order_line: dict) -> bool:
        """Whether the line is one of this scenario's (a queue may hold an earlier run's too)."""
        return order_line["order_id"].startswith(self.prefix + "-")

    def note(self, order_line: dict, what: str) -> None:
        self.events.append((time.time(), business_key(order_line), what))


class Orders(lessons.Deployment):
    """The deployed order queues, their consumers and the stock they reserve."""

    def __init__(self, stack: dict):
        super().__init__(stack)
        self.sqs = client("sqs")

    def book_in(self, sku: str, units: int = UNITS_BOOKED_IN) -> None:
        """Make `sku` reservable: until then every line for it fails (StockUnavailableError)."""
        self.table("stock").put_item(Item={"sku": sku, "available": units})

    def reservation_rows(self, scenario: Scenario) -> list[dict]:
        """Every reservation made for the scenario's orders, oldest first."""
        mine = Attr("order_id").begins_with(scenario.prefix + "-")
        rows = (
            {
                "key": reserved_key(item),
                "at": float(item["reserved_at"]),
                "consumer": item["consumer"],
                "receive_count": int(item["receive_count"]),
                "message_id": item["message_id"],
            }
            for item in lessons.scan(self.stack["tables"]["reservations"], FilterExpression=mine)
        )
        return sorted(rows, key=lambda row: row["at"])

    def reservations(self, scenario: Scenario) -> Counter:
        """Reservations per business key (order id # line)."""
        return Counter(row["key"] for row in self.reservation_rows(scenario))

    def url(self, queue: str) -> str:
        return self.stack["queues"][queue]

    def send(self, queue: str, *order_lines: dict, group: str | None = None) -> list[str]:
        """One SendMessage per line, as a producer does; returns the message ids SQS gave."""
        answers = []
        for order_line in order_lines:
            fifo = {"MessageGroupId": group or order_line["order_id"]} if queue.endswith("fifo") else {}
            answers.append(self.sqs.send_message(QueueUrl=self.url(queue), MessageBody=json.dumps(order_line), **fifo))
        return [answer["MessageId"] for answer in answers]

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

    def receive(self, queue: str, wait_seconds: int = 0, visibility: int = 30) -> list[dict]:
        """One ReceiveMessage (up to 10 messages, hidden for ``visibility`` s), with every attribute."""
        return self.sqs.receive_message(
            QueueUrl=self.url(queue),
            MaxNumberOfMessages=10,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=visibility,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])

    def release(self, queue: str, receipt_handles: list[str]) -> None:
        """Make received messages visible again at once."""
        for handle in receipt_handles:
            self.sqs.change_message_visibility(QueueUrl=self.url(queue), ReceiptHandle=handle, VisibilityTimeout=0)

    def _receive_all(self, queue: str) -> list[dict]:
        """Every message on the queue now, received (hidden for 30 s) batch after batch."""
        messages = []
        while batch := self.receive(queue):
            messages += batch
        return messages

    def peek(self, queue: str) -> list[dict]:
        """The order lines waiting on a queue (received and made visible again at once)."""
        messages = self._receive_all(queue)
        self.release(queue, [message["ReceiptHandle"] for message in messages])
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

    def mapping(self, queue: str) -> dict:
        arn = self.stack["queue_arns"][queue]
        mappings = self.lambda_.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"]
        if len(mappings) != 1:
            raise RuntimeError(
                f"expected one event source mapping on {queue}, found {len(mappings)}; is the stack deployed?"
            )
        return mappings[0]

    @contextmanager
    def paused(self, queue: str):
        """Stop the queue's consumer while the body sends, so the messages wait together.

        Lambda then reads them in as few batches as it can. On AWS it may still split
        them across batches (it runs several pollers); the counts say what happened.
        """
        mapping = self.mapping(queue)
        uuid_ = mapping["UUID"]
        self._set_state(uuid_, enabled=False)
        # A poll that started before the mapping turned Disabled may still be waiting, and takes
        # what arrives meanwhile: LocalStack 4.14.0 says Disabled at once while its poller ends a
        # long poll of up to the batching window (lambda_/event_source_mapping/pollers/
        # sqs_poller.py, lines 152-153). Nothing shows that poll from outside, so the body waits
        # out its longest possible wait: the mapping's own window, and a second for its answer.
        time.sleep(mapping.get("MaximumBatchingWindowInSeconds", 0) + 1)
        try:
            yield
        finally:
            self._set_state(uuid_, enabled=True)

    def _set_state(self, uuid_: str, enabled: bool) -> None:
        """Ask for the mapping to be Enabled or Disabled, and wait until it says so.

        A mapping passes through Enabling or Disabling: it is asked again only when it
        rests in the other state (a request made while it changes is refused).
        Raises TimeoutError naming the last state seen.
        """
        wanted = "Enabled" if enabled else "Disabled"
        deadline = time.monotonic() + STATE_CHANGE_SECONDS
        while True:
            state = self.lambda_.get_event_source_mapping(UUID=uuid_)["State"]
            if state == wanted:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"event source mapping {uuid_}: still {state} after {STATE_CHANGE_SECONDS} s, wanted {wanted}"
                )
            if state in ("Enabled", "Disabled"):
                self.lambda_.update_event_source_mapping(UUID=uuid_, Enabled=enabled)
            time.sleep(0.2)

    def wait_until(self, condition, timeout: float, what: str):
        """Poll `condition` until it returns something true; TimeoutError names `what`."""
        return lessons.poll(condition, timeout, every=0.25, what=what)

    def _attribute(self, queue: str, name: str) -> str:
        return self.sqs.get_queue_attributes(QueueUrl=self.url(queue), AttributeNames=[name])["Attributes"][name]

    def visibility_timeout(self, queue: str) -> int:
        return int(self._attribute(queue, "VisibilityTimeout"))

    def max_receive_count(self, queue: str) -> int:
        return int(json.loads(self._attribute(queue, "RedrivePolicy"))["maxReceiveCount"])


def draw_timeline(orders: Orders, scenario: Scenario, title: str | None = None):
    """One row per order line: a dot per reservation (labelled with the delivery's
    ApproximateReceiveCount), and a cross per event the lesson noted (DLQ, redrive)."""
    marks = [(row["at"], row["key"], f"#{row['receive_count']}", True) for row in orders.reservation_rows(scenario)]
    marks = [
        (at - scenario.started, key.removeprefix(scenario.prefix + "-"), label, outcome)
        for at, key, label, outcome in marks + [(at, key, what, False) for at, key, what in scenario.events]
    ]
    xlabel = "seconds since the first send (dots: reservations, #n: the delivery's receive count)"
    axes, _ = lessons.draw_lanes(marks, xlabel, title or scenario.name, lanes=sorted({m[1] for m in marks}), width=8)
    axes.grid(axis="x", alpha=0.3)
    axes.figure.tight_layout()
    return axes.figure
