"""The deployed vehicle-registration workflows and functions (Terraform applied to the embedded backend)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from idemlab import clients
from idemlab.lessons import vehicles
from idemlab.lessons.vehicles import MALFORMED_REQUESTS, new_request

# Generous: the first stack test of a session also waits for the one terraform apply
# (about 2 minutes on a busy 2-core machine); the tests themselves take seconds.
pytestmark = [pytest.mark.stack, pytest.mark.any_backend, pytest.mark.timeout(600)]


def run_many(stack, kind: str, request: dict, times: int, concurrency: int) -> list[vehicles.Execution]:
    """``times`` executions of the same request, ``concurrency`` of them in flight at once."""
    sfn = clients.client("stepfunctions", max_pool_connections=concurrency)  # safe to share between threads
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(lambda _: vehicles.run(stack, kind, request, sfn), range(times)))


def table_size(stack, table_key):
    scan = clients.client("dynamodb").scan(TableName=stack["tables"][table_key], Select="COUNT", ConsistentRead=True)
    return scan["Count"]


@pytest.mark.parametrize("kind", ["idempotent", "native"])
def test_fifty_executions_of_one_request_leave_exactly_one_row(stack, kind):
    request = new_request()
    executions = run_many(stack, kind, request, times=50, concurrency=10)
    assert [e.status for e in executions] == ["SUCCEEDED"] * 50
    stored = vehicles.rows(stack, kind, request["request_id"])
    assert len(stored) == 1
    # Every execution, first or not, reports the one registration that is stored.
    assert {e.registration_id for e in executions} == {stored[0]["registration_id"]}


def test_fifty_executions_of_one_request_leave_fifty_naive_rows(stack):
    request = new_request()
    executions = run_many(stack, "naive", request, times=50, concurrency=10)
    assert [e.status for e in executions] == ["SUCCEEDED"] * 50
    assert len(vehicles.rows(stack, "naive", request["request_id"])) == 50
    assert len({e.registration_id for e in executions}) == 50


@pytest.mark.parametrize("kind, rows", [("naive", 2), ("idempotent", 1), ("native", 1)])
def test_one_notify_failure_runs_the_write_twice_in_one_execution(stack, kind, rows):
    request = new_request(notify_failures=1)
    execution = vehicles.run(stack, kind, request)
    assert execution.status == "SUCCEEDED"
    assert vehicles.notify_attempts(stack, request["request_id"]) == 2
    assert len(vehicles.rows(stack, kind, request["request_id"])) == rows


@pytest.mark.parametrize("kind, rows", [("naive", 2), ("idempotent", 1), ("native", 1)])
def test_same_request_twice_is_two_executions(stack, kind, rows):
    request = new_request()
    first, second = vehicles.run(stack, kind, request), vehicles.run(stack, kind, request)
    assert (first.status, second.status) == ("SUCCEEDED", "SUCCEEDED")
    assert len(vehicles.rows(stack, kind, request["request_id"])) == rows
    assert (first.registration_id == second.registration_id) == (kind != "naive")


@pytest.mark.parametrize("kind", vehicles.KINDS)
@pytest.mark.parametrize("case", sorted(MALFORMED_REQUESTS))
def test_malformed_request_fails_with_a_clear_error_and_writes_nothing(stack, kind, case):
    request, error_name = MALFORMED_REQUESTS[case]
    before = {key: table_size(stack, key) for key in (*vehicles.TABLE_KEYS.values(), "faults")}
    execution = vehicles.run(stack, kind, request)
    assert execution.status == "FAILED"
    assert execution.error == error_name
    assert execution.error_message and len(execution.error_message) > 10
    assert {key: table_size(stack, key) for key in before} == before


@pytest.mark.parametrize("kind", ["idempotent", "native"])
@pytest.mark.parametrize("changed", [{"owner": "Charles Babbage"}, {"vin": "1HGCM82633A004352"}])
def test_a_used_request_id_with_another_owner_or_vin_fails_and_keeps_the_first_registration(stack, kind, changed):
    request = new_request(owner="Ada Lovelace")
    assert vehicles.run(stack, kind, request).status == "SUCCEEDED"
    reused = vehicles.run(stack, kind, {**request, **changed})
    assert (reused.status, reused.error) == ("FAILED", "RequestMismatchError")
    stored = vehicles.rows(stack, kind, request["request_id"])
    assert [(r["owner"], r["vin"]) for r in stored] == [("Ada Lovelace", request["vin"])]


def test_more_notify_failures_than_retries_fail_the_execution_after_one_write(stack):
    # The Retry allows 3 more attempts; the 4th failure ends the execution, and the row
    # written by the first attempt stays: a failed execution is not rolled back.
    request = new_request(notify_failures=4)
    execution = vehicles.run(stack, "idempotent", request)
    assert (execution.status, execution.error) == ("FAILED", "NotifyTransientError")
    assert vehicles.notify_attempts(stack, request["request_id"]) == 4
    assert len(vehicles.rows(stack, "idempotent", request["request_id"])) == 1


@pytest.mark.parametrize("kind", ["idempotent", "native"])
def test_sync_execution_returns_the_stored_registration(stack, kind):
    request = new_request()
    first = vehicles.run(stack, kind, request)
    again = vehicles.run(stack, kind, request)
    assert (first.status, again.status) == ("SUCCEEDED", "SUCCEEDED")
    assert first.registration_id == again.registration_id
    assert first.output["notification"] == {"notified": True, "registration_id": first.registration_id}


def test_run_takes_one_path_without_describe_execution(stack):
    # AWS and LocalStack refuse DescribeExecution for Express executions: the one path
    # the lesson takes on every backend must not need it.
    sfn = clients.client("stepfunctions")
    called = []
    sfn.meta.events.register("before-call.states", lambda model, **_: called.append(model.name))
    execution = vehicles.run(stack, "naive", new_request(), sfn=sfn)
    assert execution.status == "SUCCEEDED"
    assert called == ["StartSyncExecution"]


def test_an_asynchronous_start_is_seen_in_the_table(stack):
    request = new_request(notify_failures=1)
    arn = vehicles.start(stack, "naive", request)
    assert ":express:" in arn or ":execution:" in arn
    # The Retry after the failed notification writes the naive row a second time.
    stored = vehicles.wait_for_rows(stack, "naive", request["request_id"], count=2)
    assert len(stored) == 2


RACE_ROUNDS = 20
RACERS = 10
JOIN_SECONDS = 120  # each join ends when its racer has its answer: room for cold starts on a loaded runner


def invoke_together(stack, function_key, request, racers):
    """``racers`` invocations of one deployed function with one request, released at once."""
    lam = clients.client("lambda", max_pool_connections=racers)
    start = threading.Barrier(racers)
    answers = [None] * racers

    def invoke(i):
        start.wait()
        response = lam.invoke(FunctionName=stack["functions"][function_key], Payload=json.dumps(request))
        answers[i] = (response.get("FunctionError"), json.loads(response["Payload"].read()))

    threads = [threading.Thread(target=invoke, args=(i,)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_SECONDS)
    # A racer still invoking would leave None, which reads like an answer to the caller's checks.
    assert not [thread for thread in threads if thread.is_alive()], (
        f"racers of {function_key} still invoking after {JOIN_SECONDS} s; answers so far: {answers}"
    )
    return answers


def test_racing_invocations_of_the_idempotent_writer_store_one_row_every_round(stack):
    outcomes = Counter()
    for _ in range(RACE_ROUNDS):
        request = new_request()
        answers = invoke_together(stack, "write_vehicle_idempotent", request, RACERS)
        assert [error for error, _ in answers] == [None] * RACERS
        stored = vehicles.rows(stack, "idempotent", request["request_id"])
        returned = {payload["registration_id"] for _, payload in answers}
        outcomes[(len(stored), len(returned))] += 1
        assert returned == {stored[0]["registration_id"]}
    assert outcomes == Counter({(1, 1): RACE_ROUNDS})


def test_racing_invocations_of_the_naive_writer_store_a_row_each(stack):
    request = new_request()
    answers = invoke_together(stack, "write_vehicle_naive", request, RACERS)
    assert [error for error, _ in answers] == [None] * RACERS
    assert len(vehicles.rows(stack, "naive", request["request_id"])) == RACERS
