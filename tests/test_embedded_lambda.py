"""Lambda on the embedded backend runs the uploaded handler in worker processes."""

import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from idemlab import clients
from support.health import answer as health_answer

RECORDING_HANDLER = """
import os, time
import boto3

def handler(event, context):
    started = time.time()
    time.sleep(event.get("sleep", 0))
    if event.get("record_table"):
        boto3.client("dynamodb").put_item(
            TableName=event["record_table"],
            Item={"pk": {"S": event["key"]}, "pid": {"N": str(os.getpid())}},
        )
    return {"pid": os.getpid(), "started": started, "ended": time.time()}
"""


def invoke(name: str, event: dict) -> tuple[dict, str | None]:
    response = clients.client("lambda").invoke(FunctionName=name, Payload=json.dumps(event).encode())
    return json.loads(response["Payload"].read()), response.get("FunctionError")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_handler_returns_values_computed_from_its_environment(make_function):
    name = make_function(
        """
        import os
        def handler(event, context):
            return {"total": int(os.environ["BASE"]) + event["add"], "name": context.function_name}
        """,
        environment={"BASE": "40"},
    )
    payload, error = invoke(name, {"add": 2})
    assert error is None
    assert payload == {"total": 42, "name": name}


def test_handler_exception_comes_back_as_function_error(make_function):
    name = make_function(
        """
        class CardDeclined(Exception):
            pass
        def handler(event, context):
            raise CardDeclined("insufficient funds")
        """
    )
    payload, error = invoke(name, {})
    assert error == "Unhandled"
    assert payload["errorType"] == "CardDeclined"
    assert payload["errorMessage"] == "insufficient funds"
    assert payload["stackTrace"]


def test_timeout_returns_lambda_error_and_kills_the_worker(make_function, table):
    name = make_function(RECORDING_HANDLER, timeout=1)
    payload, error = invoke(name, {"sleep": 5, "record_table": table, "key": "slow"})
    assert error == "Unhandled"
    assert payload["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 1.00 seconds" in payload["errorMessage"]
    # The handler never reached its write: it was stopped at the deadline.
    assert "Item" not in clients.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": "slow"}})
    # The next request gets a fresh environment, which answers normally.
    fresh, error = invoke(name, {})
    assert error is None
    assert fresh["pid"] in health_answer(os.environ["AWS_ENDPOINT_URL"])["lambda_environments"]


def test_timed_out_worker_process_is_gone(make_function, table):
    name = make_function(
        """
        import os, time, boto3
        def handler(event, context):
            boto3.client("dynamodb").put_item(TableName=event["table"], Item={"pk": {"S": "pid"}, "pid": {"N": str(os.getpid())}})
            time.sleep(10)
        """,
        timeout=2,
    )
    payload, _error = invoke(name, {"table": table})
    assert payload["errorType"] == "Sandbox.Timedout"
    item = clients.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": "pid"}})["Item"]
    pid = int(item["pid"]["N"])
    assert not pid_alive(pid), f"worker {pid} still running after its timeout"
    assert pid not in health_answer(os.environ["AWS_ENDPOINT_URL"])["lambda_environments"]


def test_warm_environment_is_reused_and_keeps_module_state(make_function):
    name = make_function(
        """
        import os
        calls = 0
        def handler(event, context):
            global calls
            calls += 1
            return {"pid": os.getpid(), "calls": calls}
        """
    )
    first, _ = invoke(name, {})
    second, _ = invoke(name, {})
    assert second["pid"] == first["pid"]
    assert (first["calls"], second["calls"]) == (1, 2)


# Each invocation records its start, runs its second, then waits until all eight have
# started: only invocations that really run at the same time can all finish.
RENDEZVOUS_HANDLER = """
import os, time
import boto3

def handler(event, context):
    started = time.time()
    table = boto3.client("dynamodb")
    table.update_item(
        TableName=event["table"], Key={"pk": {"S": "started"}},
        UpdateExpression="ADD n :one", ExpressionAttributeValues={":one": {"N": "1"}},
    )
    time.sleep(1)
    while int(table.get_item(TableName=event["table"], Key={"pk": {"S": "started"}}, ConsistentRead=True)["Item"]["n"]["N"]) < event["party"]:
        time.sleep(0.05)
    return {"pid": os.getpid(), "started": started, "ended": time.time()}
"""


def test_concurrent_invocations_run_in_parallel_in_separate_environments(make_function, table):
    name = make_function(RENDEZVOUS_HANDLER, timeout=30)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: invoke(name, {"table": table, "party": 8}), range(8)))
    runs = [payload for payload, error in results if error is None]
    assert len(runs) == 8, results
    assert len({run["pid"] for run in runs}) == 8, "each concurrent invocation needs its own environment"
    # All eight were running at one moment: the latest start precedes the earliest end.
    assert max(run["started"] for run in runs) < min(run["ended"] for run in runs)


def test_module_state_is_not_shared_between_environments(make_function):
    name = make_function(
        """
        import os, time
        seen = []
        def handler(event, context):
            seen.append(event["n"])
            time.sleep(0.5)
            return {"pid": os.getpid(), "seen": list(seen)}
        """,
        timeout=10,
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(lambda n: invoke(name, {"n": n})[0], [1, 2])
    assert first["pid"] != second["pid"]
    assert first["seen"] == [1] and second["seen"] == [2]


def test_unknown_function_is_a_resource_not_found_error(backend):
    lam = clients.client("lambda")
    with pytest.raises(lam.exceptions.ResourceNotFoundException):
        lam.invoke(FunctionName="no-such-function", Payload=b"{}")


def test_payload_that_is_not_json_is_refused_before_anything_runs(make_function):
    # Invoke API reference: InvalidRequestContentException, "The request body could not be parsed as JSON".
    name = make_function("def handler(event, context):\n    return 1\n")
    lam = clients.client("lambda")
    before = set(health_answer(os.environ["AWS_ENDPOINT_URL"])["lambda_environments"])
    for invocation_type in ("RequestResponse", "Event", "DryRun"):
        with pytest.raises(lam.exceptions.InvalidRequestContentException) as refused:
            lam.invoke(FunctionName=name, InvocationType=invocation_type, Payload=b"{'order': 7}")
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert refused.value.response["Error"]["Message"].startswith("Could not parse request body into json")
    assert set(health_answer(os.environ["AWS_ENDPOINT_URL"])["lambda_environments"]) <= before, (
        "no environment may start"
    )


def test_broken_handler_module_reports_an_import_error(make_function):
    name = make_function("import not_a_module_anywhere\ndef handler(event, context):\n    return 1\n")
    payload, error = invoke(name, {})
    assert error == "Unhandled"
    assert payload == {
        "errorMessage": "Unable to import module 'app': No module named 'not_a_module_anywhere'",
        "errorType": "Runtime.ImportModuleError",
        "requestId": "",
        "stackTrace": [],
    }


def test_exception_raised_while_the_module_loads_is_reported_as_itself(make_function):
    name = make_function("raise LookupError('no such table configured')\ndef handler(event, context):\n    return 1\n")
    payload, error = invoke(name, {})
    assert error == "Unhandled"
    assert list(payload) == ["errorMessage", "errorType", "requestId", "stackTrace"]
    assert (payload["errorType"], payload["errorMessage"], payload["requestId"]) == (
        "LookupError",
        "no such table configured",
        "",
    )
    assert "app.py" in payload["stackTrace"][-1]


def test_runtime_faults_are_reported_with_the_runtime_error_types(make_function):
    # The error types of the Python runtime (awslambdaric's bootstrap) and of Invoke's 6 MB response limit.
    cases = {
        "def handler(event, context):\n    return {1, 2}\n": "Runtime.MarshalError",
        "def not_the_handler(event, context):\n    return 1\n": "Runtime.HandlerNotFound",
        "def handler(event, context)\n    return 1\n": "Runtime.UserCodeSyntaxError",
        "def handler(event, context):\n    return 'x' * 7_000_000\n": "Function.ResponseSizeTooLarge",
    }
    for source, error_type in cases.items():
        payload, error = invoke(make_function(source), {})
        assert (error, payload["errorType"]) == ("Unhandled", error_type), payload


def test_handler_error_payload_carries_the_invocation_request_id(make_function):
    name = make_function("def handler(event, context):\n    raise ValueError(context.aws_request_id)\n")
    response = clients.client("lambda").invoke(FunctionName=name, Payload=b"{}")
    payload = json.loads(response["Payload"].read())
    assert list(payload) == ["errorMessage", "errorType", "requestId", "stackTrace"]
    assert payload["requestId"] == payload["errorMessage"] == response["ResponseMetadata"]["RequestId"]


def test_handler_that_exits_is_a_runtime_exit_error_without_a_reason(make_function):
    name = make_function("import sys\ndef handler(event, context):\n    sys.exit(0)\n")
    payload, error = invoke(name, {})
    assert error == "Unhandled" and payload["errorType"] == "Runtime.ExitError"
    assert payload["errorMessage"].endswith("Error: Runtime exited without providing a reason")


@pytest.mark.timeout(120)
def test_async_failure_is_retried_then_sent_to_on_failure_queue(make_function, table):
    sqs = clients.client("sqs")
    queue_url = sqs.create_queue(QueueName=f"onfail-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    name = make_function(
        """
        import boto3, uuid
        def handler(event, context):
            boto3.client("dynamodb").put_item(TableName=event["table"], Item={"pk": {"S": str(uuid.uuid4())}})
            raise RuntimeError("downstream unavailable")
        """
    )
    clients.client("lambda").put_function_event_invoke_config(
        FunctionName=name,
        MaximumRetryAttempts=1,
        DestinationConfig={"OnFailure": {"Destination": queue_arn}},
    )
    response = clients.client("lambda").invoke(
        FunctionName=name, InvocationType="Event", Payload=json.dumps({"table": table}).encode()
    )
    assert response["StatusCode"] == 202

    deadline = time.monotonic() + 60
    messages = []
    while not messages and time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get("Messages", [])
    assert messages, "no record reached the on-failure queue"
    record = json.loads(messages[0]["Body"])
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 2
    assert record["requestPayload"] == {"table": table}
    assert record["responsePayload"]["errorMessage"] == "downstream unavailable"
    attempts = clients.client("dynamodb").scan(TableName=table)["Count"]
    assert attempts == 2, "one invocation plus MaximumRetryAttempts=1 retry"


@pytest.mark.timeout(120)
def test_async_failure_without_destination_goes_to_dead_letter_queue(make_function):
    sqs = clients.client("sqs")
    queue_url = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    name = make_function(
        "def handler(event, context):\n    raise ValueError('bad event')\n",
        DeadLetterConfig={"TargetArn": queue_arn},
    )
    clients.client("lambda").put_function_event_invoke_config(FunctionName=name, MaximumRetryAttempts=0)
    clients.client("lambda").invoke(FunctionName=name, InvocationType="Event", Payload=b'{"order": 7}')
    deadline = time.monotonic() + 30
    messages = []
    while not messages and time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1, MessageAttributeNames=["All"]).get(
            "Messages", []
        )
    assert messages, "the original event never reached the dead-letter queue"
    assert json.loads(messages[0]["Body"]) == {"order": 7}
    assert messages[0]["MessageAttributes"]["ErrorMessage"]["StringValue"] == "bad event"
