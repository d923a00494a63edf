"""The lesson's SQS consumers explored through the take-home plugin (idemlab.testing): every
crash point and every interleaving of two copies of one message, in Lambda worker processes.

Exploring redelivers the same message (one message id), as a standard queue may and as a
failed batch comes back: the consumer keyed on the message id holds against that, and its
defect (a producer's second send is a new message) is the lesson's own test's to show.
"""

from __future__ import annotations

import json

import pytest

from idemlab import build, module_spec
from idemlab.embedded.sqs_event_source import one_message_event
from idemlab.lessons import queues
from idemlab.testing import DuplicateEffectError, Handler
from idemlab.testing.lab import REGION

CODE = build.FUNCTIONS_DIR / "queues"
CONSUMERS = ("fulfil_naive", "fulfil_idempotent", "fulfil_by_message_id")
QUEUE_ARN = f"arn:aws:sqs:{REGION}:000000000000:orders"
SKU = "sku-explored"
# Longer than the lesson's 2 s: a copy scheduled to time out at a point must reach it first,
# Powertools and all, on a loaded machine.
TIMEOUT_SECONDS = 6


@pytest.fixture
def reservations(idemlab):
    """The consumers' tables, the SKU in stock; counts an order line's reservations."""
    keys = module_spec.table_keys(*CONSUMERS)
    names = {key: idemlab.make_table(f"explore-{key}", key=hash_key).name for key, hash_key in keys.items()}
    for key in CONSUMERS:
        idemlab.environment.update(module_spec.environment(key, names))
    idemlab.client("dynamodb").put_item(
        TableName=names["stock"], Item={"sku": {"S": SKU}, "available": {"N": str(queues.UNITS_BOOKED_IN)}}
    )
    table = idemlab.client("dynamodb")

    def count(event) -> int:
        line = json.loads(event["Records"][0]["body"])
        rows = table.scan(TableName=names["reservations"], ConsistentRead=True)["Items"]
        return sum(1 for row in rows if row["order_id"]["S"] == line["order_id"])

    return count


def order_line(number: int) -> dict:
    return one_message_event(json.dumps(queues.line(f"explored-{number}", SKU)), QUEUE_ARN, REGION)


def consumer(key: str) -> Handler:
    return Handler.zip(build.zip_bytes(build.source_files(CODE)), f"{key}.handler")


def test_naive_consumer_reserves_again_when_the_message_comes_back(idemlab, reservations):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.explore(consumer("fulfil_naive"), order_line, reservations, timeout=TIMEOUT_SECONDS)
    report = failure.value.report
    print(report.message())
    assert report.failure.schedule.id == "twice"


def test_idempotent_consumer_reserves_once_in_every_schedule(idemlab, reservations):
    # Without the key on the reservation itself it failed at crash-exit-3: copy A died right
    # after reserving, the retry found A's in-progress record and failed, and the delivery
    # after that, once the record had expired with A's invocation, reserved again.
    report = idemlab.explore(consumer("fulfil_idempotent"), order_line, reservations, timeout=TIMEOUT_SECONDS)
    print(report.message())
    assert report.passed and len(report.runs) == report.planned
    assert any(len(run.copies) == 3 for run in report.runs), "no crashed schedule needed a late delivery"


def test_consumer_keyed_on_the_message_id_reserves_again_once_a_dead_copys_claim_expires(idemlab, reservations):
    # Its lesson's defect is a producer's second send (a new message id), which exploring one
    # message cannot show; what exploring shows is the gap the idempotent consumer closed by
    # handing its key on to the reservation: this one reserves without a key.
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.explore(consumer("fulfil_by_message_id"), order_line, reservations, timeout=TIMEOUT_SECONDS)
    report = failure.value.report
    print(report.message())
    assert report.failure.schedule.id == "crash-exit-3"
    assert [copy.name for copy in report.failure.copies] == ["A", "B", "C"]
