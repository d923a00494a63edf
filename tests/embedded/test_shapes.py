"""Responses shaped as AWS shapes them, member for member, where moto's differ.

Each expectation is what AWS answered in the AWS-validated recordings of LocalStack's
tests (v4.14.0), whose snapshots keep every member of the parsed response.
"""

import json
import uuid

import pytest

from idemlab import clients


def test_a_scheduler_validation_error_carries_the_top_level_message_member(backend):
    # test_scheduler.snapshot.json: {"Error": {...}, "Message": "Invalid Schedule Expression ...", ...}
    scheduler = clients.client("scheduler")
    target = {"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": "arn:aws:iam::123456789012:role/s"}
    with pytest.raises(scheduler.exceptions.ValidationException) as refused:
        scheduler.create_schedule(
            Name=f"s-{uuid.uuid4().hex[:8]}",
            ScheduleExpression="rate(10 seconds)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target=target,
        )
    expected = "Invalid Schedule Expression rate(10 seconds)."
    assert refused.value.response["Error"] == {"Code": "ValidationException", "Message": expected}
    assert refused.value.response["Message"] == expected


@pytest.mark.parametrize("invocation_type, status", [("Event", 202), ("DryRun", 204)])
def test_an_invoke_that_runs_nothing_yet_answers_no_executed_version(make_function, invocation_type, status):
    # test_lambda.snapshot.json, test_invocation_type_event / _dry_run: Payload and StatusCode only.
    name = make_function("def handler(event, context):\n    return 1\n")
    response = clients.client("lambda").invoke(FunctionName=name, InvocationType=invocation_type, Payload=b"{}")
    assert response["StatusCode"] == status
    assert sorted(set(response) - {"ResponseMetadata"}) == ["Payload", "StatusCode"]


def test_a_synchronous_invoke_still_answers_its_executed_version(make_function):
    name = make_function("def handler(event, context):\n    return 1\n")
    assert clients.client("lambda").invoke(FunctionName=name, Payload=b"{}")["ExecutedVersion"] == "$LATEST"


def test_transact_write_items_answers_no_empty_capacity_or_metrics(table):
    # test_dynamodb.snapshot.json, "transact-write-response-*": ResponseMetadata only.
    answer = clients.client("dynamodb").transact_write_items(
        TransactItems=[{"Put": {"TableName": table, "Item": {"pk": {"S": "one"}}}}]
    )
    assert list(answer) == ["ResponseMetadata"]


def test_a_handler_error_names_its_file_under_var_task(make_function):
    # test_lambda.snapshot.json: "  File \"/var/task/lambda_handler_error.py\", line 2, in handler\n    raise ..."
    name = make_function("def handler(event, context):\n    raise Exception('Handler fails')\n")
    payload = json.loads(clients.client("lambda").invoke(FunctionName=name, Payload=b"{}")["Payload"].read())
    assert payload["stackTrace"] == [
        "  File \"/var/task/app.py\", line 2, in handler\n    raise Exception('Handler fails')\n"
    ]


def test_an_error_while_the_module_loads_names_its_file_under_var_task(make_function):
    name = make_function("raise LookupError('no table')\n")
    payload = json.loads(clients.client("lambda").invoke(FunctionName=name, Payload=b"{}")["Payload"].read())
    assert payload["stackTrace"][-1].startswith('  File "/var/task/app.py", line 1, in <module>')
