"""The one request validator: any JSON either parses or fails with a named, readable error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idemlab.lessons.vehicles import VALID_VIN, import_function_module

# A loaded 2-core CI machine can pause one example past Hypothesis' 200 ms default.
no_deadline = settings(deadline=None)

request_module = import_function_module("registration.request")
errors = import_function_module("registration.errors")

REFUSALS = (errors.MalformedRequestError, errors.InvalidVinError)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
valid = {"request_id": "req-1", "vin": VALID_VIN, "owner": "Ada Lovelace"}


@no_deadline
@given(json_values)
def test_any_json_value_is_parsed_or_refused_with_a_named_error(value):
    try:
        request_module.parse_request(value)
    except REFUSALS as refused:
        assert str(refused)


@no_deadline
@given(st.sampled_from(sorted(valid)), json_values)
def test_a_valid_request_with_one_field_replaced_is_parsed_or_refused(field, value):
    try:
        parsed = request_module.parse_request({**valid, field: value})
    except REFUSALS as refused:
        assert str(refused)
    else:
        assert isinstance(getattr(parsed, field), str)


@pytest.mark.parametrize("missing", sorted(valid))
def test_each_missing_field_is_named(missing):
    incomplete = {k: v for k, v in valid.items() if k != missing}
    with pytest.raises(errors.MalformedRequestError, match=f"missing {missing}"):
        request_module.parse_request(incomplete)


@no_deadline
@given(st.integers(-3, 10))
def test_notify_failures_must_be_a_small_count(count):
    event = {**valid, "fault_injection": {"notify_failures": count}}
    if 0 <= count <= request_module.MAX_NOTIFY_FAILURES:
        assert request_module.parse_request(event).notify_failures == count
    else:
        with pytest.raises(errors.MalformedRequestError, match="between 0 and"):
            request_module.parse_request(event)


def test_true_is_not_a_failure_count():
    with pytest.raises(errors.MalformedRequestError, match="integer, got boolean"):
        request_module.parse_request({**valid, "fault_injection": {"notify_failures": True}})


def test_a_retry_differing_only_in_fault_injection_has_the_same_fingerprint():
    plain = request_module.parse_request(valid)
    flaky = request_module.parse_request({**valid, "fault_injection": {"notify_failures": 2}})
    other_owner = request_module.parse_request({**valid, "owner": "Grace Hopper"})
    assert plain.fingerprint() == flaky.fingerprint() != other_owner.fingerprint()


def test_parsed_request_round_trips_through_the_workflow_event():
    flaky = request_module.parse_request({**valid, "vin": VALID_VIN.lower(), "fault_injection": {"notify_failures": 1}})
    assert request_module.parse_request(flaky.to_event()) == flaky
