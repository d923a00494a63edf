"""Checkout request validation: one place decides what a valid charge request is."""

from __future__ import annotations

import pytest

from idemlab.lambda_code import load
from idemlab.lessons.checkout import FUNCTION_DIR

InvalidRequestError = load(FUNCTION_DIR, "charging.errors").InvalidRequestError
_request = load(FUNCTION_DIR, "charging.request")
ChargeRequest, check_act_delay_ms, parse, parse_processor_charge = (
    _request.ChargeRequest,
    _request.check_act_delay_ms,
    _request.parse,
    _request.parse_processor_charge,
)

VALID = {"idempotency_key": "order-1", "amount": 1999, "currency": "EUR"}

BAD_REQUESTS = {
    "not an object": ([VALID], "JSON object"),
    "missing key": ({"amount": 1999, "currency": "EUR"}, "missing field(s): idempotency_key"),
    "null key": ({**VALID, "idempotency_key": None}, "missing field(s): idempotency_key"),
    "blank key": ({**VALID, "idempotency_key": "   "}, "non-empty string"),
    "numeric key": ({**VALID, "idempotency_key": 42}, "non-empty string"),
    "key too long": ({**VALID, "idempotency_key": "k" * 256}, "longer than 255"),
    "amount is text": ({**VALID, "amount": "abc"}, "whole number of minor units"),
    "amount is a numeric string": ({**VALID, "amount": "1999"}, "whole number of minor units"),
    "amount is fractional": ({**VALID, "amount": 19.99}, "whole number of minor units"),
    "amount is a boolean": ({**VALID, "amount": True}, "whole number of minor units"),
    "negative amount": ({**VALID, "amount": -5}, "greater than zero"),
    "zero amount": ({**VALID, "amount": 0}, "greater than zero"),
    "huge amount": ({**VALID, "amount": 10**12}, "at most"),
    "unknown currency": ({**VALID, "currency": "XXX"}, "unknown currency 'XXX'"),
    "lower-case currency": ({**VALID, "currency": "eur"}, "unknown currency 'eur'"),
    "misspelt field": ({**VALID, "ammount": 5}, "unknown field(s) ammount"),
    "negative delay": ({**VALID, "check_act_delay_ms": -1}, "check_act_delay_ms"),
    "delay past the limit": ({**VALID, "check_act_delay_ms": 60_000}, "check_act_delay_ms"),
    "flag is a string": ({**VALID, "pass_key_downstream": "yes"}, "true or false"),
}


def test_valid_request_is_parsed_with_defaults():
    assert parse(VALID) == ChargeRequest("order-1", 1999, "EUR", None, False)


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_request_is_rejected_with_a_message_naming_the_problem(case):
    event, expected = BAD_REQUESTS[case]
    with pytest.raises(InvalidRequestError) as raised:
        parse(event)
    assert expected in str(raised.value)


def test_payment_is_what_a_retry_must_repeat():
    request = parse({**VALID, "check_act_delay_ms": 10, "pass_key_downstream": True})
    assert request.payment() == VALID


def test_the_race_window_comes_from_the_request_alone(monkeypatch):
    # The lesson widens the window through its request; the Lambda code has no switch of
    # its own for tests (the variable the tests once set is ignored).
    monkeypatch.setenv("CHECK_ACT_DELAY_MS", "250")
    assert check_act_delay_ms(parse(VALID)) == 0
    assert check_act_delay_ms(parse({**VALID, "check_act_delay_ms": 5})) == 5
    assert check_act_delay_ms(parse({**VALID, "check_act_delay_ms": 0})) == 0


def test_processor_charge_takes_an_optional_downstream_key():
    charge = parse_processor_charge({"reference": "order-1", "amount": 5, "currency": "USD"})
    assert charge.idempotency_key is None
    keyed = parse_processor_charge(
        {"reference": "order-1", "amount": 5, "currency": "USD", "idempotency_key": "order-1"}
    )
    assert keyed.idempotency_key == "order-1"
    with pytest.raises(InvalidRequestError, match="unknown field"):
        parse_processor_charge({"reference": "order-1", "amount": 5, "currency": "USD", "card": "4242"})
