"""Lesson 7: the keyed checkout's traps, and the exercise's answer key, on the deployed stack."""

from __future__ import annotations

import time

import pytest

from idemlab.exercises import ExerciseFailed, lesson7
from idemlab.lessons import traps

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def ex(stack):
    return lesson7.exercise(stack)


@pytest.fixture
def shop(stack):
    checkouts = traps.KeyedCheckouts(stack)
    yield checkouts
    checkouts.remove()


@pytest.mark.timeout(120)
def test_solution_passes_the_check(ex):
    assert "charged once" in ex.check(lesson7.key_and_lifetime)


@pytest.mark.timeout(120)
def test_powertools_defaults_charge_a_retry_with_a_new_trace_id(ex):
    with pytest.raises(ExerciseFailed, match="after a retry of the order .*: 2 charges"):
        ex.check(lesson7.defaults)


@pytest.mark.timeout(120)
def test_a_key_without_the_order_answers_the_next_order_with_the_first_charge(ex):
    def per_customer():
        return {"event_key_jmespath": "body.customer_id", "expires_after_seconds": 20 * 24 * 3600}

    with pytest.raises(ExerciseFailed, match="after another order .*: 0 charges"):
        ex.check(per_customer)


@pytest.mark.timeout(120)
def test_a_good_key_living_one_day_charges_the_redrive_again(ex):
    def one_day():
        return {"event_key_jmespath": 'headers."Idempotency-Key"', "expires_after_seconds": 24 * 3600}

    with pytest.raises(ExerciseFailed, match="redriven on day 14 .*: 2 charges"):
        ex.check(one_day)


@pytest.mark.timeout(60)
def test_expired_record_charges_a_redelivery_unless_the_key_goes_downstream(shop):
    short = traps.Variant("t-short", traps.SERVER_KEY, expires_after_seconds=2)
    downstream = traps.Variant("t-short-ds", traps.SERVER_KEY, expires_after_seconds=2, pass_key_downstream=True)
    counts = {}
    for variant in (short, downstream):
        shop.deploy(variant)
        order_id = traps.new_order_id("t-expiry")
        first = traps.delivery(order_id)
        shop.send(variant, first)
        assert shop.send(variant, traps.retry_of(first))["outcome"] == "replayed"
        time.sleep(3.5)  # past the 2-second record: Powertools treats it as expired at once
        shop.send(variant, traps.retry_of(first))
        counts[variant.name] = shop.charges(order_id)
    assert counts == {"t-short": 2, "t-short-ds": 1}
