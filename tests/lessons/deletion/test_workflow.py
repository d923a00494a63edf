"""The deletion workflow for real: the ASL executed by Step Functions, every step a
Lambda running from the scenario's zip in its own worker process, crashes included.

Deployed here directly (functions, rendered ASL, state machine) rather than through
the Terraform stack, so the workflow is tested even where the stack is not applied.
"""

from __future__ import annotations

import io
import json
import re
import time
import uuid
import zipfile

import pytest

from idemlab import build, clients
from idemlab.barrier import all_at_once
from idemlab.lessons import deletion
from idemlab.lessons.deletion import Deletions, last_state
from support.deletion_scenario import private_scenario
from support.suite_timeouts import TEST_FUNCTION_TIMEOUTS

faults = deletion.import_function_module("erasure.faults")
request_deletion = deletion.import_function_module("request_deletion")

state = deletion.import_function_module("erasure.state")

ASL = deletion.settings.ROOT / "terraform/modules/idempotency_lab/workflows/account_deletion.asl.json"
# The claim, the steps (each function named after its step), the completion.
WORKFLOW_FUNCTIONS = ("claim_deletion", *state.STEPS, "complete_deletion")
steps = deletion.import_function_module("erasure.steps")
# A step's function makes its boto3 resource on its first invocation, inside the timeout,
# then a few calls: 4 s was a guess that this always fits, and the suite's stack saw 6 s
# steps time out on a loaded runner. 15 s is room for that; an injected timeout waits it out.
STEP_TIMEOUT_SECONDS = 15
# An execution's first run cold-starts each of its functions in turn: on a loaded 2-core runner
# 60 s ran out (a first execution still RUNNING). Each wait ends when the execution does.
EXECUTION_SECONDS = 180
TEST_SECONDS = 300
FUNCTION_TIMEOUTS = {
    # Under its page margin from the start, DeleteRecords stops after every page, whatever
    # a page costs: the paging test counts one page per invocation.
    "delete_records": steps.PAGE_MARGIN_SECONDS,
    # Every step in one invocation, as in the suite's stack.
    "naive_deletion_worker": TEST_FUNCTION_TIMEOUTS["naive_deletion_worker"],
}


def scenario_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for inside, path in sorted(build.source_files(deletion.FUNCTION_DIR).items()):
            archive.write(path, inside)
    return buffer.getvalue()


def render(definition: str, values: dict[str, str]) -> str:
    """What Terraform's templatefile does with ``${name}``."""
    missing = set(re.findall(r"\$\{(\w+)\}", definition)) - set(values)
    assert not missing, f"the ASL asks for {missing}"
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], definition)


@pytest.fixture(scope="module")
def deployed(stack, lambda_role) -> Deletions:
    private = private_scenario(stack)
    prefix = private["prefix"]
    env = {**private["environment"], "LEASE_SECONDS": "60", "MAX_ATTEMPTS": "3", "RETRY_DELAY_SECONDS": "0"}
    private["environment"] = env
    code = scenario_zip()
    lam = clients.client("lambda")
    arns = {}
    for key in (*WORKFLOW_FUNCTIONS, "naive_deletion_worker"):
        created = lam.create_function(
            FunctionName=f"{prefix}-{key}",
            Runtime="python3.12",
            Role=lambda_role,
            Handler=f"{key}.handler",
            Code={"ZipFile": code},
            Timeout=FUNCTION_TIMEOUTS.get(key, STEP_TIMEOUT_SECONDS),
            Environment={"Variables": env},
        )
        arns[f"{key}_arn"] = created["FunctionArn"]
        private["functions"][key] = created["FunctionName"]
    clients.client("stepfunctions").create_state_machine(
        name=private["state_machines"]["account_deletion"].rsplit(":", 1)[1],
        definition=render(ASL.read_text(), arns),
        roleArn=lambda_role,
        type="STANDARD",
    )
    return Deletions(private)


def new_request(deployed) -> tuple[str, str]:
    user_id = f"u{uuid.uuid4().hex[:10]}"
    deployed.seed_user(user_id, records=4, files=2)
    request_id = request_deletion.deletion_request_id(user_id)
    state.create(deployed.table("deletion_requests"), request_id, user_id, int(time.time()))
    return user_id, request_id


def finished(execution_arn: str, timeout: float = EXECUTION_SECONDS) -> dict:
    return deletion.wait_for(execution_arn, timeout)


GONE = {"records": 0, "files": 0, "identities": 0}


@pytest.mark.timeout(TEST_SECONDS)
def test_the_workflow_deletes_the_user_and_says_goodbye_once(deployed):
    user_id, request_id = new_request(deployed)
    bystander, _ = new_request(deployed)
    began = time.monotonic()
    execution = finished(deployed.start(request_id))
    print(f"one deletion took {time.monotonic() - began:.1f} s")
    assert execution["status"] == "SUCCEEDED", execution
    assert deployed.request_status(request_id) == "COMPLETED"
    assert deployed.leftovers(user_id) == GONE
    assert deployed.leftovers(bystander) == {"records": 4, "files": 2, "identities": 1}
    assert deployed.goodbyes(user_id) == 1


@pytest.mark.timeout(TEST_SECONDS)
def test_a_duplicate_start_with_the_same_name_is_recognised(deployed):
    user_id, request_id = new_request(deployed)
    first = deployed.start(request_id)
    try:
        second = deployed.start(request_id)
    except clients.client("stepfunctions").exceptions.ExecutionAlreadyExists:
        second = first  # already finished: refused outright
    assert second == first
    assert finished(first)["status"] == "SUCCEEDED"
    assert deployed.goodbyes(user_id) == 1


@pytest.mark.timeout(TEST_SECONDS)
def test_a_second_execution_after_completion_ends_as_already_done(deployed):
    user_id, request_id = new_request(deployed)
    assert finished(deployed.start(request_id))["status"] == "SUCCEEDED"
    again = deployed.start(request_id, f"{request_id}-again")
    assert finished(again)["status"] == "SUCCEEDED"
    assert last_state(again) == "AlreadyDone"
    assert deployed.goodbyes(user_id) == 1


@pytest.mark.timeout(TEST_SECONDS)
def test_concurrent_executions_leave_one_worker_and_one_goodbye(deployed):
    user_id, request_id = new_request(deployed)
    arns = all_at_once([lambda n=n: deployed.start(request_id, f"{request_id}-c{n}") for n in range(3)])
    outcomes = sorted(last_state(arn) for arn in arns if finished(arn)["status"] == "SUCCEEDED")
    assert len(outcomes) == 3, outcomes
    assert outcomes.count("Complete") == 1, outcomes
    assert deployed.request_status(request_id) == "COMPLETED"
    assert deployed.leftovers(user_id) == GONE
    assert deployed.goodbyes(user_id) == 1


@pytest.mark.timeout(TEST_SECONDS)
@pytest.mark.parametrize("kind", [faults.CRASH, faults.TIMEOUT, faults.ERROR])
def test_a_fault_in_a_step_is_retried_by_the_workflow_without_repeating_the_email(deployed, kind):
    user_id, request_id = new_request(deployed)
    deployed.arm_fault("send_goodbye", faults.AFTER_EFFECT, request_id, kind)
    execution = finished(deployed.start(request_id))
    assert execution["status"] == "SUCCEEDED", execution
    assert deployed.request_status(request_id) == "COMPLETED"
    assert deployed.leftovers(user_id) == GONE
    assert deployed.goodbyes(user_id) == 1


@pytest.mark.timeout(TEST_SECONDS)
def test_a_step_failing_past_its_retries_releases_the_request_as_retryable(deployed):
    user_id, request_id = new_request(deployed)
    deployed.arm_fault("delete_identity", faults.BEFORE, request_id, faults.ERROR, times=3)
    execution = finished(deployed.start(request_id))
    assert execution["status"] == "FAILED"
    assert execution.get("error") == "DeletionAttemptFailed"
    assert deployed.request_status(request_id) == "RETRYABLE"
    restarted = finished(deployed.start(request_id, f"{request_id}-retry-1"))
    assert restarted["status"] == "SUCCEEDED"
    assert deployed.leftovers(user_id) == GONE
    assert deployed.goodbyes(user_id) == 1


@pytest.mark.timeout(TEST_SECONDS)
def test_the_naive_worker_crashing_after_the_email_sends_it_twice(deployed):
    user_id, request_id = new_request(deployed)
    deployed.arm_fault("send_goodbye", faults.AFTER_EFFECT, request_id, faults.CRASH)
    lam = clients.client("lambda")
    payload = json.dumps({"deletion_request_id": request_id}).encode()
    crashed = lam.invoke(FunctionName=deployed.stack["functions"]["naive_deletion_worker"], Payload=payload)
    assert crashed.get("FunctionError") == "Unhandled"
    retried = lam.invoke(
        FunctionName=deployed.stack["functions"]["naive_deletion_worker"], Payload=payload
    )  # Lambda's own retry
    assert "FunctionError" not in retried
    assert deployed.leftovers(user_id) == GONE
    assert deployed.goodbyes(user_id) == 2


@pytest.fixture
def function_env(deployed, monkeypatch):
    """request_deletion and cancel_deletion run in this process with the functions' env."""
    for name, value in deployed.stack["environment"].items():
        monkeypatch.setenv(name, value)


def execution_arn(deployed, execution_name: str) -> str:
    return deployed.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution_name}"


@pytest.mark.timeout(TEST_SECONDS)
def test_a_requested_deletion_fires_on_schedule_and_completes(deployed, function_env):
    from idemlab.background.scheduler_firer import DELIVERED, SchedulerFirer

    user_id = f"u{uuid.uuid4().hex[:10]}"
    deployed.seed_user(user_id)
    asked = request_deletion.handler({"user_id": user_id, "delay_seconds": 2}, None)
    firer = SchedulerFirer(groups=(deployed.stack["schedule_group"],))
    assert firer.run_once(now=time.time()) == []  # not due yet
    # Fired on the real clock once due: the claim refuses a start before the due time.
    deletion.wait_until_due(asked["due_at"])
    fired = firer.run_once()
    assert [f.outcome for f in fired] == [DELIVERED]
    execution = finished(execution_arn(deployed, asked["deletion_request_id"]))
    assert execution["status"] == "SUCCEEDED"
    assert deployed.leftovers(user_id) == GONE
    assert deployed.goodbyes(user_id) == 1
    assert (
        clients.client("scheduler").list_schedules(
            GroupName=deployed.stack["schedule_group"], NamePrefix=f"deletion-{asked['deletion_request_id']}"
        )["Schedules"]
        == []
    )


@pytest.mark.timeout(TEST_SECONDS)
def test_a_schedule_fired_twice_deletes_once(deployed, function_env):
    from idemlab.background.scheduler_firer import DELIVERED, SchedulerFirer

    user_id = f"u{uuid.uuid4().hex[:10]}"
    deployed.seed_user(user_id)
    asked = request_deletion.handler({"user_id": user_id, "delay_seconds": 0}, None)
    firings = SchedulerFirer(groups=(deployed.stack["schedule_group"],)).fire_twice(
        f"deletion-{asked['deletion_request_id']}", deployed.stack["schedule_group"]
    )
    assert firings[0].outcome == DELIVERED
    # The second start has the same name: Step Functions either returns the running
    # execution or refuses it, and a refused event waits on the DLQ for the redrive.
    assert firings[1].outcome in (DELIVERED, "dead_lettered")
    assert finished(execution_arn(deployed, asked["deletion_request_id"]))["status"] == "SUCCEEDED"
    assert deployed.goodbyes(user_id) == 1
    assert deployed.leftovers(user_id) == GONE


@pytest.mark.timeout(2 * TEST_SECONDS)
def test_cancel_racing_the_fire_has_one_winner_and_a_consistent_end(deployed, function_env):
    from idemlab.background.scheduler_firer import SchedulerFirer

    cancel_deletion = deletion.import_function_module("cancel_deletion")
    tally = {"CANCELLED": 0, "COMPLETED": 0}
    for round_number in range(6):
        user_id = f"u{uuid.uuid4().hex[:10]}"
        deployed.seed_user(user_id)
        asked = request_deletion.handler({"user_id": user_id, "delay_seconds": 0}, None)
        request_id = asked["deletion_request_id"]
        firer = SchedulerFirer(groups=(deployed.stack["schedule_group"],))

        def fire():
            try:
                return firer.fire_now(f"deletion-{request_id}", deployed.stack["schedule_group"])
            except LookupError:  # the cancel deleted the schedule first
                return "schedule deleted first"

        def cancel():
            # Later in each round, so the claim sometimes gets there first.
            time.sleep(round_number * 0.4)
            return cancel_deletion.handler({"deletion_request_id": request_id, "user_id": user_id}, None)

        # Each join ends when its call does; None is left only by a call still running.
        fired, cancelled = all_at_once([fire, cancel], join_seconds=120)
        assert None not in (fired, cancelled), f"round {round_number}: fire {fired!r}, cancel {cancelled!r} after 120 s"
        answers = {"fire": fired, "cancel": cancelled}
        if not isinstance(fired, str) and fired.outcome == "delivered":
            finished(execution_arn(deployed, request_id))
        status = deployed.request_status(request_id)
        tally[status] += 1
        assert answers["cancel"]["cancelled"] == (status == "CANCELLED")
        if status == "CANCELLED":
            assert deployed.leftovers(user_id) == {"records": 3, "files": 2, "identities": 1}
            assert deployed.goodbyes(user_id) == 0
        else:
            assert deployed.leftovers(user_id) == GONE
            assert deployed.goodbyes(user_id) == 1
    print(f"cancel vs fire: {tally}")
    assert sum(tally.values()) == 6


@pytest.mark.timeout(TEST_SECONDS)
def test_a_user_with_more_records_than_one_invocation_deletes_is_finished_by_the_workflow(deployed):
    # With a function timeout within its page margin, every DeleteRecords invocation is short
    # of time after its first page: it stops there, and the workflow runs it again.
    user_id = f"u{uuid.uuid4().hex[:10]}"
    deployed.seed_user(user_id, records=250, files=1)
    request_id = request_deletion.deletion_request_id(user_id)
    state.create(deployed.table("deletion_requests"), request_id, user_id, int(time.time()))
    execution = finished(deployed.start(request_id))
    assert execution["status"] == "SUCCEEDED", execution
    ran = [
        what for state_name, what in deletion.task_attempts(execution["executionArn"]) if state_name == "DeleteRecords"
    ]
    assert ran == ["succeeded"] * 3  # 99 + 99 + 52 records
    assert deployed.request_status(request_id) == "COMPLETED"
    assert deployed.leftovers(user_id) == GONE
    assert deployed.goodbyes(user_id) == 1


@pytest.mark.timeout(TEST_SECONDS)
def test_a_workflow_started_before_the_due_time_deletes_nothing_and_the_request_can_still_be_cancelled(deployed):
    """Issue 24, item 1: a start by hand a day early ends at NotDueYet; records, files and
    identity stay, the request stays SCHEDULED, and the user can still cancel."""
    user_id = f"u{uuid.uuid4().hex[:10]}"
    deployed.seed_user(user_id, records=4, files=2)
    request_id = f"del-early-{uuid.uuid4().hex[:10]}"
    state.create(deployed.table("deletion_requests"), request_id, user_id, int(time.time()) + 24 * 3600)
    execution = finished(deployed.start(request_id))
    assert (execution["status"], last_state(execution["executionArn"])) == ("SUCCEEDED", "NotDueYet")
    assert deployed.leftovers(user_id) == {"records": 4, "files": 2, "identities": 1}
    assert deployed.goodbyes(user_id) == 0
    assert deployed.request_status(request_id) == "SCHEDULED"
    assert state.cancel(deployed.table("deletion_requests"), request_id, user_id)[0] is True
