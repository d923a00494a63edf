"""Step Functions on the embedded backend execute ASL for real."""

import json
import uuid

import pytest

from idemlab import clients

# Fails the first time it sees a key (counted in DynamoDB), then succeeds: a Retry
# must run it again inside the same execution.
FLAKY_HANDLER = """
import boto3

def handler(event, context):
    attempts = boto3.client("dynamodb").update_item(
        TableName=event["table"],
        Key={"pk": {"S": event["key"]}},
        UpdateExpression="ADD attempts :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="UPDATED_NEW",
    )["Attributes"]["attempts"]["N"]
    if attempts == "1":
        raise ConnectionError("transient")
    return {"doubled": event["value"] * 2, "attempts": int(attempts)}
"""


def create_machine(definition: dict, lambda_role: str, kind: str = "EXPRESS") -> str:
    return clients.client("stepfunctions").create_state_machine(
        name=f"sm-{uuid.uuid4().hex[:8]}", definition=json.dumps(definition), roleArn=lambda_role, type=kind
    )["stateMachineArn"]


def wait(execution_arn: str) -> dict:
    return clients.wait_for_execution(execution_arn, timeout=60)


@pytest.fixture
def retrying_machine(make_function, lambda_role):
    function_arn = clients.client("lambda").get_function(FunctionName=make_function(FLAKY_HANDLER, timeout=10))["Configuration"]["FunctionArn"]
    definition = {
        "StartAt": "Double",
        "States": {
            "Double": {
                "Type": "Task",
                "Resource": function_arn,
                "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 2, "BackoffRate": 1.0}],
                "End": True,
            }
        },
    }
    return create_machine(definition, lambda_role)


def test_express_start_execution_retries_the_lambda_task_and_returns_its_output(retrying_machine, table):
    sfn = clients.client("stepfunctions")
    execution = sfn.start_execution(
        stateMachineArn=retrying_machine, name=f"run-{uuid.uuid4().hex[:8]}", input=json.dumps({"table": table, "key": "a", "value": 21})
    )
    described = wait(execution["executionArn"])
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"doubled": 42, "attempts": 2}


def test_express_start_sync_execution_returns_the_lambda_output(retrying_machine, table):
    result = clients.client("stepfunctions").start_sync_execution(
        stateMachineArn=retrying_machine, input=json.dumps({"table": table, "key": "b", "value": 5})
    )
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"]) == {"doubled": 10, "attempts": 2}


def test_start_sync_execution_reports_a_failed_execution(make_function, lambda_role):
    function_arn = clients.client("lambda").get_function(
        FunctionName=make_function("def handler(event, context):\n    raise KeyError('vin')\n")
    )["Configuration"]["FunctionArn"]
    machine = create_machine({"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": function_arn, "End": True}}}, lambda_role)
    result = clients.client("stepfunctions").start_sync_execution(stateMachineArn=machine, input="{}")
    assert result["status"] == "FAILED"
    assert result["error"] == "KeyError"


def test_start_sync_execution_refuses_a_standard_machine(lambda_role):
    machine = create_machine({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}, lambda_role, kind="STANDARD")
    sfn = clients.client("stepfunctions")
    with pytest.raises(sfn.exceptions.StateMachineTypeNotSupported):
        sfn.start_sync_execution(stateMachineArn=machine, input="{}")


def test_dynamodb_put_item_task_writes_to_the_table(lambda_role, table):
    definition = {
        "StartAt": "Write",
        "States": {
            "Write": {
                "Type": "Task",
                "Resource": "arn:aws:states:::dynamodb:putItem",
                "Parameters": {"TableName": table, "Item": {"pk": {"S.$": "$.id"}, "colour": {"S.$": "$.colour"}}},
                "End": True,
            }
        },
    }
    machine = create_machine(definition, lambda_role, kind="STANDARD")
    execution = clients.client("stepfunctions").start_execution(
        stateMachineArn=machine, name="write-1", input=json.dumps({"id": "v-1", "colour": "red"})
    )
    assert wait(execution["executionArn"])["status"] == "SUCCEEDED"
    item = clients.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": "v-1"}})["Item"]
    assert item["colour"] == {"S": "red"}


def test_parallel_map_and_catch_execute(make_function, lambda_role):
    function_arn = clients.client("lambda").get_function(
        FunctionName=make_function(
            "def handler(event, context):\n    if event < 0:\n        raise ValueError('negative')\n    return event * 10\n"
        )
    )["Configuration"]["FunctionArn"]
    definition = {
        "StartAt": "Both",
        "States": {
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {
                        "StartAt": "Each",
                        "States": {
                            "Each": {
                                "Type": "Map",
                                "ItemsPath": "$.numbers",
                                "Iterator": {"StartAt": "Times", "States": {"Times": {"Type": "Task", "Resource": function_arn, "End": True}}},
                                "End": True,
                            }
                        },
                    },
                    {
                        "StartAt": "Bad",
                        "States": {
                            "Bad": {
                                "Type": "Task",
                                "Resource": function_arn,
                                "InputPath": "$.bad",
                                "Catch": [{"ErrorEquals": ["ValueError"], "Next": "Caught", "ResultPath": "$.error"}],
                                "End": True,
                            },
                            "Caught": {"Type": "Pass", "Result": "caught", "End": True},
                        },
                    },
                ],
                "End": True,
            }
        },
    }
    machine = create_machine(definition, lambda_role)
    result = clients.client("stepfunctions").start_sync_execution(stateMachineArn=machine, input=json.dumps({"numbers": [1, 2, 3], "bad": -1}))
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"]) == [[10, 20, 30], "caught"]


def test_terraform_planning_calls_are_answered(lambda_role):
    sfn = clients.client("stepfunctions")
    good = sfn.validate_state_machine_definition(definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))
    assert good["result"] == "OK"
    bad = sfn.validate_state_machine_definition(definition=json.dumps({"StartAt": "Missing"}))
    assert bad["result"] == "FAIL" and bad["diagnostics"]
    machine = create_machine({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}, lambda_role)
    assert sfn.list_state_machine_versions(stateMachineArn=machine)["stateMachineVersions"] == []
