"""Step Functions: what a name deduplicates, what Express answers, and what it refuses."""

import json

import pytest
from botocore.exceptions import ClientError

from idemlab import clients

PASS = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
# Long enough to still be running when the test has made its calls; the test stops it.
WAITING = {"StartAt": "Wait", "States": {"Wait": {"Type": "Wait", "Seconds": 600, "End": True}}}
APPROVE = {
    "StartAt": "Approve",
    "States": {"Approve": {"Type": "Pass", "Result": {"approved": True}, "ResultPath": "$.decision", "End": True}},
}
DECLINE = {
    "StartAt": "Decline",
    "States": {"Decline": {"Type": "Fail", "Error": "CardDeclined", "Cause": "insufficient funds"}},
}
STOP_WAIT_SECONDS = 60


@pytest.fixture(scope="module")
def express_machine(make_state_machine) -> str:
    return make_state_machine(PASS, "EXPRESS")


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        (APPROVE, {"status": "SUCCEEDED", "output": {"order": "o-1", "decision": {"approved": True}}}),
        (DECLINE, {"status": "FAILED", "error": "CardDeclined", "cause": "insufficient funds"}),
    ],
    ids=["succeeded", "failed"],
)
def test_sync_express_execution_answers_with_its_outcome(sandbox, make_state_machine, definition, expected):
    """StartSyncExecution on an EXPRESS machine returns when the execution ends, with status
    SUCCEEDED and its output, or FAILED with error and cause and no output; the HTTP
    status is 200 either way.

    https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartSyncExecution.html
    """
    machine_arn = make_state_machine(definition, "EXPRESS")

    result = sandbox.client("stepfunctions").start_sync_execution(
        stateMachineArn=machine_arn, input=json.dumps({"order": "o-1"})
    )

    assert result["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert result["status"] == expected["status"]
    if "output" in expected:
        assert json.loads(result["output"]) == expected["output"]
    else:
        assert result.get("output") is None
        assert (result.get("error"), result.get("cause")) == (expected["error"], expected["cause"])


def test_standard_start_with_a_used_name_returns_the_running_execution_or_refuses(sandbox, make_state_machine):
    """Standard StartExecution is idempotent for a name: the same name and input as a
    running execution return that execution (same executionArn, no error); other input
    while it runs, or any input once it has closed, gives 400 ExecutionAlreadyExists.

    https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html
    """
    sfn = sandbox.client("stepfunctions")
    machine_arn = make_state_machine(WAITING)
    name, same_input = sandbox.name("run"), json.dumps({"order": "o-1"})

    first = sfn.start_execution(stateMachineArn=machine_arn, name=name, input=same_input)
    assert sfn.describe_execution(executionArn=first["executionArn"])["status"] == "RUNNING"

    again = sfn.start_execution(stateMachineArn=machine_arn, name=name, input=same_input)
    assert again["executionArn"] == first["executionArn"]

    with pytest.raises(ClientError) as other_input:
        sfn.start_execution(stateMachineArn=machine_arn, name=name, input=json.dumps({"order": "o-2"}))
    assert other_input.value.response["Error"]["Code"] == "ExecutionAlreadyExists"
    assert other_input.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400

    sfn.stop_execution(executionArn=first["executionArn"])
    closed = clients.wait_for_execution(first["executionArn"], timeout=STOP_WAIT_SECONDS, sfn=sfn)
    assert closed["status"] == "ABORTED"

    with pytest.raises(ClientError) as after_close:
        sfn.start_execution(stateMachineArn=machine_arn, name=name, input=same_input)
    assert after_close.value.response["Error"]["Code"] == "ExecutionAlreadyExists"


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda sfn, arns: sfn.describe_execution(executionArn=arns["execution"]), "InvalidArn"),
        (lambda sfn, arns: sfn.stop_execution(executionArn=arns["execution"]), "InvalidArn"),
        (lambda sfn, arns: sfn.list_executions(stateMachineArn=arns["machine"]), "StateMachineTypeNotSupported"),
    ],
    ids=["DescribeExecution", "StopExecution", "ListExecutions"],
)
def test_express_execution_is_not_described_stopped_or_listed(sandbox, express_machine, call, code):
    """Executions of an EXPRESS machine are not available to DescribeExecution (unless a
    Map Run dispatched them), StopExecution or ListExecutions: results come from the
    StartSyncExecution response or CloudWatch Logs. The refusals are 400 InvalidArn
    (describe, stop) and StateMachineTypeNotSupported (list).

    https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html
    https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html
    Error codes checked against LocalStack's AWS-validated snapshot
    test_sfn_api_express.py::test_start_async_describe_history_execution.
    """
    sfn = sandbox.client("stepfunctions")
    started = sfn.start_execution(stateMachineArn=express_machine, name=sandbox.name("run"), input="{}")
    arns = {"execution": started["executionArn"], "machine": express_machine}

    with pytest.raises(ClientError) as refused:
        call(sfn, arns)

    assert refused.value.response["Error"]["Code"] == code
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


@pytest.mark.parametrize("machine_type", ["STANDARD", "EXPRESS"])
def test_two_unnamed_starts_make_two_executions(sandbox, make_state_machine, machine_type):
    """StartExecution without a name gets a fresh, generated name each time: two calls
    with the same input start two executions, on STANDARD and EXPRESS alike. An Express
    execution's ARN has the form arn:<partition>:states:<region>:<account>:express:<machine>:<name>:<id>.

    https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html
    (name: optional; without it Step Functions generates a unique one)
    """
    sfn = sandbox.client("stepfunctions")
    machine_arn = make_state_machine(PASS, machine_type)
    machine_name = machine_arn.rsplit(":", 1)[1]

    first = sfn.start_execution(stateMachineArn=machine_arn, input="{}")
    second = sfn.start_execution(stateMachineArn=machine_arn, input="{}")

    assert first["executionArn"] != second["executionArn"]
    resource = "express" if machine_type == "EXPRESS" else "execution"
    for started in (first, second):
        assert f":{resource}:{machine_name}:" in started["executionArn"]
    if machine_type == "STANDARD":
        listed = {
            execution["executionArn"] for execution in sfn.list_executions(stateMachineArn=machine_arn)["executions"]
        }
        assert {first["executionArn"], second["executionArn"]} <= listed
