"""Lambda on the embedded backend runs the uploaded handler in worker processes."""

import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from botocore.config import Config

from idemlab import clients
from idemlab.embedded.server import EmbeddedBackend
from support.health import answer as health_answer
from tests.conftest import zip_source

# A handler that must time out. The function's clock starts when the runtime hands the
# worker its request, after the worker has said it is ready (idemlab/embedded/lambda_runtime.py,
# ExecutionEnvironment.call); init has a deadline of its own. So the module writes its pid while
# it loads, before the clock can matter, and the handler then waits for something that never
# comes: the timeout fires whatever a cold start or a loaded machine costs, and the test knows
# which process it stopped without the handler having to reach a write inside its budget.
# (It once wrote its pid from the handler through a new boto3 client, inside 2 s: under load
# the client alone took longer, and the test found no pid.)
STALLING_HANDLER = """
import os, threading

with open(os.environ["PID_FILE"], "w") as out:
    out.write(str(os.getpid()))

def handler(event, context):
    if event.get("stall", True):
        threading.Event().wait()
    return {"pid": os.getpid()}
"""


# Functions that wait for each other get this long: the first one's clock runs while the
# others cold start, two at a time (lambda_runtime.CONCURRENT_INITS), and on a loaded 2-core
# runner one init has taken more than 30 s, so eight take several such rounds. Each returns
# as soon as its condition holds, so the room costs nothing when it is not needed.
RENDEZVOUS_TIMEOUT = 600


def invoke(name: str, event: dict) -> tuple[dict, str | None]:
    # One attempt, read for longer than any function here may run: the SDK's 60 s read
    # timeout would otherwise send a slow synchronous Invoke again, and run its handler twice.
    lam = clients.client("lambda", read_timeout=RENDEZVOUS_TIMEOUT + 60, retries={"total_max_attempts": 1})
    response = lam.invoke(FunctionName=name, Payload=json.dumps(event).encode())
    return json.loads(response["Payload"].read()), response.get("FunctionError")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stalled_worker(make_function, tmp_path, timeout: int) -> tuple[str, int]:
    """A function whose first invocation stalls until its `timeout`: its name, and the pid of
    the worker that stalled (written while the worker loaded, before the invocation began)."""
    pid_file = tmp_path / "pid"
    name = make_function(STALLING_HANDLER, timeout=timeout, environment={"PID_FILE": str(pid_file)})
    payload, error = invoke(name, {})
    assert (error, payload.get("errorType")) == ("Unhandled", "Sandbox.Timedout"), payload
    assert f"Task timed out after {timeout:.2f} seconds" in payload["errorMessage"], payload
    # The worker said it was ready only after its module ran, so its pid was written.
    return name, int(pid_file.read_text())


def test_timeout_returns_lambda_error_and_kills_the_worker(make_function, tmp_path):
    name, stalled = stalled_worker(make_function, tmp_path, timeout=1)
    # The handler was stopped at the deadline, not left running: its process is gone, so
    # nothing it would do after the wait can ever happen.
    assert not pid_alive(stalled), f"worker {stalled} still running after its timeout"
    # The next request gets a fresh environment, which answers normally (its handler only returns).
    fresh, error = invoke(name, {"stall": False})
    assert error is None, fresh
    assert fresh["pid"] != stalled
    assert fresh["pid"] in health_answer(os.environ["AWS_ENDPOINT_URL"])["lambda_environments"]


def test_timed_out_worker_process_is_gone(make_function, tmp_path):
    _name, pid = stalled_worker(make_function, tmp_path, timeout=2)
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
# started: only invocations that really run at the same time can all finish. The first
# one's clock runs while the last ones still wait for their cold starts (two at a time).
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


@pytest.mark.timeout(RENDEZVOUS_TIMEOUT + 120)
def test_concurrent_invocations_run_in_parallel_in_separate_environments(make_function, table):
    name = make_function(RENDEZVOUS_HANDLER, timeout=RENDEZVOUS_TIMEOUT)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: invoke(name, {"table": table, "party": 8}), range(8)))
    runs = [payload for payload, error in results if error is None]
    assert len(runs) == 8, results
    assert len({run["pid"] for run in runs}) == 8, "each concurrent invocation needs its own environment"
    # All eight were running at one moment: the latest start precedes the earliest end.
    assert max(run["started"] for run in runs) < min(run["ended"] for run in runs)


@pytest.mark.timeout(RENDEZVOUS_TIMEOUT + 120)
def test_module_state_is_not_shared_between_environments(make_function, tmp_path):
    # Each invocation says it has arrived, then waits for the other: both can finish only
    # if they ran at once, so in two environments, however long either took to start.
    name = make_function(
        """
        import os, pathlib, time
        seen = []
        def handler(event, context):
            seen.append(event["n"])
            arrivals = pathlib.Path(os.environ["ARRIVALS"])
            (arrivals / str(event["n"])).touch()
            while len(list(arrivals.iterdir())) < 2:
                time.sleep(0.05)
            return {"pid": os.getpid(), "seen": list(seen)}
        """,
        timeout=RENDEZVOUS_TIMEOUT,
        environment={"ARRIVALS": str(tmp_path)},
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        (first, first_error), (second, second_error) = pool.map(lambda n: invoke(name, {"n": n}), [1, 2])
    assert first_error is None and second_error is None, (first, second)
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


# An asynchronous failure's record arrives after the attempts and the retry delay between them;
# each wait below ends when it does, and this much room is for a loaded runner's cold starts.
ASYNC_RECORD_SECONDS = 120


@pytest.mark.timeout(ASYNC_RECORD_SECONDS + 60)
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

    deadline = time.monotonic() + ASYNC_RECORD_SECONDS
    messages = []
    while not messages and time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get("Messages", [])
    attempts = clients.client("dynamodb").scan(TableName=table)["Count"]
    assert messages, f"no record reached the on-failure queue within {ASYNC_RECORD_SECONDS} s ({attempts} attempts ran)"
    record = json.loads(messages[0]["Body"])
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 2
    assert record["requestPayload"] == {"table": table}
    assert record["responsePayload"]["errorMessage"] == "downstream unavailable"
    assert attempts == 2, "one invocation plus MaximumRetryAttempts=1 retry"


@pytest.mark.timeout(ASYNC_RECORD_SECONDS + 60)
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
    deadline = time.monotonic() + ASYNC_RECORD_SECONDS
    messages = []
    while not messages and time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1, MessageAttributeNames=["All"]).get(
            "Messages", []
        )
    assert messages, f"the original event did not reach the dead-letter queue within {ASYNC_RECORD_SECONDS} s"
    assert json.loads(messages[0]["Body"]) == {"order": 7}
    assert messages[0]["MessageAttributes"]["ErrorMessage"]["StringValue"] == "bad event"


# An init this long is past the 30 s deadline the runtime kept before it took 120 s by default.
SLOW_INIT_SECONDS = 35


@pytest.mark.timeout(SLOW_INIT_SECONDS + 300)
def test_a_cold_start_slower_than_thirty_seconds_is_waited_for():
    """A backend started with no deadline set, as `make lab` and the take-home plugin start
    theirs, waits for an init of 35 s: importing boto3 and Powertools on a loaded 2-core
    machine has taken longer than 30 s. The deadline is there to end an init that hangs."""
    server = EmbeddedBackend().start()
    try:
        config = Config(read_timeout=SLOW_INIT_SECONDS + 240, retries={"total_max_attempts": 1})
        session = boto3.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
        iam = session.client("iam", endpoint_url=server.url)
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
        role = iam.create_role(RoleName="slow-init", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        lam = session.client("lambda", endpoint_url=server.url, config=config)
        source = f"import time\ntime.sleep({SLOW_INIT_SECONDS})\n\ndef handler(event, context):\n    return 'ready'\n"
        lam.create_function(
            FunctionName="slow-init",
            Runtime="python3.12",
            Role=role,
            Handler="app.handler",
            Code={"ZipFile": zip_source(source)},
            Timeout=10,
        )
        response = lam.invoke(FunctionName="slow-init", Payload=b"{}")
        assert response.get("FunctionError") is None, response["Payload"].read()
        assert json.loads(response["Payload"].read()) == "ready"
    finally:
        server.stop()
