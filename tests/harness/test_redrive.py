"""The redrive tool against a real API server: dead-lettered events go back to their
targets, rate-limited, and only what was delivered leaves the queue."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from idemlab import clients
from idemlab.background import redrive
from idemlab.background.scheduler_firer import DEAD_LETTERED, SchedulerFirer
from idemlab.lessons import queue_depth as depth

PASS_MACHINE = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
ROLE = "arn:aws:iam::123456789012:role/redrive"


@pytest.fixture
def dlq(backend):
    sqs = clients.client("sqs")
    url = sqs.create_queue(QueueName=f"redrive-dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return {"url": url, "arn": arn}


def executions(machine_arn: str) -> list[str]:
    return [
        e["name"] for e in clients.client("stepfunctions").list_executions(stateMachineArn=machine_arn)["executions"]
    ]


def dead_letter_a_start(dlq, machine_name: str, execution_name: str) -> None:
    """A real dead-letter event: the firer fails to start a workflow that does not exist yet."""
    group = f"redrive-{uuid.uuid4().hex[:8]}"
    scheduler = clients.client("scheduler")
    scheduler.create_schedule_group(Name=group)
    machine_arn = f"arn:aws:states:us-east-1:123456789012:stateMachine:{machine_name}"
    scheduler.create_schedule(
        Name="start",
        GroupName=group,
        ScheduleExpression=time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(time.time() - 1)),
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target={
            "Arn": "arn:aws:scheduler:::aws-sdk:sfn:startExecution",
            "RoleArn": ROLE,
            "Input": json.dumps({"StateMachineArn": machine_arn, "Name": execution_name, "Input": "{}"}),
            "RetryPolicy": {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60},
            "DeadLetterConfig": {"Arn": dlq["arn"]},
        },
    )
    assert SchedulerFirer(groups=(group,)).fire_now("start", group).outcome == DEAD_LETTERED


def test_a_dead_lettered_schedule_event_is_delivered_once_its_target_exists(dlq):
    machine_name, execution_name = f"late-{uuid.uuid4().hex[:8]}", f"req-{uuid.uuid4().hex[:8]}"
    dead_letter_a_start(dlq, machine_name, execution_name)
    first = redrive.run_once(dlq["url"])
    assert len(first.failed) == 1 and "StateMachineDoesNotExist" in next(iter(first.failed.values()))
    assert depth(dlq["url"]) == 1  # left for later, not lost
    machine = clients.client("stepfunctions").create_state_machine(
        name=machine_name, definition=PASS_MACHINE, roleArn=ROLE
    )
    second = redrive.run_once(dlq["url"])
    assert (len(second.delivered), second.failed) == (1, {})
    assert executions(machine["stateMachineArn"]) == [execution_name]
    assert depth(dlq["url"]) == 0
    third = redrive.run_once(dlq["url"])
    assert (third.delivered, third.already_delivered, third.failed) == ([], [], {})


def test_a_duplicate_message_is_recognised_as_already_delivered(dlq):
    machine = clients.client("stepfunctions").create_state_machine(
        name=f"dup-{uuid.uuid4().hex[:8]}", definition=PASS_MACHINE, roleArn=ROLE
    )
    body = json.dumps({"StateMachineArn": machine["stateMachineArn"], "Name": "only-once", "Input": "{}"})
    attributes = {"TARGET_ARN": {"DataType": "String", "StringValue": "arn:aws:scheduler:::aws-sdk:sfn:startExecution"}}
    for _ in range(2):
        clients.client("sqs").send_message(QueueUrl=dlq["url"], MessageBody=body, MessageAttributes=attributes)
    report = redrive.run_once(dlq["url"])
    assert (len(report.delivered), len(report.already_delivered)) == (1, 1)
    assert executions(machine["stateMachineArn"]) == ["only-once"]
    assert depth(dlq["url"]) == 0


def test_a_deletion_dead_letter_restarts_the_workflow_named_after_the_message(dlq):
    machine = clients.client("stepfunctions").create_state_machine(
        name=f"del-{uuid.uuid4().hex[:8]}", definition=PASS_MACHINE, roleArn=ROLE
    )
    attributes = {"TARGET_ARN": {"DataType": "String", "StringValue": machine["stateMachineArn"]}}
    sent = clients.client("sqs").send_message(
        QueueUrl=dlq["url"],
        MessageBody=json.dumps({"deletion_request_id": "del-1", "redrive": True}),
        MessageAttributes=attributes,
    )
    report = redrive.run_once(dlq["url"])
    assert report.delivered == [sent["MessageId"]]
    assert executions(machine["stateMachineArn"]) == [f"redrive-{sent['MessageId']}"]


def test_a_lambda_on_failure_record_reinvokes_the_function(dlq, recording_function):
    arn = recording_function.arn
    record = {
        "version": "1.0",
        "requestContext": {
            "functionArn": f"{arn}:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": 3,
        },
        "requestPayload": {"id": "came-back"},
        "responsePayload": {"errorType": "Boom"},
    }
    clients.client("sqs").send_message(QueueUrl=dlq["url"], MessageBody=json.dumps(record))
    assert len(redrive.run_once(dlq["url"]).delivered) == 1
    assert recording_function.ran_with("came-back"), "the redriven invocation never ran"


def test_a_message_without_a_target_is_left_on_the_queue(dlq):
    clients.client("sqs").send_message(QueueUrl=dlq["url"], MessageBody="not json at all")
    report = redrive.run_once(dlq["url"])
    assert len(report.not_understood) == 1 and report.delivered == []
    assert depth(dlq["url"]) == 1


def test_deliveries_keep_to_the_rate_limit(dlq):
    machine = clients.client("stepfunctions").create_state_machine(
        name=f"rate-{uuid.uuid4().hex[:8]}", definition=PASS_MACHINE, roleArn=ROLE
    )
    attributes = {"TARGET_ARN": {"DataType": "String", "StringValue": machine["stateMachineArn"]}}
    for n in range(6):
        clients.client("sqs").send_message(
            QueueUrl=dlq["url"], MessageBody=json.dumps({"n": n}), MessageAttributes=attributes
        )
    began = time.monotonic()
    report = redrive.run_once(dlq["url"], rate_per_second=5)
    elapsed = time.monotonic() - began
    assert len(report.delivered) == 6
    assert elapsed >= 1.0, f"6 deliveries at 5/s took only {elapsed:.2f} s"


def test_a_limit_stops_after_that_many_messages(dlq):
    for _n in range(4):
        clients.client("sqs").send_message(QueueUrl=dlq["url"], MessageBody="no target")
    report = redrive.run_once(dlq["url"], limit=2)
    assert len(report.not_understood) == 2
    assert depth(dlq["url"]) == 4


def test_a_rate_that_cannot_be_kept_is_refused(dlq):
    with pytest.raises(ValueError, match="rate_per_second"):
        redrive.run_once(dlq["url"], rate_per_second=0)


def test_the_command_redrives_the_queues_it_is_given_and_exits_nonzero_on_leftovers(dlq, capsys):
    machine = clients.client("stepfunctions").create_state_machine(
        name=f"cmd-{uuid.uuid4().hex[:8]}", definition=PASS_MACHINE, roleArn=ROLE
    )
    attributes = {"TARGET_ARN": {"DataType": "String", "StringValue": machine["stateMachineArn"]}}
    clients.client("sqs").send_message(QueueUrl=dlq["url"], MessageBody="{}", MessageAttributes=attributes)
    assert redrive.main([dlq["url"], "--rate", "50"]) == 0
    assert "1 delivered" in capsys.readouterr().out
    missing = {
        "TARGET_ARN": {"DataType": "String", "StringValue": "arn:aws:lambda:us-east-1:123456789012:function:gone"}
    }
    clients.client("sqs").send_message(QueueUrl=dlq["url"], MessageBody="{}", MessageAttributes=missing)
    assert redrive.main([dlq["url"]]) == 1
    assert depth(dlq["url"]) == 1


FAIL_MACHINE = json.dumps(
    {"StartAt": "ClaimFailed", "States": {"ClaimFailed": {"Type": "Fail", "Error": "ClaimFailed"}}}
)


def test_a_schedule_event_whose_named_execution_failed_is_delivered_again_under_its_own_name(dlq):
    # The schedule's start ran and failed before it could claim; its name is taken for
    # good, so a redrive under that name would be refused and look delivered.
    sfn = clients.client("stepfunctions")
    machine = sfn.create_state_machine(
        name=f"claimfailed-{uuid.uuid4().hex[:8]}", definition=FAIL_MACHINE, roleArn=ROLE
    )
    first = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], name="del-req", input="{}")["executionArn"]
    assert clients.wait_for_execution(first, 30, poll_seconds=0.1)["status"] == "FAILED"
    body = json.dumps({"StateMachineArn": machine["stateMachineArn"], "Name": "del-req", "Input": "{}"})
    attributes = {"TARGET_ARN": {"DataType": "String", "StringValue": "arn:aws:scheduler:::aws-sdk:sfn:startExecution"}}
    sent = clients.client("sqs").send_message(QueueUrl=dlq["url"], MessageBody=body, MessageAttributes=attributes)
    report = redrive.run_once(dlq["url"])
    assert (report.delivered, report.already_delivered) == ([sent["MessageId"]], [])
    assert sorted(executions(machine["stateMachineArn"])) == sorted(["del-req", f"redrive-{sent['MessageId']}"])
    assert depth(dlq["url"]) == 0
