"""Lesson 7: bad input is refused with a clear message before anything is deployed or charged."""

from __future__ import annotations

import pytest

from idemlab.exercises import ExerciseFailed
from idemlab.exercises import keys as exercises
from support.checkout_in_process import InvocationContext, import_handler


@pytest.mark.parametrize(
    "chosen, message",
    [
        ({"event_key_jmespath": "body.[order_id", "expires_after_seconds": 60}, "is not a JMESPath expression"),
        ({"event_key_jmespath": "body.order_id", "expires_after_seconds": "15 days"}, "whole number of seconds"),
        ({"event_key_jmespath": "body.order_id", "expires_after_seconds": -1}, "whole number of seconds"),
        ({"event_key_jmespath": 42, "expires_after_seconds": 60}, "must be a string"),
        ({"event_key_jmespath": "body.order_id"}, "return a dict with event_key_jmespath and expires_after_seconds"),
    ],
)
def test_exercise_refuses_settings_it_cannot_deploy(chosen, message):
    # An empty stack: the settings are refused before any function is created.
    with pytest.raises(ExerciseFailed, match=message):
        exercises.verify(lambda: chosen, stack={})


def test_an_exercise_not_bound_to_a_stack_says_how_to_bind_it():
    with pytest.raises(TypeError, match=r"ex = exercise\(stack\)"):
        exercises.exercise.check(exercises.key_and_lifetime)


def test_downstream_exercise_needs_readable_source():
    with pytest.raises(ExerciseFailed, match="cannot read the source"):
        exercises.handler_zip(len)


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv("POWERTOOLS_IDEMPOTENCY_TABLE", "not-used")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return import_handler("checkout_keyed")


@pytest.mark.parametrize(
    "event, message",
    [
        ("order-1", "a JSON object with a 'body' object"),
        ({"headers": {}}, "a JSON object with a 'body' object"),
        ({"body": {"order_id": "o-1", "customer_id": "c-1", "amount": 5}}, "missing field"),
        (
            {"body": {"order_id": "o-1", "customer_id": "c-1", "amount": 5, "currency": "EUR", "tip": 1}},
            "unknown body field",
        ),
        ({"body": {"order_id": "o-1", "customer_id": " ", "amount": 5, "currency": "EUR"}}, "customer_id must be"),
        (
            {"body": {"order_id": "o-1", "customer_id": "c-1", "amount": 0, "currency": "EUR"}},
            "amount must be greater than zero",
        ),
    ],
)
def test_keyed_checkout_refuses_a_malformed_delivery(keyed, event, message):
    answer = keyed.handler(event, InvocationContext(5))
    assert answer["outcome"] == "rejected"
    assert message in answer["error"]["message"]
    assert answer["trace"] == []  # refused before any step: nothing claimed, nothing charged
