"""Lambda durable functions: replay of a completed step, and the execution name as the
idempotency key of a start. The lesson on durable functions (09) relies on each.

LocalStack 4.14.0 Community has no durable functions (LocalStack offers them in its paid
edition only), so on that backend each test is a strict xfail.
"""

import io
import json
import time
import uuid
import zipfile
from importlib import metadata

import pytest

from conftest import FUNCTION_DIR

# Long enough for the handler's two steps and their checkpoints on a loaded runner; the
# crashing step sleeps past it.
DURABLE_TIMEOUT_SECONDS = 10
EXECUTION_TIMEOUT_SECONDS = 300
RETENTION_DAYS = 1
CLOSE_SECONDS = 180
SDK = "aws-durable-execution-sdk-python"
# Lambda runs durable functions on python3.13 and python3.14 only (Lambda developer guide,
# durable-supported-runtimes); the suite's other functions keep its RUNTIME.
DURABLE_RUNTIME = "python3.13"


@pytest.fixture(autouse=True)
def _no_durable_functions_on_localstack(sandbox, request):
    if sandbox.backend == "localstack":
        request.node.add_marker(
            pytest.mark.xfail(strict=True, reason="LocalStack 4.14.0 Community has no Lambda durable functions")
        )


@pytest.fixture(scope="session")
def durable_zip() -> bytes:
    """The suite's function modules and the durable SDK (which not every runtime has)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(FUNCTION_DIR.glob("*.py")):
            archive.write(path, path.name)
        distribution = metadata.distribution(SDK)
        for relative in distribution.files or ():
            if relative.parts[0].startswith("aws_durable_execution_sdk_python") and relative.suffix == ".py":
                archive.write(distribution.locate_file(relative), str(relative))
    return buffer.getvalue()


@pytest.fixture(scope="session")
def durable_function(sandbox, role_arn, durable_zip, table) -> str:
    lambda_ = sandbox.client("lambda")
    name = sandbox.name("durable")
    sandbox.retry_while_role_propagates(
        lambda: lambda_.create_function(
            FunctionName=name,
            Runtime=DURABLE_RUNTIME,
            Role=role_arn,
            Handler="durable_handler.handler",
            Code={"ZipFile": durable_zip},
            Timeout=DURABLE_TIMEOUT_SECONDS,
            Environment={"Variables": {"TABLE": table}},
            DurableConfig={"ExecutionTimeout": EXECUTION_TIMEOUT_SECONDS, "RetentionPeriodInDays": RETENTION_DAYS},
            Tags=sandbox.tags(),
        ),
        codes=("InvalidParameterValueException",),
    )
    sandbox.on_teardown(lambda_.delete_function, FunctionName=name)
    lambda_.get_waiter("function_active_v2").wait(FunctionName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    return name


def start(sandbox, function: str, event: dict, name: str | None = None) -> str:
    options = {"DurableExecutionName": name} if name else {}
    response = sandbox.client("lambda").invoke(
        FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode(), **options
    )
    return response["DurableExecutionArn"]


def closed(sandbox, arn: str) -> dict:
    deadline = time.monotonic() + CLOSE_SECONDS
    while True:
        found = sandbox.client("lambda").get_durable_execution(DurableExecutionArn=arn)
        if found["Status"] != "RUNNING":
            return found
        assert time.monotonic() < deadline, f"execution {arn} still RUNNING after {CLOSE_SECONDS} s"
        time.sleep(0.5)


def runs(sandbox, table: str, run_id: str, step: str) -> int:
    item = sandbox.client("dynamodb").get_item(
        TableName=table, Key={"pk": {"S": f"{run_id}#{step}"}}, ConsistentRead=True
    )
    return int(item.get("Item", {}).get("runs", {}).get("N", "0"))


def test_completed_step_is_not_run_again_when_the_function_replays(sandbox, durable_function, table):
    """After a failed invocation Lambda runs the handler again from the start; a step that
    completed returns its checkpointed result without running again, and the step that
    was interrupted before its checkpoint runs again.

    https://docs.aws.amazon.com/lambda/latest/dg/durable-basic-concepts.html
    https://docs.aws.amazon.com/lambda/latest/dg/durable-execution-idempotency.html
    """
    run_id = uuid.uuid4().hex
    arn = start(sandbox, durable_function, {"id": run_id, "crash": True})

    execution = closed(sandbox, arn)

    assert execution["Status"] == "SUCCEEDED", execution
    assert json.loads(execution["Result"]) == {"marked": 1}
    assert runs(sandbox, table, run_id, "crash") == 2
    assert runs(sandbox, table, run_id, "mark") == 1


def test_same_execution_name_and_payload_start_one_execution(sandbox, durable_function, table):
    """An execution name is an idempotency key: invoking with the name of a running
    execution and an identical payload returns that execution and starts no other.

    https://docs.aws.amazon.com/lambda/latest/dg/durable-execution-idempotency.html
    """
    run_id = uuid.uuid4().hex
    name = f"conformance-{run_id}"
    event = {"id": run_id, "crash": True}  # the crash keeps it running while the second start arrives

    first = start(sandbox, durable_function, event, name)
    second = start(sandbox, durable_function, event, name)

    assert first == second
    assert closed(sandbox, first)["Status"] == "SUCCEEDED"
    assert runs(sandbox, table, run_id, "mark") == 1


def test_same_execution_name_with_another_payload_is_refused(sandbox, durable_function):
    """Invoking with the name of a running execution and another payload is refused with
    DurableExecutionAlreadyStartedException.

    https://docs.aws.amazon.com/lambda/latest/dg/durable-execution-idempotency.html
    """
    run_id = uuid.uuid4().hex
    name = f"conformance-{run_id}"
    start(sandbox, durable_function, {"id": run_id, "crash": True}, name)
    lambda_ = sandbox.client("lambda")

    with pytest.raises(lambda_.exceptions.DurableExecutionAlreadyStartedException):
        start(sandbox, durable_function, {"id": run_id, "crash": False}, name)
