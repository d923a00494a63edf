"""Step Functions on the embedded backend execute ASL for real, and refuse what AWS refuses."""

import json
import re
import time
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


def retrying_definition(make_function) -> dict:
    function_arn = clients.client("lambda").get_function(FunctionName=make_function(FLAKY_HANDLER, timeout=10))[
        "Configuration"
    ]["FunctionArn"]
    return {
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


@pytest.fixture
def retrying_machine(make_function, lambda_role):
    return create_machine(retrying_definition(make_function), lambda_role)


def test_start_execution_retries_the_lambda_task_and_returns_its_output(make_function, lambda_role, table):
    # STANDARD: only a Standard execution can be read back with DescribeExecution.
    machine = create_machine(retrying_definition(make_function), lambda_role, kind="STANDARD")
    sfn = clients.client("stepfunctions")
    execution = sfn.start_execution(
        stateMachineArn=machine,
        name=f"run-{uuid.uuid4().hex[:8]}",
        input=json.dumps({"table": table, "key": "a", "value": 21}),
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
    machine = create_machine(
        {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": function_arn, "End": True}}}, lambda_role
    )
    result = clients.client("stepfunctions").start_sync_execution(stateMachineArn=machine, input="{}")
    assert result["status"] == "FAILED"
    assert result["error"] == "KeyError"


def test_start_sync_execution_refuses_a_standard_machine(lambda_role):
    machine = create_machine(
        {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}, lambda_role, kind="STANDARD"
    )
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
                                "Iterator": {
                                    "StartAt": "Times",
                                    "States": {"Times": {"Type": "Task", "Resource": function_arn, "End": True}},
                                },
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
    result = clients.client("stepfunctions").start_sync_execution(
        stateMachineArn=machine, input=json.dumps({"numbers": [1, 2, 3], "bad": -1})
    )
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"]) == [[10, 20, 30], "caught"]


def test_terraform_planning_calls_are_answered(lambda_role):
    sfn = clients.client("stepfunctions")
    good = sfn.validate_state_machine_definition(
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    )
    assert good["result"] == "OK"
    bad = sfn.validate_state_machine_definition(definition=json.dumps({"StartAt": "Missing"}))
    assert bad["result"] == "FAIL" and bad["diagnostics"]
    machine = create_machine({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}, lambda_role)
    assert sfn.list_state_machine_versions(stateMachineArn=machine)["stateMachineVersions"] == []


# Writes one item named after the execution: proof, for any type, that an execution ran.
RECORD_EXECUTION = {
    "StartAt": "Record",
    "States": {
        "Record": {
            "Type": "Task",
            "Resource": "arn:aws:states:::dynamodb:putItem",
            "Parameters": {"TableName.$": "$.table", "Item": {"pk": {"S.$": "$$.Execution.Id"}}},
            "End": True,
        }
    },
}


def recorded_executions(table: str, expected: int, timeout: float = 120) -> set[str]:
    """The executions recorded in `table`, once there are `expected` of them (or what is there
    after `timeout` seconds, for the caller's comparison to show)."""
    dynamodb = clients.client("dynamodb")
    deadline = time.monotonic() + timeout
    while True:
        ids = {item["pk"]["S"] for item in dynamodb.scan(TableName=table)["Items"]}
        if len(ids) >= expected or time.monotonic() > deadline:
            return ids
        time.sleep(0.1)


@pytest.mark.parametrize("kind", ["STANDARD", "EXPRESS"])
def test_two_unnamed_start_executions_are_two_executions(kind, lambda_role, table):
    machine = create_machine(RECORD_EXECUTION, lambda_role, kind=kind)
    sfn = clients.client("stepfunctions")
    arns = [
        sfn.start_execution(stateMachineArn=machine, input=json.dumps({"table": table}))["executionArn"]
        for _ in range(2)
    ]
    assert arns[0] != arns[1]
    assert recorded_executions(table, 2) == set(arns)
    name = arns[0].split(":")[7]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", name), (
        "AWS names it with a UUID"
    )


def test_express_execution_arn_has_the_express_shape_and_names_are_not_deduplicated(lambda_role, table):
    machine = create_machine(RECORD_EXECUTION, lambda_role)
    machine_name = machine.split(":")[-1]
    sfn = clients.client("stepfunctions")
    arns = [
        sfn.start_execution(stateMachineArn=machine, name="same", input=json.dumps({"table": table}))["executionArn"]
        for _ in range(2)
    ]
    for arn in arns:
        assert re.fullmatch(rf"arn:aws:states:us-east-1:\d{{12}}:express:{machine_name}:same:[0-9a-f-]{{36}}", arn), arn
    assert recorded_executions(table, 2) == set(arns), "two starts with one name run twice on Express"


def test_express_executions_cannot_be_described_stopped_or_listed(lambda_role, table):
    machine = create_machine(RECORD_EXECUTION, lambda_role)
    sfn = clients.client("stepfunctions")
    arn = sfn.start_execution(stateMachineArn=machine, input=json.dumps({"table": table}))["executionArn"]
    for call in (sfn.describe_execution, sfn.stop_execution, sfn.get_execution_history):
        with pytest.raises(sfn.exceptions.InvalidArn) as refused:
            call(executionArn=arn)
        assert (
            refused.value.response["Error"]["Message"]
            == "Invalid Arn: 'Resource type not valid in this context: express'"
        )
    with pytest.raises(sfn.exceptions.StateMachineTypeNotSupported) as refused:
        sfn.list_executions(stateMachineArn=machine)
    assert refused.value.response["Error"]["Message"] == "This operation is not supported by this type of state machine"
    assert recorded_executions(table, 1) == {arn}, "the execution itself ran"


def pass_machine(lambda_role: str, kind: str) -> str:
    return create_machine({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}, lambda_role, kind)


def start(kind: str, machine_arn: str, name: str, sync: bool) -> dict:
    sfn = clients.client("stepfunctions")
    if sync:
        return sfn.start_sync_execution(stateMachineArn=machine_arn, name=name, input="{}")
    return sfn.start_execution(stateMachineArn=machine_arn, name=name, input="{}")


# Each breaks a rule of StartExecution's and StartSyncExecution's `name` (API reference:
# 1-80 characters, no white space, brackets, wildcards, listed specials or control characters).
REFUSED_NAMES = [
    ("a" * 81, "ValidationException"),
    ("bad name<", "InvalidName"),
    ("tab\there", "InvalidName"),
    ("slash/name", "InvalidName"),
    ("ctl\u0085", "InvalidName"),
    ("brace{", "InvalidName"),
]


@pytest.mark.parametrize("kind, sync", [("STANDARD", False), ("EXPRESS", False), ("EXPRESS", True)])
@pytest.mark.parametrize("name, code", REFUSED_NAMES)
def test_an_execution_name_aws_refuses_is_refused_and_starts_nothing(kind, sync, name, code, lambda_role):
    sfn = clients.client("stepfunctions")
    machine = pass_machine(lambda_role, kind)
    with pytest.raises(sfn.exceptions.ClientError) as refused:
        start(kind, machine, name, sync)
    assert refused.value.response["Error"]["Code"] == code
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    if kind == "STANDARD":
        assert sfn.list_executions(stateMachineArn=machine)["executions"] == []


@pytest.mark.parametrize("kind, sync", [("STANDARD", False), ("EXPRESS", False), ("EXPRESS", True)])
def test_an_80_character_name_with_dashes_and_underscores_is_accepted(kind, sync, lambda_role):
    name = ("ok-name_" * 10)[:80]
    assert (
        start(kind, pass_machine(lambda_role, kind), name, sync)["executionArn"].split(":")[
            -1 if kind == "STANDARD" else -2
        ]
        == name
    )


@pytest.mark.parametrize(
    "config",
    [
        {"stepfunctions": {"execute_state_machine": False}},
        {"stepfunctions": {}},
        {"stepfunctions": None},
    ],
)
def test_the_moto_config_endpoint_cannot_switch_execution_off(backend, config, lambda_role):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{backend}/moto-api/config",
        data=json.dumps(config).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert "execute_state_machine" in json.loads(refused.value.read())["message"]
    # Still executing: a Pass state machine runs to SUCCEEDED with its output.
    sfn = clients.client("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=pass_machine(lambda_role, "STANDARD"), input='{"still": "running"}')
    assert wait(execution["executionArn"])["output"] == '{"still": "running"}'


def test_the_moto_config_endpoint_still_takes_other_settings(backend):
    import urllib.request

    body = json.dumps({"batch": {"use_docker": False}}).encode()
    request = urllib.request.Request(
        f"{backend}/moto-api/config", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 201
        assert json.loads(answer.read())["batch"] == {"use_docker": False}
