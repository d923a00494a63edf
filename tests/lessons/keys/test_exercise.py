"""Lesson 7: the keyed checkout's traps, and the exercise's answer key, on the deployed stack."""

from __future__ import annotations

import time

import pytest

from idemlab.exercises import ExerciseFailed
from idemlab.exercises import keys as exercises
from idemlab.lessons import keys
from support.notebook_cells import starting_point

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def ex(stack):
    return exercises.exercise(stack)


@pytest.fixture
def shop(stack):
    checkouts = keys.KeyedCheckouts(stack)
    yield checkouts
    checkouts.remove()


@pytest.mark.timeout(120)
def test_solution_passes_the_check(ex):
    assert "charged once" in ex.check(exercises.key_and_lifetime)


# How late the redrive's invocation may reach Powertools' claim on a loaded machine: on
# LocalStack in a loaded CI run the answer key's redrive, a day (one second) short of its
# record's expiry, charged again.
LATE_REDRIVE_SECONDS = 2.0


@pytest.mark.timeout(120)
def test_solution_passes_even_when_the_redrive_reaches_the_function_late(ex, monkeypatch):
    real_sleep = time.sleep
    monkeypatch.setattr(exercises.time, "sleep", lambda seconds: real_sleep(seconds + LATE_REDRIVE_SECONDS))
    assert "charged once" in ex.check(exercises.key_and_lifetime)


@pytest.mark.timeout(120)
def test_powertools_defaults_charge_a_retry_with_a_new_trace_id(ex):
    with pytest.raises(ExerciseFailed, match=r"after a retry of the order .*: 2 charges"):
        ex.check(starting_point("07_keys.ipynb", "key_and_lifetime"))


@pytest.mark.timeout(120)
def test_a_key_without_the_order_answers_the_next_order_with_the_first_charge(ex):
    def per_customer():
        return {"event_key_jmespath": "body.customer_id", "expires_after_seconds": 20 * 24 * 3600}

    with pytest.raises(ExerciseFailed, match=r"after another order .*: 0 charges"):
        ex.check(per_customer)


@pytest.mark.timeout(120)
def test_a_good_key_living_one_day_charges_the_redrive_again(ex):
    def one_day():
        return {"event_key_jmespath": 'headers."Idempotency-Key"', "expires_after_seconds": 24 * 3600}

    with pytest.raises(ExerciseFailed, match=rf"redriven on day {exercises.REDRIVE_AFTER_DAYS} .*: 2 charges"):
        ex.check(one_day)


@pytest.mark.timeout(60)
def test_expired_record_charges_a_redelivery_unless_the_key_goes_downstream(shop):
    short = keys.Variant("t-short", keys.SERVER_KEY, expires_after_seconds=3)
    downstream = keys.Variant("t-short-ds", keys.SERVER_KEY, expires_after_seconds=3, pass_key_downstream=True)
    counts = {}
    for variant in (short, downstream):
        shop.deploy(variant)
        order_id = keys.new_order_id("t-expiry")
        first = keys.delivery(order_id)
        shop.send(variant, first)
        assert shop.send(variant, keys.retry_of(first))["outcome"] == "replayed"
        time.sleep(4.5)  # past the 3-second record: Powertools treats it as expired at once
        shop.send(variant, keys.retry_of(first))
        counts[variant.name] = shop.charges(order_id)
    assert counts == {"t-short": 2, "t-short-ds": 1}


@pytest.mark.timeout(120)
def test_a_record_shorter_than_the_whole_horizon_fails_though_the_redrive_came_in_time(ex):
    # Thirteen and a half days: alive at the day-13 redrive, yet short of the 14-day horizon.
    def thirteen_and_a_half_days():
        return {
            "event_key_jmespath": exercises.key_and_lifetime()["event_key_jmespath"],
            "expires_after_seconds": 27 * 12 * 3600,
        }

    with pytest.raises(ExerciseFailed, match="can come back for 14 days after its first send"):
        ex.check(thirteen_and_a_half_days)


@pytest.fixture(scope="module")
def downstream(stack):
    return exercises.downstream_exercise(stack)


@pytest.mark.timeout(120)
def test_handler_with_the_downstream_key_passes_deployed(downstream):
    assert "charged once" in downstream.check(exercises.charge_with_downstream_key)


@pytest.mark.timeout(120)
def test_handler_without_a_key_charges_copies_sent_together(downstream):
    with pytest.raises(ExerciseFailed, match=r"after 4 copies of one delivery sent together: [2-4] charges"):
        downstream.check(starting_point("07_keys.ipynb", "charge"))


@pytest.mark.timeout(120)
def test_handler_keyed_on_the_trace_id_charges_the_retry(downstream):
    def keyed_on_trace(event, context):
        import json
        import os

        import boto3

        body = event["body"]
        call = {"reference": body["order_id"], "amount": body["amount"], "currency": body["currency"]}
        call["idempotency_key"] = event["headers"]["X-Amzn-Trace-Id"]
        answer = boto3.client("lambda").invoke(
            FunctionName=os.environ["CARD_PROCESSOR_FUNCTION"], Payload=json.dumps(call)
        )
        return json.loads(answer["Payload"].read())

    with pytest.raises(ExerciseFailed, match="after a retry with a new X-Amzn-Trace-Id: 2 charges"):
        downstream.check(keyed_on_trace)


@pytest.mark.timeout(120)
def test_handler_that_crashes_is_reported_as_failing_in_lambda(downstream):
    def broken(event, context):
        raise KeyError("body")

    with pytest.raises(ExerciseFailed, match=r"your handler failed in Lambda: .*KeyError"):
        downstream.check(broken)
