"""Lambda: how a failed invocation looks to its caller, and where a failed async event ends up."""

import json
import re
import time
import uuid

# The Python runtime's payload for an exception raised by the handler.
ERROR_KEYS = {"errorType", "errorMessage", "requestId", "stackTrace"}
# The crash the lessons use: a handler that sleeps past its timeout. Its `started` mark is
# written inside the timeout (the clock starts with the invocation, after init): 1 s was a
# guess at how long one write takes on a loaded runner, so it gets 3 s, and the sleep past it.
CRASH_TIMEOUT_SECONDS = 3
CRASH_SLEEP_SECONDS = 6
# How long after the handler's own sleep a write it made would surely be visible.
SETTLE_SECONDS = 3
# Async retries: AWS waits about a minute before the first retry, the emulators seconds.
ASYNC_RETRY_ATTEMPTS = 1
ASYNC_RECORD_WAIT_SECONDS = 240  # inside pytest-timeout's 300 s per test


def invoke(sandbox, function_arn: str, event: dict) -> tuple[dict, dict]:
    response = sandbox.client("lambda").invoke(FunctionName=function_arn, Payload=json.dumps(event).encode())
    return response, json.loads(response["Payload"].read())


def test_handler_exception_comes_back_as_an_unhandled_error_payload(sandbox, make_function):
    """An exception raised by a Python handler comes back with status 200, the
    X-Amz-Function-Error header "Unhandled", and a JSON payload with errorType (the
    exception's class), errorMessage, requestId and stackTrace.

    https://docs.aws.amazon.com/lambda/latest/dg/python-exceptions.html
    requestId: added to the error payload by the runtime interface client the Python 3.9+
    runtimes use (aws-lambda-python-runtime-interface-client, pull request 40); checked
    against LocalStack's AWS-validated snapshot TestLambdaErrors::test_lambda_handler_error.
    """
    function_arn = make_function("handler.fail")

    response, payload = invoke(sandbox, function_arn, {"reason": "card declined"})

    assert response["StatusCode"] == 200
    assert response.get("FunctionError") == "Unhandled"
    assert payload.keys() >= ERROR_KEYS, f"error payload keys: {sorted(payload)}"
    assert payload["errorType"] == "PaymentDeclined"
    assert payload["errorMessage"] == "card declined"
    assert isinstance(payload["requestId"], str) and payload["requestId"]
    assert isinstance(payload["stackTrace"], list) and payload["stackTrace"]


def test_exception_raised_at_import_keeps_its_own_type_and_message(sandbox, make_function):
    """On python3.12 and later, an exception (other than ImportError) raised while the
    handler module loads is reported with the exception's own type and message, not as
    Runtime.ImportModuleError; the invocation fails with FunctionError "Unhandled".

    https://docs.aws.amazon.com/lambda/latest/dg/python-exceptions.html
    Checked against the runtime interface client's bootstrap (aws-lambda-python-runtime-
    interface-client, awslambdaric/bootstrap.py: only ImportError and SyntaxError are
    rewritten) and LocalStack's AWS-validated snapshot TestLambdaErrors::test_lambda_runtime_error.
    """
    function_arn = make_function("import_failure.handler")

    response, payload = invoke(sandbox, function_arn, {})

    assert response.get("FunctionError") == "Unhandled"
    assert payload["errorType"] == "ConfigurationMissing"
    assert payload["errorMessage"] == "SETTINGS_TABLE is not set"
    assert "stackTrace" in payload


def test_handler_past_its_timeout_is_stopped_before_its_later_code(sandbox, make_function, table):
    """A handler still running at its configured timeout is stopped: the caller gets
    FunctionError "Unhandled" and an errorMessage "... Task timed out after 1.00 seconds"
    (errorType "Sandbox.Timedout" where the runtime names one), and the code after the
    sleep never runs. This is the crash the lessons inject.

    https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html
    https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html (a
    timeout is a function error)
    Message text checked against LocalStack's AWS-validated snapshot
    TestLambdaBehavior::test_lambda_invoke_with_timeout.
    """
    function_arn = make_function("handler.mark_then_sleep", timeout=CRASH_TIMEOUT_SECONDS)
    dynamodb = sandbox.client("dynamodb")
    run_id = uuid.uuid4().hex
    started = time.monotonic()

    response, payload = invoke(sandbox, function_arn, {"id": run_id, "sleep": CRASH_SLEEP_SECONDS})

    assert response.get("FunctionError") == "Unhandled"
    assert re.search(rf"Task timed out after {CRASH_TIMEOUT_SECONDS}\.00 seconds", payload.get("errorMessage", "")), (
        payload
    )
    assert payload.get("errorType", "Sandbox.Timedout") == "Sandbox.Timedout"

    def marked(phase: str) -> bool:
        key = {"pk": {"S": f"{run_id}#{phase}"}}
        return "Item" in dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)

    assert marked("started"), f"the handler wrote no started mark within its {CRASH_TIMEOUT_SECONDS} s timeout"
    # Wait until the handler would have finished its sleep and written, had it not been stopped.
    while time.monotonic() < started + CRASH_SLEEP_SECONDS + SETTLE_SECONDS:
        assert not marked("finished"), "code after the timeout ran"
        time.sleep(0.5)
    assert not marked("finished"), "code after the timeout ran"


def test_failed_async_event_is_retried_then_sent_to_its_on_failure_destination(sandbox, make_function, queue):
    """An InvocationType=Event invocation that fails is retried MaximumRetryAttempts times
    (PutFunctionEventInvokeConfig), then Lambda sends an invocation record to the OnFailure
    destination: requestContext.condition "RetriesExhausted", approximateInvokeCount =
    attempts made, the original requestPayload, and the function's error as responsePayload.

    https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html
    https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html
    (invocation record shape)
    """
    lambda_ = sandbox.client("lambda")
    sqs = sandbox.client("sqs")
    function_arn = make_function("handler.fail")
    # AWS checks that the function's role may send to the queue: a fresh role can be refused.
    sandbox.retry_while_role_propagates(
        lambda: lambda_.put_function_event_invoke_config(
            FunctionName=function_arn,
            MaximumRetryAttempts=ASYNC_RETRY_ATTEMPTS,
            DestinationConfig={"OnFailure": {"Destination": queue["arn"]}},
        ),
        codes=("InvalidParameterValueException",),
    )
    event = {"reason": f"declined-{uuid.uuid4().hex}"}

    accepted = lambda_.invoke(FunctionName=function_arn, InvocationType="Event", Payload=json.dumps(event).encode())
    assert accepted["StatusCode"] == 202

    record = _receive_record(sqs, queue["url"], event)
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == ASYNC_RETRY_ATTEMPTS + 1
    assert record["requestContext"]["functionArn"].startswith(function_arn)
    assert record["responseContext"].get("functionError") == "Unhandled"
    assert record["responsePayload"]["errorType"] == "PaymentDeclined"
    assert record["responsePayload"]["errorMessage"] == event["reason"]


def _receive_record(sqs, queue_url: str, event: dict) -> dict:
    """The invocation record for this event, waiting (long polls) up to ASYNC_RECORD_WAIT_SECONDS."""
    deadline = time.monotonic() + ASYNC_RECORD_WAIT_SECONDS
    while time.monotonic() < deadline:
        answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=5)
        for message in answer.get("Messages", []):
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            record = json.loads(message["Body"])
            if record.get("requestPayload") == event:
                return record
    raise AssertionError(f"no invocation record for {event} within {ASYNC_RECORD_WAIT_SECONDS} s")
