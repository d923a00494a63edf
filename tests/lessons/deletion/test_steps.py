"""The deletion's step functions run in this process against a real API server: every
step a recovery point, faults at its boundaries, the naive worker for contrast."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from idemlab import clients
from idemlab import faults as idemlab_faults
from idemlab.lessons import deletion
from idemlab.lessons.deletion import Deletions
from support import invocation
from support.deletion_scenario import (
    private_scenario,
    run_steps_in_process,
    run_workflow_in_process,
    step_retries,
    sweep_in_process,
)

TESTS = Path(invocation.__file__).parents[1]  # tests/, where the child imports support from

state = deletion.import_function_module("erasure.state")
claims = deletion.import_function_module("erasure.claims")
errors = deletion.import_function_module("erasure.errors")
faults = deletion.import_function_module("erasure.faults")
request_deletion = deletion.import_function_module("request_deletion")
cancel_deletion = deletion.import_function_module("cancel_deletion")
sweeper = deletion.import_function_module("sweeper")
naive = deletion.import_function_module("naive_deletion_worker")
steps = deletion.import_function_module("erasure.steps")


@pytest.fixture(scope="module")
def deletions(stack) -> Deletions:
    private = private_scenario(stack)
    # A stand-in workflow: these tests run the steps themselves and only need to see
    # that the sweeper starts an execution.
    clients.client("stepfunctions").create_state_machine(
        name=private["state_machines"]["account_deletion"].rsplit(":", 1)[1],
        definition=json.dumps({"StartAt": "Wait", "States": {"Wait": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/stand-in",
        type="STANDARD",
    )
    return Deletions(private)


@pytest.fixture
def env(deletions, monkeypatch):
    """The functions' environment, with a lease long enough never to expire by itself."""
    limits = {"LEASE_SECONDS": "60", "MAX_ATTEMPTS": "3", "RETRY_DELAY_SECONDS": "0"}
    for name, value in {**deletions.stack["environment"], **limits}.items():
        monkeypatch.setenv(name, value)
    return monkeypatch


def new_user(deletions, records=3, files=2) -> str:
    user_id = f"u{uuid.uuid4().hex[:10]}"
    deletions.seed_user(user_id, records=records, files=files)
    return user_id


def requested(user_id: str, **extra) -> str:
    return request_deletion.handler({"user_id": user_id, "delay_seconds": 0, **extra}, None)["deletion_request_id"]


def claimed_long_ago(table, request_id: str, owner: str, seconds_ago: int):
    """A claim made ``seconds_ago`` with a one-second lease: a worker that vanished long
    since. The request is made due before that first (the claim refuses an early start)."""
    table.update_item(
        Key={"deletion_request_id": request_id},
        UpdateExpression="SET due_at = due_at - :back",
        ExpressionAttributeValues={":back": seconds_ago + 1},
    )
    return claims.claim(table, request_id, owner, 1, now=time.time() - seconds_ago)


GONE = {"records": 0, "files": 0, "identities": 0}


def test_a_deletion_removes_everything_of_its_user_and_nothing_else(deletions, env):
    user, bystander = new_user(deletions, records=120, files=3), new_user(deletions)
    request_id = requested(user)
    assert run_workflow_in_process(request_id, "exec-1") == "COMPLETED"
    assert deletions.leftovers(user) == GONE
    assert deletions.leftovers(bystander) == {"records": 3, "files": 2, "identities": 1}
    assert deletions.goodbyes(user) == 1
    assert deletions.request_status(request_id) == "COMPLETED"


def test_asking_twice_for_the_same_user_returns_the_same_request_and_one_schedule(deletions, env):
    user = new_user(deletions)
    first = request_deletion.handler({"user_id": user, "delay_seconds": 3600}, None)
    second = request_deletion.handler({"user_id": user, "delay_seconds": 3600}, None)
    assert first["created"] and not second["created"]
    assert second["deletion_request_id"] == first["deletion_request_id"]
    assert second["due_at"] == first["due_at"]
    scheduler = clients.client("scheduler")
    listed = scheduler.list_schedules(
        GroupName=deletions.stack["schedule_group"], NamePrefix=f"deletion-{first['deletion_request_id']}"
    )
    assert len(listed["Schedules"]) == 1
    schedule = scheduler.get_schedule(
        Name=f"deletion-{first['deletion_request_id']}", GroupName=deletions.stack["schedule_group"]
    )
    assert schedule["ScheduleExpression"] == request_deletion.at_expression(first["due_at"])
    assert schedule["ActionAfterCompletion"] == "DELETE"
    target = schedule["Target"]
    assert target["Arn"] == "arn:aws:scheduler:::aws-sdk:sfn:startExecution"
    assert target["DeadLetterConfig"]["Arn"] == deletions.stack["queue_arns"]["scheduler_dlq"]
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600}
    start = json.loads(target["Input"])
    assert start["Name"] == first["deletion_request_id"]
    assert start["StateMachineArn"] == deletions.state_machine_arn
    assert json.loads(start["Input"]) == {"deletion_request_id": first["deletion_request_id"]}


@pytest.mark.parametrize(
    "event, complaint",
    [
        ({"user_id": ""}, "user_id"),
        ({"user_id": "has space"}, "user_id"),
        ({"user_id": "x" * 41}, "user_id"),
        ({"user_id": "u1\n"}, "user_id"),
        ({"user_id": "ok", "idempotency_key": "k\n"}, "idempotency_key"),
        ({"user_id": "ok", "delay_seconds": -1}, "delay_seconds"),
        ({"user_id": "ok", "delay_seconds": "30"}, "delay_seconds"),
        ({"user_id": "ok", "idempotency_key": "a/b"}, "idempotency_key"),
        (["user_id", "ok"], "JSON object"),
    ],
)
def test_a_bad_request_is_refused_and_changes_nothing(deletions, env, event, complaint):
    before = deletions.table("deletion_requests").scan(Select="COUNT")["Count"]
    with pytest.raises(errors.InvalidDeletionInputError, match=complaint):
        request_deletion.handler(event, None)
    assert deletions.table("deletion_requests").scan(Select="COUNT")["Count"] == before


def test_a_step_handed_a_bad_claim_refuses_before_touching_anything(deletions, env):
    user = new_user(deletions)
    with pytest.raises(errors.InvalidDeletionInputError, match="fencing_token"):
        deletion.import_function_module("delete_records").handler(
            {"deletion_request_id": "x", "user_id": user, "owner": "o", "fencing_token": "1"}, None
        )
    assert deletions.leftovers(user) == {"records": 3, "files": 2, "identities": 1}


def test_cancel_before_the_fire_wins_and_the_fire_then_does_nothing(deletions, env):
    user = new_user(deletions)
    request_id = requested(user)
    answer = cancel_deletion.handler({"deletion_request_id": request_id, "user_id": user}, None)
    assert answer == {"deletion_request_id": request_id, "cancelled": True, "status": "CANCELLED"}
    listed = clients.client("scheduler").list_schedules(
        GroupName=deletions.stack["schedule_group"], NamePrefix=f"deletion-{request_id}"
    )
    assert listed["Schedules"] == []
    assert run_workflow_in_process(request_id, "exec-late") == "cancelled"
    assert deletions.leftovers(user) == {"records": 3, "files": 2, "identities": 1}
    again = cancel_deletion.handler({"deletion_request_id": request_id, "user_id": user}, None)
    assert again["cancelled"] is False and again["status"] == "CANCELLED"


def test_cancel_after_the_fire_loses_and_says_so(deletions, env):
    user = new_user(deletions)
    request_id = requested(user)
    run_workflow_in_process(request_id, "exec-1")
    answer = cancel_deletion.handler({"deletion_request_id": request_id, "user_id": user}, None)
    assert answer == {"deletion_request_id": request_id, "cancelled": False, "status": "COMPLETED"}


def test_a_second_delivery_after_completion_changes_nothing(deletions, env):
    user = new_user(deletions)
    request_id = requested(user)
    assert run_workflow_in_process(request_id, "exec-1") == "COMPLETED"
    deletions.seed_user(user, records=1, files=0)  # new data after the deletion: must stay
    assert run_workflow_in_process(request_id, "exec-2") == "already_done"
    assert deletions.leftovers(user)["records"] == 1
    assert deletions.goodbyes(user) == 1


@pytest.mark.parametrize("step", ["delete_files", "delete_identity", "send_goodbye"])
def test_an_effect_whose_progress_write_failed_is_reconciled_by_repeating_it(deletions, env, step):
    user = new_user(deletions)
    request_id = requested(user)
    deletions.arm_fault(step, faults.AFTER_EFFECT, request_id, faults.ERROR)
    assert run_workflow_in_process(request_id, "exec-1") == "COMPLETED"
    assert deletions.leftovers(user) == GONE
    assert deletions.goodbyes(user) == 1


def test_delete_records_has_no_gap_between_effect_and_progress(deletions, env):
    user = new_user(deletions, records=5)
    request_id = requested(user)
    deletions.arm_fault("delete_records", faults.AFTER_PROGRESS, request_id, faults.ERROR)
    assert run_workflow_in_process(request_id, "exec-1") == "COMPLETED"
    assert deletions.leftovers(user) == GONE


def test_a_failed_attempt_leaves_retryable_and_the_next_resumes_without_repeating_steps(deletions, env):
    user = new_user(deletions)
    request_id = requested(user)
    deletions.arm_fault("delete_files", faults.BEFORE, request_id, faults.ERROR, times=step_retries() + 1)
    assert run_workflow_in_process(request_id, "exec-1") == "RETRYABLE"
    stored = state.read(deletions.table("deletion_requests"), request_id)
    assert stored.steps_done == {"delete_records"} and stored.attempts == 1
    # Armed but never reached: if the next attempt redid delete_records, it would fail here.
    sentinel = deletions.arm_fault("delete_records", faults.BEFORE, request_id, faults.ERROR, times=5)
    assert run_workflow_in_process(request_id, "exec-2") == "COMPLETED"
    faults_table = deletions.table("faults")
    assert idemlab_faults.reached(faults_table, sentinel) == 0
    assert deletions.leftovers(user) == GONE
    assert deletions.goodbyes(user) == 1


def test_out_of_attempts_fails_with_a_dead_letter_and_a_redrive_completes(deletions, env):
    env.setenv("MAX_ATTEMPTS", "2")
    user = new_user(deletions)
    request_id = requested(user)
    key = deletions.arm_fault("send_goodbye", faults.BEFORE, request_id, faults.ERROR, times=100)
    assert run_workflow_in_process(request_id, "exec-1") == "RETRYABLE"
    assert run_workflow_in_process(request_id, "exec-2") == "FAILED"
    assert run_workflow_in_process(request_id, "exec-3") == "failed"
    messages = drain(deletions.dead_letter_queue)
    mine = [m for m in messages if m["MessageAttributes"]["DELETION_REQUEST_ID"]["StringValue"] == request_id]
    assert len(mine) == 1
    assert json.loads(mine[0]["Body"]) == {"deletion_request_id": request_id, "redrive": True}
    assert mine[0]["MessageAttributes"]["TARGET_ARN"]["StringValue"] == deletions.state_machine_arn
    assert "InjectedFaultError" in mine[0]["MessageAttributes"]["ERROR_MESSAGE"]["StringValue"]
    deletions.table("faults").delete_item(Key={"fault_key": key})  # the cause is fixed
    assert run_workflow_in_process(request_id, "redrive-1", redrive=True) == "COMPLETED"
    assert deletions.leftovers(user) == GONE
    assert deletions.goodbyes(user) == 1


def drain(queue_url: str) -> list[dict]:
    sqs = clients.client("sqs")
    found = []
    while True:
        got = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
        )
        if not got.get("Messages"):
            return found
        for message in got["Messages"]:
            found.append(message)
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


# Each function's timeout in the crashing child: room for a step's work on a loaded machine,
# short enough that the crash (a run past it) ends the child soon.
CRASHING_STEP_TIMEOUT_SECONDS = 5


@pytest.mark.timeout(60)
def test_a_crashed_worker_is_swept_restarted_and_resumed(deletions, env):
    env.setenv("LEASE_SECONDS", "1")
    user = new_user(deletions)
    request_id = requested(user)
    deletions.arm_fault("delete_files", faults.AFTER_EFFECT, request_id, faults.CRASH)
    # The child is the crashed worker's execution environment: Lambda's stop at the step's
    # timeout (a short one here) ends it.
    code = (
        f"import sys; sys.path.insert(0, {str(TESTS)!r}); from support import invocation;"
        " from support.deletion_scenario import run_workflow_in_process; invocation.stop_at_timeouts();"
        f" run_workflow_in_process(sys.argv[1], 'exec-crash', timeout_seconds={CRASHING_STEP_TIMEOUT_SECONDS})"
    )
    died = subprocess.run([sys.executable, "-c", code, request_id], capture_output=True, text=True, timeout=30)
    assert died.returncode == invocation.TIMED_OUT_EXIT_CODE, died.stderr
    stored = state.read(deletions.table("deletion_requests"), request_id)
    assert stored.status is state.Status.PROCESSING and stored.steps_done == {"delete_records"}
    assert deletions.leftovers(user)["files"] == 0  # its effect happened, its progress did not
    time.sleep(2.1)  # the crashed worker's lease runs out (whole seconds)
    swept = sweep_in_process()
    assert swept["stuck"] >= 1
    assert f"{request_id}-restart-1" in swept["restarted"]
    assert deletions.request_status(request_id) == "RETRYABLE"
    assert run_workflow_in_process(request_id, f"{request_id}-restart-1") == "COMPLETED"
    assert deletions.leftovers(user) == GONE
    assert deletions.goodbyes(user) == 1
    again = sweep_in_process()
    assert not [name for name in again["restarted"] if name.startswith(request_id)]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("step", ["delete_records", "delete_files", "send_goodbye"])
def test_a_zombie_that_stalled_past_its_lease_is_stopped_by_the_token(deletions, env, step):
    user = new_user(deletions)
    request_id = requested(user)
    deletions.arm_fault(step, faults.BEFORE, request_id, faults.PAUSE)  # a stall, then it goes on
    outcome = {}
    zombie = threading.Thread(target=lambda: outcome.update(zombie=run_workflow_in_process(request_id, "zombie")))
    zombie.start()
    # The successor claims only once the zombie holds the request, however long that took.
    deadline = time.monotonic() + 60
    while (status := deletions.request_status(request_id)) != "PROCESSING":
        assert time.monotonic() < deadline, f"the zombie did not claim {request_id} within 60 s: {status}"
        time.sleep(0.02)
    # The successor claims as if the zombie's lease had run out (its clock is ahead).
    successor = claims.claim(deletions.table("deletion_requests"), request_id, "successor", 60, now=time.time() + 120)
    assert successor.claim.fencing_token == 2
    claim = dict(steps.claim_to_event(successor.claim).items())
    assert run_steps_in_process(claim) == "COMPLETED"
    zombie.join(timeout=40)
    assert outcome.get("zombie") == "superseded", f"the zombie's workflow, 40 s after the successor's: {outcome}"
    assert deletions.leftovers(user) == GONE
    assert deletions.goodbyes(user) == 1
    stored = state.read(deletions.table("deletion_requests"), request_id)
    assert (stored.status, stored.fencing_token) == (state.Status.COMPLETED, 2)


def test_the_sweeper_publishes_the_stuck_count(deletions, env):
    env.setenv("METRIC_NAMESPACE", f"Test{uuid.uuid4().hex[:6]}")
    env.setenv("LAB_PREFIX", "lab-under-test")
    request_id = requested(new_user(deletions))
    claimed_long_ago(deletions.table("deletion_requests"), request_id, "vanished", 100)
    result = sweep_in_process()
    assert result["stuck"] >= 1
    cloudwatch = clients.client("cloudwatch")
    metrics = cloudwatch.list_metrics(Namespace=sweeper.settings.optional("METRIC_NAMESPACE"))["Metrics"]
    assert [(m["MetricName"], m["Dimensions"]) for m in metrics] == [
        ("StuckDeletionRequests", [{"Name": "Prefix", "Value": "lab-under-test"}])
    ]
    stats = cloudwatch.get_metric_statistics(
        Namespace=sweeper.settings.optional("METRIC_NAMESPACE"),
        MetricName="StuckDeletionRequests",
        Dimensions=[{"Name": "Prefix", "Value": "lab-under-test"}],
        StartTime=time.time() - 600,
        EndTime=time.time() + 600,
        Period=60,
        Statistics=["Maximum"],
    )
    assert max(p["Maximum"] for p in stats["Datapoints"]) == result["stuck"]


def test_the_naive_worker_delivered_twice_sends_two_goodbyes(deletions, env):
    user = new_user(deletions)
    request_id = requested(user)
    naive.handler({"deletion_request_id": request_id}, None)
    naive.handler({"deletion_request_id": request_id}, None)
    assert deletions.leftovers(user) == GONE
    assert deletions.goodbyes(user) == 2


def test_the_naive_worker_after_an_error_redoes_everything(deletions, env):
    user = new_user(deletions)
    request_id = requested(user)
    deletions.arm_fault("send_goodbye", faults.AFTER_EFFECT, request_id, faults.ERROR)
    with pytest.raises(errors.InjectedFaultError):
        naive.handler({"deletion_request_id": request_id}, None)
    naive.handler({"deletion_request_id": request_id}, None)  # the platform's retry
    assert deletions.goodbyes(user) == 2


@pytest.mark.parametrize(
    "event, complaint",
    [
        ({"deletion_request_id": "del 1"}, "deletion_request_id"),
        ({}, "deletion_request_id"),
        ("del-1", "JSON object"),
    ],
)
def test_cancel_refuses_bad_input(deletions, env, event, complaint):
    with pytest.raises(errors.InvalidDeletionInputError, match=complaint):
        cancel_deletion.handler(event, None)


def test_cancelling_an_unknown_request_says_so(deletions, env):
    with pytest.raises(errors.UnknownDeletionRequestError):
        cancel_deletion.handler({"deletion_request_id": "del-never-asked", "user_id": "u-nobody"}, None)


@pytest.mark.parametrize(
    "event, complaint",
    [
        ({"input": {"deletion_request_id": "del-x"}}, "owner"),
        ({"owner": "o" * 81, "input": {"deletion_request_id": "del-x"}}, "owner"),
        ({"owner": "exec-1", "input": {"deletion_request_id": "del-x", "redrive": "yes"}}, "redrive"),
        ({"owner": "exec-1", "input": "del-x"}, "JSON object"),
    ],
)
def test_the_claim_refuses_bad_input_and_changes_nothing(deletions, env, event, complaint):
    request_id = requested(new_user(deletions))
    event = json.loads(json.dumps(event).replace("del-x", request_id))
    with pytest.raises(errors.InvalidDeletionInputError, match=complaint):
        deletion.import_function_module("claim_deletion").handler(event, None)
    assert deletions.request_status(request_id) == "SCHEDULED"


@pytest.mark.parametrize(
    "point, kind, times",
    [("halfway", faults.CRASH, 1), (faults.BEFORE, "explode", 1), (faults.BEFORE, faults.ERROR, 0)],
)
def test_arming_a_fault_wrongly_is_refused_and_arms_nothing(deletions, env, point, kind, times):
    faults_table = deletions.table("faults")
    before = faults_table.scan(Select="COUNT")["Count"]
    with pytest.raises(ValueError, match=r"must be one of|at least 1"):
        deletions.arm_fault("delete_files", point, "del-x", kind, times)
    assert faults_table.scan(Select="COUNT")["Count"] == before


# -- issue 11: nothing stuck, nothing refused, nothing forged ------------------------


def test_a_reused_key_with_another_delay_is_refused_and_changes_nothing(deletions, env):
    user = new_user(deletions)
    first = request_deletion.handler({"user_id": user, "idempotency_key": "k1", "delay_seconds": 3600}, None)
    with pytest.raises(errors.IdempotencyKeyReusedError, match="delay_seconds=3600"):
        request_deletion.handler({"user_id": user, "idempotency_key": "k1", "delay_seconds": 60}, None)
    stored = state.read(deletions.table("deletion_requests"), first["deletion_request_id"])
    assert (stored.status, stored.due_at) == (state.Status.SCHEDULED, first["due_at"])


@pytest.mark.parametrize("finish", ["cancel", "complete"])
def test_a_user_whose_request_is_over_can_ask_again(deletions, env, finish):
    user = new_user(deletions)
    first = requested(user)
    if finish == "cancel":
        cancel_deletion.handler({"deletion_request_id": first, "user_id": user}, None)
    else:
        assert run_workflow_in_process(first, "exec-1") == "COMPLETED"
        deletions.seed_user(user)  # the user came back
    again = request_deletion.handler({"user_id": user, "delay_seconds": 0}, None)
    assert again["created"] is True and again["status"] == "SCHEDULED"
    assert again["deletion_request_id"] != first
    schedule = f"deletion-{again['deletion_request_id']}"
    assert (
        clients.client("scheduler").get_schedule(Name=schedule, GroupName=deletions.stack["schedule_group"])["Name"]
        == schedule
    )
    repeat = request_deletion.handler({"user_id": user, "delay_seconds": 0}, None)
    assert (repeat["deletion_request_id"], repeat["created"]) == (again["deletion_request_id"], False)
    assert run_workflow_in_process(again["deletion_request_id"], "exec-again") == "COMPLETED"
    assert deletions.leftovers(user) == GONE


@pytest.mark.parametrize("step", ["delete_records", "delete_files", "delete_identity"])
def test_a_step_acts_on_the_stored_user_not_the_one_the_event_names(deletions, env, step):
    user, victim = new_user(deletions), new_user(deletions)
    request_id = requested(user)
    won = claims.claim(deletions.table("deletion_requests"), request_id, "exec-forged", 60)
    forged = {**steps.claim_to_event(won.claim), "user_id": victim}
    invocation.invoke(deletion.import_function_module(step).handler, forged, timeout_seconds=30)
    assert deletions.leftovers(victim) == {"records": 3, "files": 2, "identities": 1}
    gone = {"delete_records": "records", "delete_files": "files", "delete_identity": "identities"}[step]
    assert deletions.leftovers(user)[gone] == 0


def test_the_goodbye_goes_to_the_address_captured_before_the_identity_was_deleted(deletions, env):
    user = new_user(deletions)
    request_id = requested(user)
    assert run_workflow_in_process(request_id, "exec-1") == "COMPLETED"
    outbox = deletions.table("email_outbox")
    sent = outbox.get_item(Key={"idempotency_key": f"goodbye#{request_id}"}, ConsistentRead=True)["Item"]
    assert sent["to"] == f"{user}@example.com"
    # Kept only until the goodbye went out: the finished request holds no address.
    assert state.read(deletions.table("deletion_requests"), request_id).goodbye_address is None


def test_the_address_survives_a_crash_after_the_identity_was_deleted(deletions, env):
    user = new_user(deletions)
    request_id = requested(user)
    deletions.arm_fault("delete_identity", faults.AFTER_EFFECT, request_id, faults.ERROR)
    assert run_workflow_in_process(request_id, "exec-1") == "COMPLETED"
    outbox = deletions.table("email_outbox")
    assert outbox.get_item(Key={"idempotency_key": f"goodbye#{request_id}"})["Item"]["to"] == f"{user}@example.com"


class Deadline:
    """A Lambda context whose remaining time runs down by one second per question."""

    def __init__(self, seconds: float):
        self.left = seconds

    def get_remaining_time_in_millis(self) -> int:
        self.left -= 1
        return int(self.left * 1000)


def test_a_large_user_is_deleted_page_by_page_across_invocations(deletions, env, monkeypatch):
    delete_records = deletion.import_function_module("delete_records")
    delete_files = deletion.import_function_module("delete_files")
    monkeypatch.setattr(delete_files, "OBJECTS_PER_DELETE", 2)  # 7 files: 4 pages of 2
    user = new_user(deletions, records=250, files=7)
    request_id = requested(user)
    claim = steps.claim_to_event(claims.claim(deletions.table("deletion_requests"), request_id, "exec-big", 60).claim)
    invocations = {}
    for step, module in (("delete_records", delete_records), ("delete_files", delete_files)):
        invocations[step] = 0
        while True:
            # Each invocation has time for about one page before its deadline.
            answer = module.handler(claim, Deadline(steps.PAGE_MARGIN_SECONDS + 0.5))
            invocations[step] += 1
            if not answer.get(steps.MORE_TO_DO):
                break
            assert step not in steps_done(deletions, request_id)  # not recorded while some are left
            assert invocations[step] < 10
        claim = answer
    print(f"invocations: {invocations}")
    # One page each: 99 + 99 + 52 records; 2 + 2 + 2 + 1 files, then one that finds none left.
    assert invocations == {"delete_records": 3, "delete_files": 5}
    assert deletions.leftovers(user) == {"records": 0, "files": 0, "identities": 1}
    assert {"delete_records", "delete_files"} <= steps_done(deletions, request_id)


def steps_done(deletions, request_id):
    return state.read(deletions.table("deletion_requests"), request_id).steps_done


def test_a_sweep_that_fails_on_one_request_still_handles_the_others_and_publishes(deletions, env):
    env.setenv("METRIC_NAMESPACE", f"Test{uuid.uuid4().hex[:6]}")
    first, second, third = (requested(new_user(deletions)) for _ in range(3))
    table = deletions.table("deletion_requests")
    claimed_long_ago(table, first, "vanished-1", 200)
    claimed_long_ago(table, second, "vanished-2", 100)
    failed_once = claims.claim(table, third, "exec-3", 60).claim
    claims.release_after_failure(table, failed_once, "injected", 3, 0)  # RETRYABLE, due now
    deletions.arm_fault(sweeper.SWEEP, faults.BEFORE, first, faults.ERROR)
    deletions.arm_fault(sweeper.RESTART, faults.BEFORE, third, faults.ERROR)
    with pytest.raises(errors.SweepIncompleteError) as failed:
        sweep_in_process()
    assert first in str(failed.value) and third in str(failed.value)
    assert deletions.request_status(first) == "PROCESSING"  # left for the next sweep
    assert deletions.request_status(second) == "RETRYABLE"
    assert state.read(table, second).restarts == 1  # handled after the failure before it
    assert state.read(table, third).restarts == 0
    metrics = clients.client("cloudwatch").list_metrics(Namespace=sweeper.settings.optional("METRIC_NAMESPACE"))[
        "Metrics"
    ]
    assert [m["MetricName"] for m in metrics] == ["StuckDeletionRequests"]
    again = sweep_in_process()  # the faults are used up: the next sweep takes what was left
    assert f"{third}-restart-1" in again["restarted"] and f"{first}-restart-1" in again["restarted"]


def test_a_request_whose_start_died_before_claiming_is_restarted_by_the_sweeper(deletions, env):
    user = new_user(deletions)
    request_id = requested(user)  # due now; its execution died before the claim (ClaimFailed)
    grace = sweeper.config.schedule_grace_seconds()
    assert not [n for n in sweep_in_process()["restarted"] if n.startswith(request_id)]  # within the grace
    swept = sweep_in_process(now=time.time() + grace + 1)
    assert f"{request_id}-restart-1" in swept["restarted"]
    assert swept["stuck"] >= 1
    assert run_workflow_in_process(request_id, f"{request_id}-restart-1") == "COMPLETED"
    assert deletions.leftovers(user) == GONE


def test_a_restart_that_dies_before_claiming_gets_a_new_name_then_fails_to_the_dlq(deletions, env):
    env.setenv("MAX_ATTEMPTS", "2")
    drain(deletions.dead_letter_queue)
    request_id = requested(new_user(deletions))
    table = deletions.table("deletion_requests")
    won = claims.claim(table, request_id, "exec-1", 60).claim
    claims.release_after_failure(table, won, "injected", 2, 0)
    lease = sweeper.config.lease_seconds()
    later = time.time()
    names_started = []
    # The stand-in workflow never claims: every restart "dies before claiming".
    for _ in range(3):
        swept = sweep_in_process(now=later)
        names_started += [n for n in swept["restarted"] if n.startswith(request_id)]
        later += lease + 1
    assert names_started == [f"{request_id}-restart-1", f"{request_id}-restart-2"]
    assert deletions.request_status(request_id) == "FAILED"
    mine = [
        m
        for m in drain(deletions.dead_letter_queue)
        if m["MessageAttributes"]["DELETION_REQUEST_ID"]["StringValue"] == request_id
    ]
    assert len(mine) == 1 and "before claiming" in mine[0]["MessageAttributes"]["ERROR_MESSAGE"]["StringValue"]


def test_a_malformed_row_beside_a_stuck_request_does_not_stop_the_sweep(deletions, env):
    """Issue 24, item 3: a PROCESSING row without user_id used to fail the whole sweep with
    KeyError: the stuck request stayed PROCESSING and no count was published."""
    env.setenv("METRIC_NAMESPACE", f"Test{uuid.uuid4().hex[:6]}")
    table = deletions.table("deletion_requests")
    stuck = requested(new_user(deletions))
    claimed_long_ago(table, stuck, "vanished", 100)
    broken = f"del-broken-{uuid.uuid4().hex[:8]}"
    table.put_item(
        Item={"deletion_request_id": broken, "status": "PROCESSING", "lease_expires_at": int(time.time()) - 100}
    )
    try:
        with pytest.raises(errors.SweepIncompleteError, match=broken):
            sweep_in_process()
        assert deletions.request_status(stuck) == "RETRYABLE"
        assert state.read(table, stuck).restarts == 1
        stats = clients.client("cloudwatch").get_metric_statistics(
            Namespace=sweeper.settings.optional("METRIC_NAMESPACE"),
            MetricName="StuckDeletionRequests",
            StartTime=time.time() - 600,
            EndTime=time.time() + 600,
            Period=60,
            Statistics=["Maximum", "SampleCount"],
        )["Datapoints"]
        assert sum(p["SampleCount"] for p in stats) == 1
        assert max(p["Maximum"] for p in stats) >= 2  # the stuck request and the malformed row
    finally:
        table.delete_item(Key={"deletion_request_id": broken})
