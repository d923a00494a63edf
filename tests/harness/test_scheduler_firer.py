"""The scheduler firer against a real API server: due one-time schedules fire their
targets, retries follow the RetryPolicy, failures land on the dead-letter queue with
Scheduler's attributes, and ActionAfterCompletion=DELETE removes the schedule."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid

import pytest

from idemlab import clients
from idemlab.background import scheduler_firer
from idemlab.background.scheduler_firer import DEAD_LETTERED, DELIVERED, RETRY_LATER, SchedulerFirer
from idemlab.background.targets import DeliveryFailed, deliver


@pytest.fixture(scope="module")
def world(backend):
    """A schedule group, a target queue, a dead-letter queue and a state machine."""
    tag = uuid.uuid4().hex[:8]
    sqs = clients.client("sqs")
    target_url = sqs.create_queue(QueueName=f"fire-target-{tag}")["QueueUrl"]
    dlq_url = sqs.create_queue(QueueName=f"fire-dlq-{tag}")["QueueUrl"]
    arn = lambda url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]  # noqa: E731
    clients.client("scheduler").create_schedule_group(Name=f"fire-{tag}")
    machine = clients.client("stepfunctions").create_state_machine(
        name=f"fire-{tag}",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/fire",
        type="STANDARD",
    )
    return {
        "group": f"fire-{tag}",
        "target_url": target_url,
        "target_arn": arn(target_url),
        "dlq_url": dlq_url,
        "dlq_arn": arn(dlq_url),
        "machine_arn": machine["stateMachineArn"],
    }


def at(epoch: float) -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(epoch))


def schedule(world, target_arn: str, input_text: str, due: float, after="DELETE", retries=3, max_age=3600) -> str:
    name = f"s-{uuid.uuid4().hex[:10]}"
    clients.client("scheduler").create_schedule(
        Name=name,
        GroupName=world["group"],
        ScheduleExpression=at(due),
        ScheduleExpressionTimezone="UTC",
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion=after,
        Target={
            "Arn": target_arn,
            "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
            "Input": input_text,
            "RetryPolicy": {"MaximumRetryAttempts": retries, "MaximumEventAgeInSeconds": max_age},
            "DeadLetterConfig": {"Arn": world["dlq_arn"]},
        },
    )
    return name


def exists(world, name: str) -> bool:
    listed = clients.client("scheduler").list_schedules(GroupName=world["group"])["Schedules"]
    return name in {s["Name"] for s in listed}


def drain(url: str) -> list[dict]:
    sqs = clients.client("sqs")
    found = []
    while True:
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
        )
        if not got.get("Messages"):
            return found
        for message in got["Messages"]:
            found.append(message)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def mine(firings, name):
    return [f for f in firings if f.name == name]


def test_a_schedule_fires_only_once_it_is_due_and_then_is_deleted(world):
    firer = SchedulerFirer(groups=(world["group"],))
    due = time.time() + 3600
    name = schedule(world, world["target_arn"], '{"hello": 1}', due)
    assert mine(firer.run_once(now=due - 1), name) == []
    assert exists(world, name)
    fired = mine(firer.run_once(now=due + 1), name)
    assert [f.outcome for f in fired] == [DELIVERED]
    assert [json.loads(m["Body"]) for m in drain(world["target_url"])] == [{"hello": 1}]
    assert not exists(world, name)
    assert mine(firer.run_once(now=due + 2), name) == []


def test_a_kept_one_time_schedule_fires_once_only(world):
    firer = SchedulerFirer(groups=(world["group"],))
    due = time.time() - 1
    name = schedule(world, world["target_arn"], '{"kept": true}', due, after="NONE")
    assert [f.outcome for f in mine(firer.run_once(), name)] == [DELIVERED]
    assert mine(firer.run_once(), name) == []
    assert mine(SchedulerFirer(groups=(world["group"],)).run_once(), name) == []  # a restarted firer too
    assert exists(world, name)
    assert len(drain(world["target_url"])) == 1


def test_the_universal_start_execution_target_names_the_execution(world):
    execution_name = f"req-{uuid.uuid4().hex[:8]}"
    start = {
        "StateMachineArn": world["machine_arn"],
        "Name": execution_name,
        "Input": json.dumps({"deletion_request_id": "x"}),
    }
    name = schedule(world, "arn:aws:scheduler:::aws-sdk:sfn:startExecution", json.dumps(start), time.time() - 1)
    fired = SchedulerFirer(groups=(world["group"],)).fire_now(name, world["group"])
    assert fired.outcome == DELIVERED
    executions = clients.client("stepfunctions").list_executions(stateMachineArn=world["machine_arn"])["executions"]
    assert [e["name"] for e in executions].count(execution_name) == 1


def test_a_lambda_target_is_invoked_asynchronously(world, recording_function):
    arn = recording_function.arn
    name = schedule(world, arn, '{"id": "fired-by-schedule"}', time.time() - 1)
    assert SchedulerFirer(groups=(world["group"],)).fire_now(name, world["group"]).outcome == DELIVERED
    assert recording_function.ran_with("fired-by-schedule"), "the Lambda target never ran"


def test_fire_twice_delivers_the_same_event_twice(world):
    name = schedule(world, world["target_arn"], '{"twice": true}', time.time() + 3600)
    outcomes = [f.outcome for f in SchedulerFirer(groups=(world["group"],)).fire_twice(name, world["group"])]
    assert outcomes == [DELIVERED, DELIVERED]
    assert [json.loads(m["Body"]) for m in drain(world["target_url"])] == [{"twice": True}] * 2
    assert not exists(world, name)


def test_a_target_that_cannot_exist_goes_to_the_dead_letter_queue_at_once(world):
    missing = "arn:aws:lambda:us-east-1:123456789012:function:no-such-function"
    name = schedule(world, missing, '{"lost": 1}', time.time() - 1, retries=5)
    fired = SchedulerFirer(groups=(world["group"],)).fire_now(name, world["group"])
    assert (fired.outcome, fired.attempt) == (DEAD_LETTERED, 1)
    [letter] = drain(world["dlq_url"])
    attributes = {k: v["StringValue"] for k, v in letter["MessageAttributes"].items()}
    assert json.loads(letter["Body"]) == {"lost": 1}
    assert attributes["TARGET_ARN"] == missing
    assert attributes["ERROR_CODE"] == "ResourceNotFoundException"
    assert attributes["RETRY_ATTEMPTS"] == "0"
    assert attributes["SCHEDULE_ARN"].endswith(f"/{world['group']}/{name}")
    assert not exists(world, name)


def test_a_server_fault_is_retried_by_the_policy_then_dead_lettered(world):
    # An action the embedded backend answers with HTTP 500 (moto does not implement
    # it): a server-side fault, which Scheduler retries.
    target = "arn:aws:scheduler:::aws-sdk:sqs:startMessageMoveTask"
    due = time.time() - 1
    name = schedule(world, target, json.dumps({"SourceArn": world["dlq_arn"]}), due, retries=2)
    firer = SchedulerFirer(groups=(world["group"],))
    outcomes, now = [], due + 1
    for _ in range(6):
        outcomes += [f.outcome for f in mine(firer.run_once(now=now), name)]
        now += 10  # past any backoff
    assert outcomes == [RETRY_LATER, RETRY_LATER, DEAD_LETTERED]
    [letter] = drain(world["dlq_url"])
    assert letter["MessageAttributes"]["RETRY_ATTEMPTS"]["StringValue"] == "2"
    assert not exists(world, name)


def test_a_retry_waits_for_its_backoff(world):
    target = "arn:aws:scheduler:::aws-sdk:sqs:startMessageMoveTask"
    due = time.time() - 1
    name = schedule(world, target, json.dumps({"SourceArn": world["dlq_arn"]}), due, retries=3)
    firer = SchedulerFirer(groups=(world["group"],))
    assert [f.outcome for f in mine(firer.run_once(now=due + 1), name)] == [RETRY_LATER]
    assert mine(firer.run_once(now=due + 1.5), name) == []  # the first backoff is 1 s
    assert [f.outcome for f in mine(firer.run_once(now=due + 2.5), name)] == [RETRY_LATER]
    clients.client("scheduler").delete_schedule(Name=name, GroupName=world["group"])


def test_an_event_older_than_its_maximum_age_is_dead_lettered_not_delivered(world):
    name = schedule(world, world["target_arn"], '{"late": 1}', time.time() - 1, max_age=60)
    fired = SchedulerFirer(groups=(world["group"],)).fire_late(name, world["group"], seconds_late=61)
    assert fired.outcome == DEAD_LETTERED
    assert drain(world["target_url"]) == []
    [letter] = drain(world["dlq_url"])
    assert letter["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "AWS.Scheduler.EventAgeExceeded"


def test_late_but_within_the_maximum_age_is_still_delivered(world):
    name = schedule(world, world["target_arn"], '{"late": 2}', time.time() - 1, max_age=60)
    assert (
        SchedulerFirer(groups=(world["group"],)).fire_late(name, world["group"], seconds_late=59).outcome == DELIVERED
    )
    assert len(drain(world["target_url"])) == 1


def test_a_bad_universal_input_is_refused_without_retrying(world):
    name = schedule(world, "arn:aws:scheduler:::aws-sdk:sfn:startExecution", '{"NoSuchParameter": 1}', time.time() - 1)
    fired = SchedulerFirer(groups=(world["group"],)).fire_now(name, world["group"])
    assert fired.outcome == DEAD_LETTERED and "NoSuchParameter" in fired.detail
    drain(world["dlq_url"])


def test_an_input_of_the_wrong_type_is_dead_lettered_not_retried_forever(world):
    name = schedule(world, "arn:aws:scheduler:::aws-sdk:sfn:startExecution", '{"StateMachineArn": 5}', time.time() - 1)
    fired = SchedulerFirer(groups=(world["group"],)).fire_now(name, world["group"])
    assert (fired.outcome, fired.attempt) == (DEAD_LETTERED, 1)
    [letter] = drain(world["dlq_url"])
    assert letter["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "ValidationException"


def test_a_missing_dead_letter_queue_drops_the_event_and_other_schedules_still_fire(world):
    gone = "arn:aws:sqs:us-east-1:123456789012:no-such-dlq"
    name = f"s-{uuid.uuid4().hex[:10]}"
    clients.client("scheduler").create_schedule(
        Name=name,
        GroupName=world["group"],
        ScheduleExpression=at(time.time() - 1),
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target={
            "Arn": "arn:aws:lambda:us-east-1:123456789012:function:gone",
            "RoleArn": "arn:aws:iam::123456789012:role/s",
            "DeadLetterConfig": {"Arn": gone},
        },
    )
    fine = schedule(world, world["target_arn"], '{"fine": 1}', time.time() - 1)
    outcomes = {f.name: f.outcome for f in SchedulerFirer(groups=(world["group"],)).run_once()}
    assert outcomes[name] == "dropped" and outcomes[fine] == DELIVERED
    assert not exists(world, name)
    drain(world["target_url"])


def test_the_module_loop_runs_a_pass_and_exits(world):
    name = schedule(world, world["target_arn"], '{"loop": 1}', time.time() - 1)
    scheduler_firer.main(["--once", "--group", world["group"]])
    assert not exists(world, name)
    assert [json.loads(m["Body"]) for m in drain(world["target_url"])] == [{"loop": 1}]


def start_firer(*arguments: str, block_sigterm: bool = False) -> subprocess.Popen:
    """The firer as `make up` starts it, pointed at a port nothing listens on. With
    `block_sigterm`, SIGTERM is blocked across the spawn (the child inherits the mask), so a
    SIGTERM sent at once stays pending until the firer itself unblocks it."""
    from idemlab.lessons.deletion import settings

    env = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1"}
    command = [sys.executable, "-m", "idemlab.background.scheduler_firer", *arguments]
    if block_sigterm:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        return subprocess.Popen(command, cwd=settings.ROOT, env=env, stderr=subprocess.PIPE, text=True)
    finally:
        if block_sigterm:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def read_until(process: subprocess.Popen, wanted: str, timeout: float = 60) -> str:
    """The firer's stderr up to the first line containing `wanted` (its condition, not a number of seconds)."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        readable, _, _ = select.select([process.stderr], [], [], max(0.0, deadline - time.monotonic()))
        line = process.stderr.readline() if readable else ""
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if wanted in line:
            return "".join(seen)
    raise AssertionError(f"no line with {wanted!r} (exit {process.poll()}): {''.join(seen)}")


def test_the_loop_keeps_running_while_the_backend_is_away_and_stops_on_sigterm():
    """Each pass fails, is reported, and the loop goes on until SIGTERM."""
    process = start_firer("--interval", "0.2")
    try:
        read_until(process, "scheduler-firer: up")
        read_until(process, "pass failed")  # a pass failed, and the loop is still there
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0
    assert "stopped" in err


def test_a_sigterm_sent_the_moment_the_firer_starts_ends_it_cleanly():
    """`make down` right after `make up`: the SIGTERM comes before the firer has run a line
    of its own (held pending by the mask it inherits); it still ends with status 0 and says so."""
    process = start_firer("--interval", "0.2", block_sigterm=True)
    try:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "scheduler-firer: stopped" in err


def test_an_input_that_is_not_json_is_refused_with_the_parse_error():
    # Refused before any call is made: the message keeps json's own text (where it failed).
    with pytest.raises(DeliveryFailed) as refused:
        deliver("arn:aws:scheduler:::aws-sdk:sfn:startExecution", "{not json")
    assert refused.value.code == "ValidationException"
    assert "is not JSON: Expecting property name enclosed in double quotes" in str(refused.value)
    assert not refused.value.retryable


def test_an_input_that_is_json_but_not_an_object_is_refused_naming_its_type():
    with pytest.raises(DeliveryFailed) as refused:
        deliver("arn:aws:scheduler:::aws-sdk:sfn:startExecution", "[1, 2]")
    assert "must be a JSON object, not a list" in str(refused.value)
