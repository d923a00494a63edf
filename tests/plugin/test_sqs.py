"""Delivery through an SQS queue and Lambda's event source mapping (the embedded backend's
poller: batches, visibility timeouts, ReportBatchItemFailures), with the same per-round report.

The consumer ships an order once per message it does not recognise. Keyed on the message
id it ships twice when a producer sends one order twice (two messages, two ids); keyed on
the order id it ships once.
"""

from __future__ import annotations

import textwrap

import pytest

from idemlab.testing import Crash, CrashNotReached, DeliveryError, DuplicateEffectError, Handler, Queue

CONSUMER = """
import json
import os

import boto3

effects = boto3.resource("dynamodb").Table(os.environ["EFFECTS_TABLE"])


def ship(order_id, message_id):
    effects.put_item(Item={"pk": f"shipment#{order_id}#{message_id}", "order": order_id})


def claim(key):
    try:
        effects.put_item(Item={"pk": f"claim#{key}", "order": "-"}, ConditionExpression="attribute_not_exists(pk)")
    except effects.meta.client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def by_message_id(event, context):
    for record in event["Records"]:
        if claim(record["messageId"]):
            ship(json.loads(record["body"])["order_id"], record["messageId"])


def by_order_id(event, context):
    for record in event["Records"]:
        order_id = json.loads(record["body"])["order_id"]
        if claim(order_id):
            ship(order_id, record["messageId"])


def ships_then_remembers(event, context):
    # Each call ships again, as a real carrier's API would: the receive count keeps the shipments apart.
    for record in event["Records"]:
        order_id = json.loads(record["body"])["order_id"]
        if "Item" not in effects.get_item(Key={"pk": f"done#{order_id}"}, ConsistentRead=True):
            ship(order_id, f"{record['messageId']}#{record['attributes']['ApproximateReceiveCount']}")
            effects.put_item(Item={"pk": f"done#{order_id}", "order": "-"})


def ships_then_reports_a_failure_once(event, context):
    failures = []
    for record in event["Records"]:
        ship(json.loads(record["body"])["order_id"], f"{record['messageId']}#{record['attributes']['ApproximateReceiveCount']}")
        if record["attributes"]["ApproximateReceiveCount"] == "1":
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
"""


@pytest.fixture(scope="module")
def code(tmp_path_factory):
    root = tmp_path_factory.mktemp("consumer-code")
    (root / "consumer.py").write_text(textwrap.dedent(CONSUMER))
    return root


@pytest.fixture
def shipments(idemlab):
    table = idemlab.make_table("sqs-effects")
    idemlab.environment["EFFECTS_TABLE"] = table.name

    def count(event) -> int:
        return sum(1 for item in table.scan(ConsistentRead=True)["Items"] if item["order"] == event["order_id"])

    return count


def orders(number: int) -> dict:
    return {"order_id": f"order-{number}"}


@pytest.mark.parametrize("queue", [Queue(), Queue(fifo=True)], ids=["standard", "fifo"])
def test_a_consumer_keyed_on_the_message_id_ships_twice_when_one_order_is_sent_twice(idemlab, code, shipments, queue):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(
            Handler.module("consumer.by_message_id", code_root=code), orders, shipments, rounds=3, queue=queue
        )
    message = str(failure.value)
    assert failure.value.report.doubled() == [0, 1, 2]
    kind = "a FIFO" if queue.fifo else "a standard"
    assert f"MORE than once in 3 of 3 rounds (2 copies of each event sent as messages to {kind} SQS queue)" in message
    assert "A record keyed on the message id" in message
    assert "message " in message and ": handled (the queue was empty when answered)" in message


@pytest.mark.parametrize("queue", [Queue(), Queue(fifo=True)], ids=["standard", "fifo"])
def test_a_consumer_keyed_on_the_order_id_ships_once(idemlab, code, shipments, queue):
    report = idemlab.assert_exactly_once(
        Handler.module("consumer.by_order_id", code_root=code), orders, shipments, rounds=3, queue=queue
    )
    assert report.passed


def test_a_message_listed_in_batch_item_failures_comes_back_after_the_visibility_timeout(idemlab, code, shipments):
    queue = Queue(report_batch_item_failures=True, visibility_timeout=2)
    handler = Handler.module("consumer.ships_then_reports_a_failure_once", code_root=code)
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(handler, orders, shipments, rounds=1, copies=1, queue=queue, timeout=2)
    assert failure.value.report.doubled() == [0]  # shipped on the first receive and again on the second


def test_bad_queue_options_are_refused():
    with pytest.raises(ValueError, match="batch_size"):
        Queue(batch_size=0)
    with pytest.raises(ValueError, match="visibility_timeout"):
        Queue(visibility_timeout=0)
    with pytest.raises(ValueError, match="max_receive_count"):
        Queue(max_receive_count=0)


POISON = """
def handler(event, context):
    raise ValueError("cannot parse this order")
"""


def test_a_poison_message_goes_to_the_dead_letter_queue_and_the_report_says_so(idemlab, tmp_path, shipments):
    (tmp_path / "poison.py").write_text(textwrap.dedent(POISON))
    queue = Queue(max_receive_count=2, visibility_timeout=1)
    handler = Handler.module("poison.handler", code_root=tmp_path)
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(handler, orders, shipments, rounds=1, copies=1, queue=queue, timeout=1)
    message = str(failure.value)
    assert message.startswith("poison.handler: every copy failed in 1 of 1 rounds")
    assert "MovedToDeadLetterQueue: the handler failed it 2 times; SQS moved it to the dead-letter queue" in message


# A crash in a queue's delivery: the invocation fails, so the poller leaves the batch's messages;
# they come back after the visibility timeout (the function's timeout here: 5 s, room for a loaded runner)
# and are handled again.
CRASH_TIMEOUT = 5


@pytest.mark.parametrize("how", ["exit", "timeout"])
def test_a_consumer_that_dies_after_shipping_ships_again_when_the_message_comes_back(idemlab, code, shipments, how):
    handler = Handler.module("consumer.ships_then_remembers", code_root=code)
    crash = Crash.after("consumer.ship", how=how)
    try:
        passed = idemlab.assert_exactly_once(
            handler, orders, shipments, rounds=2, copies=1, queue=Queue(), crash=crash, timeout=CRASH_TIMEOUT
        )
    except DuplicateEffectError as failure:
        report, message = failure.report, str(failure)
    else:
        # Seen once in CI (a loaded runner), never reproduced since: the rounds' own story says why.
        pytest.fail(
            f"no round shipped twice; the report:\n{passed.message()}\n"
            + "\n".join(line for r in passed.rounds for line in r.delivery.timeline())
        )
    assert report.doubled() == [0, 1]
    assert [r.delivery.crashes for r in report.rounds] == [1, 1]
    assert "2 of 2 rounds (1 copy of each event sent as messages to a standard SQS queue)" in message
    assert f"CRASHED 1 time: the copy {'exits' if how == 'exit' else 'times out'} after consumer.ship" in message
    assert "its messages came back after the visibility timeout" in message
    assert "SQS made its message visible again after the visibility timeout" in message


def test_a_consumer_that_claims_the_order_first_ships_once_when_it_dies_after_shipping(idemlab, code, shipments):
    handler = Handler.module("consumer.by_order_id", code_root=code)
    crash = Crash.after("consumer.ship")
    report = idemlab.assert_exactly_once(
        handler, orders, shipments, rounds=2, copies=2, queue=Queue(), crash=crash, timeout=CRASH_TIMEOUT
    )
    assert report.passed
    assert [r.delivery.crashes for r in report.rounds] == [1, 1]


def test_a_consumer_that_dies_between_its_claim_and_shipping_loses_the_order(idemlab, code, shipments):
    handler = Handler.module("consumer.by_order_id", code_root=code)
    crash = Crash.after("consumer.claim")
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(
            handler, orders, shipments, rounds=1, copies=1, queue=Queue(), crash=crash, timeout=CRASH_TIMEOUT
        )
    assert failure.value.report.lost() == [0]
    assert "The effect was LOST: the copy exits after consumer.claim" in str(failure.value)


def test_a_crash_no_message_reaches_fails_the_test(idemlab, code, shipments):
    handler = Handler.module("consumer.by_order_id", code_root=code)
    crash = Crash.after("consumer.by_message_id")  # defined, but by_order_id never calls it
    with pytest.raises(CrashNotReached, match=r"no copy got after consumer\.by_message_id in round 0"):
        idemlab.assert_exactly_once(handler, orders, shipments, rounds=1, queue=Queue(), crash=crash)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["queue", "async"])
def test_a_crash_point_that_does_not_exist_fails_at_once_naming_it(idemlab, code, shipments, asynchronous):
    handler = Handler.module("consumer.by_order_id", code_root=code)
    crash = Crash.after("consumer.refund")  # a typo: consumer defines no refund
    options = {"asynchronous": True} if asynchronous else {"queue": Queue()}
    with pytest.raises(DeliveryError, match=r"refund") as failure:
        idemlab.assert_exactly_once(handler, orders, shipments, rounds=1, crash=crash, **options)
    assert "still in the queue" not in str(failure.value)
