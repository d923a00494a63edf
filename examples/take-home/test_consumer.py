"""Is each SQS consumer safe when a producer sends one order twice?

These pass: one asserts that the consumer keyed on the message id is NOT safe.
"""

import pytest
from conftest import new_order, shipments_for

from idemlab.testing import Crash, DuplicateEffectError, Queue


def test_consumer_keyed_on_the_order_ships_once(idemlab):
    idemlab.assert_exactly_once("consumer.by_order_id", new_order, shipments_for, rounds=10, queue=Queue())


def test_consumer_keyed_on_the_message_id_is_not_safe(idemlab):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once("consumer.by_message_id", new_order, shipments_for, rounds=10, queue=Queue())
    assert failure.value.report.doubled() == list(range(10))  # each order shipped twice


def test_consumer_keyed_on_the_order_ships_once_when_it_dies_after_shipping(idemlab):
    # The copy hangs right after ship() until the function's 5 s timeout stops it; the poller's
    # batch fails, and its messages come back after the visibility timeout (the function's timeout).
    crash = Crash.after("consumer.ship", how="timeout")
    idemlab.assert_exactly_once(
        "consumer.by_order_id", new_order, shipments_for, rounds=3, queue=Queue(), crash=crash, timeout=5
    )
