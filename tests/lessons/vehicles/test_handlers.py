"""The vehicle-registration handlers, called in-process against the embedded backend.

These pin down each function on its own; tests/lessons/vehicles/test_workflow.py runs them
deployed, inside the state machines.
"""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from idemlab import settings
from idemlab.lessons.vehicles import MALFORMED_REQUESTS, VALID_VIN, import_function_module, new_request
from idemlab.module_spec import table_keys

rmv_check = import_function_module("rmv_check")
write_naive = import_function_module("write_vehicle_naive")
write_idempotent = import_function_module("write_vehicle_idempotent")
notify = import_function_module("notify")
errors = import_function_module("registration.errors")

TABLE_KEYS = table_keys("write_vehicle_naive", "write_vehicle_idempotent", "notify")


@pytest.fixture
def tables(backend, monkeypatch):
    """Fresh tables for one test, named in the environment as Terraform would."""
    resource = boto3.resource("dynamodb", endpoint_url=backend, region_name="us-east-1")
    made = {}
    for key, hash_key in TABLE_KEYS.items():
        made[key] = resource.create_table(
            TableName=f"{key}-{uuid.uuid4().hex[:8]}",
            KeySchema=[{"AttributeName": hash_key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": hash_key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        monkeypatch.setenv(f"{key.upper()}_TABLE", made[key].name)
    yield made
    for table in made.values():
        table.delete()


def rows(table) -> list[dict]:
    return table.scan(ConsistentRead=True)["Items"]


def test_rmv_check_passes_a_valid_request_normalised(tables):
    request = new_request(vin=VALID_VIN.lower())
    result = rmv_check.handler(request, None)
    assert result == {
        "request": {**request, "vin": VALID_VIN},
        "rmv": {"status": "CLEAR", "vin": VALID_VIN},
    }


def test_naive_writer_adds_a_row_every_time_it_runs(tables):
    request = new_request()
    first = write_naive.handler(request, None)
    second = write_naive.handler(request, None)
    assert first["registration_id"] != second["registration_id"]
    assert len(rows(tables["vehicles_naive"])) == 2


def test_second_run_of_idempotent_writer_returns_stored_registration(tables):
    request = new_request()
    first = write_idempotent.handler(request, None)
    second = write_idempotent.handler(request, None)
    assert second == first
    stored = rows(tables["vehicles"])
    assert stored == [first]
    assert stored[0]["request_id"] == request["request_id"]


def test_reused_request_id_for_another_vehicle_is_refused_and_changes_nothing(tables):
    request = new_request(owner="Ada Lovelace")
    first = write_idempotent.handler(request, None)
    with pytest.raises(errors.RequestMismatchError, match="already used to register a different"):
        write_idempotent.handler({**request, "owner": "Charles Babbage"}, None)
    assert rows(tables["vehicles"]) == [first]


def test_retry_with_only_a_different_fault_setting_is_the_same_request(tables):
    request = new_request()
    first = write_idempotent.handler(request, None)
    again = write_idempotent.handler({**request, "fault_injection": {"notify_failures": 2}}, None)
    assert again == first


@pytest.mark.parametrize("failures", [0, 1, 3])
def test_notify_fails_the_injected_number_of_times_then_succeeds(tables, failures):
    request = new_request(notify_failures=failures)
    event = {"request": request, "registration": {"registration_id": "r-1"}}
    for _attempt in range(failures):
        with pytest.raises(errors.NotifyTransientError, match="injected"):
            notify.handler(event, None)
    assert notify.handler(event, None) == {"notified": True, "registration_id": "r-1"}
    assert notify.handler(event, None)["notified"] is True


def test_notify_without_faults_does_not_touch_the_faults_table(tables):
    notify.handler({"request": new_request(), "registration": {"registration_id": "r-1"}}, None)
    assert rows(tables["faults"]) == []


ROUNDS, THREADS = 40, 12


def test_notify_fails_exactly_the_injected_number_of_times_when_attempts_race(tables):
    # The counter is an ADD: each racing attempt gets its own count, so no two take the
    # same failure. Real threads, released together, over many rounds.
    from idemlab.lessons.checkout import concurrently

    wrong = []
    for round_number in range(ROUNDS):
        failures = 1 + round_number % 3
        event = {"request": new_request(notify_failures=failures), "registration": {"registration_id": "r-1"}}

        def attempt() -> bool:
            try:
                notify.handler(event, None)
            except errors.NotifyTransientError:
                return True
            return False

        failed = sum(concurrently(attempt, THREADS))
        if failed != failures:
            wrong.append((failures, failed))
    assert not wrong, f"(injected, failed) in {len(wrong)} of {ROUNDS} rounds: {wrong}"


@pytest.mark.parametrize("case", sorted(MALFORMED_REQUESTS))
def test_malformed_request_fails_every_function_with_a_clear_error_and_writes_nothing(tables, case):
    request, error_name = MALFORMED_REQUESTS[case]
    error = getattr(errors, error_name)
    with pytest.raises(error) as refused:
        rmv_check.handler(request, None)
    assert len(str(refused.value)) > 10
    if error_name != "StolenVehicleError":  # only the RMV check knows the stolen list
        for writer in (write_naive, write_idempotent):
            with pytest.raises(error):
                writer.handler(request, None)
        with pytest.raises(error):
            notify.handler({"request": request, "registration": {"registration_id": "r"}}, None)
    assert all(rows(table) == [] for table in tables.values())


@pytest.mark.parametrize(
    "event",
    [None, {"request": new_request()}, {"request": new_request(), "registration": {"registration_id": 7}}],
)
def test_notify_refuses_input_without_a_registration(tables, event):
    with pytest.raises(errors.MalformedRequestError):
        notify.handler(event, None)


def test_missing_table_variable_is_a_configuration_error(tables, monkeypatch):
    monkeypatch.delenv("VEHICLES_TABLE")
    with pytest.raises(
        errors.ConfigurationError, match="VEHICLES_TABLE is not set; the function's configuration is incomplete"
    ):
        write_idempotent.handler(new_request(), None)


def test_stored_registration_is_read_back_when_the_refusal_carries_no_item(tables):
    # Backends that ignore ReturnValuesOnConditionCheckFailure send the refusal without
    # the item; the writer then reads the row itself.
    request = new_request()
    first = write_idempotent.handler(request, None)
    parsed = import_function_module("registration.request").parse_request(request)
    assert write_idempotent._stored_registration(tables["vehicles"], parsed, None) == first


ASL_TEMPLATE = settings.ROOT / "terraform/modules/idempotency_lab/workflows/vehicle_registration.asl.json"


def retried_error_names(states: dict) -> set[str]:
    names = set()
    for state in states.values():
        for retrier in state.get("Retry", []) + state.get("Catch", []):
            names.update(retrier["ErrorEquals"])
        for branch in state.get("Branches", []):
            names |= retried_error_names(branch["States"])
    return names


def test_every_error_the_workflow_and_the_lesson_name_is_raised_by_the_functions():
    # Step Functions matches errors by class name: a renamed class would silently stop a Retry.
    defined = {name for name, value in vars(errors).items() if isinstance(value, type)}
    named_by_workflow = retried_error_names(json.loads(ASL_TEMPLATE.read_text())["States"])
    assert named_by_workflow == {"NotifyTransientError"}
    assert named_by_workflow <= defined
    assert {error for _, error in MALFORMED_REQUESTS.values()} <= defined
