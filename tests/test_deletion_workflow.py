"""The deletion workflow for real: the ASL executed by Step Functions, every step a
Lambda running from the scenario's zip in its own worker process, crashes included.

Deployed here directly (functions, rendered ASL, state machine) rather than through
the Terraform stack, so the workflow is tested even where the stack is not applied.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
import uuid
import zipfile

import pytest

from idemlab import build, clients
from idemlab.lessons import deletion

faults = deletion.import_function_module("deletion_faults")
request_deletion = deletion.import_function_module("request_deletion")

ASL = deletion.settings.ROOT / "terraform/modules/idempotency_lab/workflows/account_deletion.asl.json"
WORKFLOW_FUNCTIONS = ("claim_deletion", "delete_records", "delete_files", "delete_identity", "send_goodbye", "complete_deletion")
# Short, so an injected timeout costs little; far above what a step needs here.
STEP_TIMEOUT_SECONDS = 4


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
def deployed(backend, lambda_role) -> deletion.Names:
    names = deletion.create_private_scenario()
    prefix = names.bucket.split("-")[0]
    env = names.function_env(LEASE_SECONDS=60, MAX_ATTEMPTS=3, RETRY_DELAY_SECONDS=0)
    code = scenario_zip()
    lam = clients.client("lambda")
    arns = {}
    for key in WORKFLOW_FUNCTIONS + ("naive_deletion_worker",):
        created = lam.create_function(
            FunctionName=f"{prefix}-{key}",
            Runtime="python3.12",
            Role=lambda_role,
            Handler=f"{key}.handler",
            Code={"ZipFile": code},
            Timeout=STEP_TIMEOUT_SECONDS,
            Environment={"Variables": env},
        )
        arns[f"{key}_arn"] = created["FunctionArn"]
    clients.client("stepfunctions").create_state_machine(
        name=names.state_machine_arn.rsplit(":", 1)[1],
        definition=render(ASL.read_text(), arns),
        roleArn=lambda_role,
        type="STANDARD",
    )
    names.naive_worker = arns["naive_deletion_worker_arn"]
    return names


def new_request(names) -> tuple[str, str]:
    user_id = f"u{uuid.uuid4().hex[:10]}"
    deletion.seed_user(names, user_id, records=4, files=2)
    request_id = request_deletion.deletion_request_id(user_id)
    state = deletion.import_function_module("deletion_state")
    state.create(deletion._dynamodb().Table(names.tables["deletion_requests"]), request_id, user_id, int(time.time()))
    return user_id, request_id


def start(names, request_id: str, name: str | None = None) -> str:
    return clients.client("stepfunctions").start_execution(
        stateMachineArn=names.state_machine_arn,
        name=name or request_id,
        input=json.dumps({"deletion_request_id": request_id}),
    )["executionArn"]


def finished(execution_arn: str, timeout: float = 60) -> dict:
    return clients.wait_for_execution(execution_arn, timeout, poll_seconds=0.2)


def last_state(execution_arn: str) -> str:
    """The name of the last state the execution entered (ordered by event id)."""
    events = clients.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    entered = [e for e in sorted(events, key=lambda e: e["id"]) if e.get("stateEnteredEventDetails")]
    return entered[-1]["stateEnteredEventDetails"]["name"] if entered else "?"


GONE = {"records": 0, "files": 0, "identities": 0}


@pytest.mark.timeout(120)
def test_the_workflow_deletes_the_user_and_says_goodbye_once(deployed):
    user_id, request_id = new_request(deployed)
    bystander, _ = new_request(deployed)
    began = time.monotonic()
    execution = finished(start(deployed, request_id))
    print(f"one deletion took {time.monotonic() - began:.1f} s")
    assert execution["status"] == "SUCCEEDED", execution
    assert deletion.request_status(deployed, request_id) == "COMPLETED"
    assert deletion.leftovers(deployed, user_id) == GONE
    assert deletion.leftovers(deployed, bystander) == {"records": 4, "files": 2, "identities": 1}
    assert deletion.goodbyes(deployed, user_id) == 1


@pytest.mark.timeout(120)
def test_a_duplicate_start_with_the_same_name_is_recognised(deployed):
    user_id, request_id = new_request(deployed)
    first = start(deployed, request_id)
    try:
        second = start(deployed, request_id)
    except clients.client("stepfunctions").exceptions.ExecutionAlreadyExists:
        second = first  # already finished: refused outright
    assert second == first
    assert finished(first)["status"] == "SUCCEEDED"
    assert deletion.goodbyes(deployed, user_id) == 1


@pytest.mark.timeout(120)
def test_a_second_execution_after_completion_ends_as_already_done(deployed):
    user_id, request_id = new_request(deployed)
    assert finished(start(deployed, request_id))["status"] == "SUCCEEDED"
    again = start(deployed, request_id, name=f"{request_id}-again")
    assert finished(again)["status"] == "SUCCEEDED"
    assert last_state(again) == "AlreadyDone"
    assert deletion.goodbyes(deployed, user_id) == 1


@pytest.mark.timeout(120)
def test_concurrent_executions_leave_one_worker_and_one_goodbye(deployed):
    user_id, request_id = new_request(deployed)
    arns = []
    threads = [threading.Thread(target=lambda n=n: arns.append(start(deployed, request_id, f"{request_id}-c{n}"))) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcomes = sorted(last_state(arn) for arn in arns if finished(arn)["status"] == "SUCCEEDED")
    assert len(outcomes) == 3, outcomes
    assert outcomes.count("Complete") == 1, outcomes
    assert deletion.request_status(deployed, request_id) == "COMPLETED"
    assert deletion.leftovers(deployed, user_id) == GONE
    assert deletion.goodbyes(deployed, user_id) == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", [faults.CRASH, faults.TIMEOUT, faults.ERROR])
def test_a_fault_in_a_step_is_retried_by_the_workflow_without_repeating_the_email(deployed, kind):
    user_id, request_id = new_request(deployed)
    deletion.arm_fault(deployed, "send_goodbye", faults.AFTER_EFFECT, request_id, kind)
    execution = finished(start(deployed, request_id))
    assert execution["status"] == "SUCCEEDED", execution
    assert deletion.request_status(deployed, request_id) == "COMPLETED"
    assert deletion.leftovers(deployed, user_id) == GONE
    assert deletion.goodbyes(deployed, user_id) == 1


@pytest.mark.timeout(120)
def test_a_step_failing_past_its_retries_releases_the_request_as_retryable(deployed):
    user_id, request_id = new_request(deployed)
    deletion.arm_fault(deployed, "delete_identity", faults.BEFORE, request_id, faults.ERROR, times=3)
    execution = finished(start(deployed, request_id))
    assert execution["status"] == "FAILED"
    assert execution.get("error") == "DeletionAttemptFailed"
    assert deletion.request_status(deployed, request_id) == "RETRYABLE"
    restarted = finished(start(deployed, request_id, name=f"{request_id}-retry-1"))
    assert restarted["status"] == "SUCCEEDED"
    assert deletion.leftovers(deployed, user_id) == GONE
    assert deletion.goodbyes(deployed, user_id) == 1


@pytest.mark.timeout(120)
def test_the_naive_worker_crashing_after_the_email_sends_it_twice(deployed):
    user_id, request_id = new_request(deployed)
    deletion.arm_fault(deployed, "send_goodbye", faults.AFTER_EFFECT, request_id, faults.CRASH)
    lam = clients.client("lambda")
    payload = json.dumps({"deletion_request_id": request_id}).encode()
    crashed = lam.invoke(FunctionName=deployed.naive_worker, Payload=payload)
    assert crashed.get("FunctionError") == "Unhandled"
    retried = lam.invoke(FunctionName=deployed.naive_worker, Payload=payload)  # Lambda's own retry
    assert "FunctionError" not in retried
    assert deletion.leftovers(deployed, user_id) == GONE
    assert deletion.goodbyes(deployed, user_id) == 2


@pytest.fixture
def function_env(deployed, monkeypatch):
    """request_deletion and cancel_deletion run in this process with the functions' env."""
    for name, value in deployed.function_env().items():
        monkeypatch.setenv(name, value)


def execution_arn(names, execution_name: str) -> str:
    return names.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution_name}"


@pytest.mark.timeout(120)
def test_a_requested_deletion_fires_on_schedule_and_completes(deployed, function_env):
    from idemlab.background.scheduler_firer import DELIVERED, SchedulerFirer

    user_id = f"u{uuid.uuid4().hex[:10]}"
    deletion.seed_user(deployed, user_id)
    asked = request_deletion.handler({"user_id": user_id, "delay_seconds": 2}, None)
    firer = SchedulerFirer(groups=(deployed.schedule_group,))
    assert firer.run_once(now=time.time()) == []  # not due yet
    fired = firer.run_once(now=asked["due_at"] + 1)
    assert [f.outcome for f in fired] == [DELIVERED]
    execution = finished(execution_arn(deployed, asked["deletion_request_id"]))
    assert execution["status"] == "SUCCEEDED"
    assert deletion.leftovers(deployed, user_id) == GONE
    assert deletion.goodbyes(deployed, user_id) == 1
    assert clients.client("scheduler").list_schedules(GroupName=deployed.schedule_group, NamePrefix=f"deletion-{asked['deletion_request_id']}")["Schedules"] == []


@pytest.mark.timeout(120)
def test_a_schedule_fired_twice_deletes_once(deployed, function_env):
    from idemlab.background.scheduler_firer import DELIVERED, SchedulerFirer

    user_id = f"u{uuid.uuid4().hex[:10]}"
    deletion.seed_user(deployed, user_id)
    asked = request_deletion.handler({"user_id": user_id, "delay_seconds": 0}, None)
    firings = SchedulerFirer(groups=(deployed.schedule_group,)).fire_twice(f"deletion-{asked['deletion_request_id']}", deployed.schedule_group)
    assert firings[0].outcome == DELIVERED
    # The second start has the same name: Step Functions either returns the running
    # execution or refuses it, and a refused event waits on the DLQ for the redrive.
    assert firings[1].outcome in (DELIVERED, "dead_lettered")
    assert finished(execution_arn(deployed, asked["deletion_request_id"]))["status"] == "SUCCEEDED"
    assert deletion.goodbyes(deployed, user_id) == 1
    assert deletion.leftovers(deployed, user_id) == GONE


@pytest.mark.timeout(240)
def test_cancel_racing_the_fire_has_one_winner_and_a_consistent_end(deployed, function_env):
    from idemlab.background.scheduler_firer import SchedulerFirer

    cancel_deletion = deletion.import_function_module("cancel_deletion")
    tally = {"CANCELLED": 0, "COMPLETED": 0}
    for round_number in range(6):
        user_id = f"u{uuid.uuid4().hex[:10]}"
        deletion.seed_user(deployed, user_id)
        asked = request_deletion.handler({"user_id": user_id, "delay_seconds": 0}, None)
        request_id = asked["deletion_request_id"]
        firer = SchedulerFirer(groups=(deployed.schedule_group,))
        start_line = threading.Barrier(2)
        answers = {}

        def fire():
            start_line.wait()
            try:
                answers["fire"] = firer.fire_now(f"deletion-{request_id}", deployed.schedule_group)
            except LookupError:  # the cancel deleted the schedule first
                answers["fire"] = None

        def cancel():
            start_line.wait()
            # Later in each round, so the claim sometimes gets there first.
            time.sleep(round_number * 0.4)
            answers["cancel"] = cancel_deletion.handler({"deletion_request_id": request_id}, None)

        threads = [threading.Thread(target=fire), threading.Thread(target=cancel)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        if answers.get("fire") is not None and answers["fire"].outcome == "delivered":
            finished(execution_arn(deployed, request_id))
        status = deletion.request_status(deployed, request_id)
        tally[status] += 1
        assert answers["cancel"]["cancelled"] == (status == "CANCELLED")
        if status == "CANCELLED":
            assert deletion.leftovers(deployed, user_id) == {"records": 3, "files": 2, "identities": 1}
            assert deletion.goodbyes(deployed, user_id) == 0
        else:
            assert deletion.leftovers(deployed, user_id) == GONE
            assert deletion.goodbyes(deployed, user_id) == 1
    print(f"cancel vs fire: {tally}")
    assert sum(tally.values()) == 6


@pytest.mark.timeout(120)
def test_a_user_with_more_records_than_one_invocation_deletes_is_finished_by_the_workflow(deployed):
    # With a 4-second function timeout, every DeleteRecords invocation is short of time
    # after its first page: it stops there, and the workflow runs it again.
    user_id = f"u{uuid.uuid4().hex[:10]}"
    deletion.seed_user(deployed, user_id, records=250, files=1)
    request_id = request_deletion.deletion_request_id(user_id)
    state = deletion.import_function_module("deletion_state")
    state.create(deletion._dynamodb().Table(deployed.tables["deletion_requests"]), request_id, user_id, int(time.time()))
    execution = finished(start(deployed, request_id))
    assert execution["status"] == "SUCCEEDED", execution
    ran = [what for state_name, what in deletion.task_attempts(execution["executionArn"]) if state_name == "DeleteRecords"]
    assert ran == ["succeeded"] * 3  # 99 + 99 + 52 records
    assert deletion.request_status(deployed, request_id) == "COMPLETED"
    assert deletion.leftovers(deployed, user_id) == GONE
    assert deletion.goodbyes(deployed, user_id) == 1
