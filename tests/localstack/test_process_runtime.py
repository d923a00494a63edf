"""Native LocalStack's process runtime (idemlab/localstack_native/) behaves as a Lambda
execution environment does on AWS: warm reuse, the function timeout, a runtime that exits,
and a fresh runtime after either; its START/END/REPORT lines reach CloudWatch Logs.

On LocalStack in Docker the same behaviours are LocalStack's Go init's, and a handler that
exits its process hangs there until the timeout (LocalStack's own test_lambda_handler_exit is
skipped as not yet supported): these tests run on native LocalStack only.
"""

from __future__ import annotations

import io
import json
import textwrap
import time
import uuid
import zipfile

import pytest

from idemlab import clients
from idemlab.backends.daemons import NATIVE

HANDLER = textwrap.dedent(
    """
    import os
    import time

    INVOCATIONS = {"count": 0}  # module state: lives as long as the execution environment


    def handler(event, context):
        INVOCATIONS["count"] += 1
        print(f"invocation {INVOCATIONS['count']} of {context.function_name}")
        if event.get("exit"):
            os._exit(3)
        time.sleep(event.get("sleep", 0))
        return {"count": INVOCATIONS["count"], "remaining_ms": context.get_remaining_time_in_millis()}
    """
)

pytestmark = pytest.mark.skipif(
    NATIVE.pid() is None, reason="LocalStack runs in Docker here: these are native LocalStack's own"
)


@pytest.fixture(scope="module")
def function(lambda_role):
    lambda_ = clients.client("lambda")
    name = f"process-runtime-{uuid.uuid4().hex[:8]}"
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("app.py", HANDLER)
    lambda_.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=lambda_role,
        Handler="app.handler",
        Code={"ZipFile": archive.getvalue()},
        Timeout=2,
    )
    lambda_.get_waiter("function_active_v2").wait(FunctionName=name)
    yield name
    lambda_.delete_function(FunctionName=name)


def invoke(name: str, event: dict) -> tuple[str | None, dict]:
    answer = clients.client("lambda").invoke(FunctionName=name, Payload=json.dumps(event))
    return answer.get("FunctionError"), json.loads(answer["Payload"].read())


def test_a_warm_environment_keeps_module_state_until_it_exits_or_times_out(function):
    # The time left is counted from the invocation's start against the 2 s timeout: at most
    # 2000 ms, more than none (how much the handler's start took on a loaded runner decides nothing).
    error, first = invoke(function, {})
    assert (error, first["count"]) == (None, 1)
    assert 0 < first["remaining_ms"] <= 2000, first
    assert invoke(function, {})[1]["count"] == 2  # the same environment, warm

    error, exited = invoke(function, {"exit": True})
    assert error == "Unhandled" and exited["errorType"] == "Runtime.ExitError"
    assert exited["errorMessage"].endswith("Error: Runtime exited with error: exit status 3")
    assert invoke(function, {})[1]["count"] == 1  # a fresh runtime, initialised again

    error, timed_out = invoke(function, {"sleep": 10})
    assert error == "Unhandled" and timed_out["errorType"] == "Sandbox.Timedout"
    assert timed_out["errorMessage"].endswith("Error: Task timed out after 2.00 seconds")
    assert invoke(function, {})[1]["count"] == 1  # the timed-out runtime was replaced


def test_each_invocation_logs_start_its_output_end_and_report(function):
    error, _ = invoke(function, {})
    assert error is None
    logs = clients.client("logs")
    group = f"/aws/lambda/{function}"
    deadline = time.monotonic() + 60
    while True:
        messages = [event["message"] for event in logs.filter_log_events(logGroupName=group)["events"]]
        starts = [m for m in messages if m.startswith("START RequestId: ")]
        if starts and any(m.startswith("REPORT RequestId: ") for m in messages):
            break
        assert time.monotonic() < deadline, f"no START/REPORT lines in {group}: {messages[-10:]}"
        time.sleep(0.5)
    assert any(m.startswith("invocation ") and function in m for m in messages)
    assert any(m.startswith("END RequestId: ") for m in messages)
