"""Deliver an event to a target ARN the way EventBridge Scheduler does.

Shared by the scheduler firer and the redrive tool: both hand an input to a target
and must tell a failure worth retrying from one that no retry can fix.
"""

from __future__ import annotations

import json
import re
import uuid

from botocore import xform_name
from botocore.exceptions import ClientError, ParamValidationError
from botocore.exceptions import ConnectionError as BotocoreConnectionError
from botocore.retries.standard import RetryContext, ThrottledRetryableChecker

from idemlab import clients

# A universal target, in any partition: arn:<partition>:scheduler:::aws-sdk:<service>:<apiAction>.
UNIVERSAL_TARGET = re.compile(r"arn:[a-z-]+:scheduler:::aws-sdk:")
BOTO3_SERVICE = {"sfn": "stepfunctions"}  # universal targets name services by their SDK names; boto3's differ for some


class DeliveryFailed(Exception):
    """The target refused the event or could not be reached."""

    def __init__(self, code: str, message: str, retryable: bool = False):
        super().__init__(f"{code}: {message}")
        self.code = code  # the AWS error code, or Scheduler's own (AWS.Scheduler.EventAgeExceeded)
        self.message = message
        self.retryable = retryable  # throttled, unreachable or a 5xx: worth another attempt


def queue_url(queue_arn: str) -> str:
    """The URL of the SQS queue with this ARN."""
    _, _, _, _, account, name = queue_arn.split(":", 5)
    return clients.client("sqs").get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]


def deliver(target_arn: str, input_text: str | None, execution_name: str | None = None) -> dict:
    """Hand ``input_text`` to the target; returns the target's answer. Raises DeliveryFailed.

    ``execution_name`` names the execution when the target starts a state machine. A
    redrive names it after the message, so delivering the message again is refused; it
    replaces the name a universal target's input gives, which belongs to the first
    delivery: once that execution closed, Step Functions refuses the name whatever became
    of the work (StartExecution API reference), and the redrive would look delivered.
    """
    try:
        service, action, parameters = _as_universal(target_arn, "{}" if input_text is None else input_text)
        if (service, action.lower()) == ("sfn", "startexecution"):
            given = [parameters.pop(key) for key in list(parameters) if key.lower() == "name"]
            # moto needs a name on every StartExecution; AWS would make one up the same way.
            parameters["Name"] = execution_name or next(iter(given), None) or uuid.uuid4().hex
        client = clients.client(BOTO3_SERVICE.get(service, service))
        operation = action[0].upper() + action[1:]
        service_model = client.meta.service_model
        if operation not in service_model.operation_names:
            raise DeliveryFailed("ValidationException", f"{service} has no action {action}")
        # Universal targets spell parameters in PascalCase ("StateMachineArn"); some APIs
        # name them in camelCase ("stateMachineArn"): match them without regard to case.
        # botocore refuses one the action does not take (ParamValidationError, below).
        shape = service_model.operation_model(operation).input_shape
        members = {name.lower(): name for name in (shape.members if shape else {})}
        arguments = {members.get(key.lower(), key): value for key, value in parameters.items()}
        answer = getattr(client, xform_name(operation))(**arguments)
    except ClientError as exc:
        # Scheduler retries throttling (botocore's list of its codes) and the service's own trouble (5xx);
        # anything else (a missing target, a bad input, a refused permission) fails the same way every time.
        code = exc.response["Error"].get("Code", "Unknown")
        message = exc.response["Error"].get("Message", "")
        throttled = ThrottledRetryableChecker().is_retryable(RetryContext(1, parsed_response=exc.response))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        raise DeliveryFailed(code, message, throttled or status >= 500) from exc
    except BotocoreConnectionError as exc:
        raise DeliveryFailed("ConnectionError", str(exc), True) from exc
    except ParamValidationError as exc:
        # The input does not fit the target's API: the same every time, never retried.
        raise DeliveryFailed("ValidationException", str(exc)) from exc
    # The answer as data: no request metadata, no unread stream (an asynchronous Invoke's empty Payload).
    return {key: value for key, value in answer.items() if key != "ResponseMetadata" and not hasattr(value, "read")}


def _as_universal(target_arn: str, body: str) -> tuple[str, str, dict]:
    """(service, action, parameters) of a universal target
    (``arn:<partition>:scheduler:::aws-sdk:<service>:<apiAction>``, the input its parameters), or
    of the call a templated Lambda, Step Functions or SQS target stands for."""
    if universal := UNIVERSAL_TARGET.match(target_arn):
        service, _, action = target_arn[universal.end() :].partition(":")
        if not service or not action:
            raise DeliveryFailed("ValidationException", f"incomplete universal target: {target_arn}")
        try:
            parameters = json.loads(body)
        except ValueError as exc:
            raise DeliveryFailed("ValidationException", f"the input of {target_arn} is not JSON: {exc}") from exc
        if not isinstance(parameters, dict):
            kind = type(parameters).__name__
            raise DeliveryFailed(
                "ValidationException", f"the input of {target_arn} must be a JSON object, not a {kind}"
            )
        return service, action, parameters
    parts = target_arn.split(":", 5)
    service = None
    resource = ""
    if len(parts) == 6 and parts[0] == "arn":
        service = parts[2]
        resource = parts[5]
    if service == "lambda":
        # Scheduler invokes Lambda asynchronously: delivered means queued, not run.
        return "lambda", "invoke", {"FunctionName": target_arn, "InvocationType": "Event", "Payload": body}
    if service == "states" and resource.startswith("stateMachine:"):
        return "sfn", "startExecution", {"StateMachineArn": target_arn, "Input": body}
    if service == "sqs":
        return "sqs", "sendMessage", {"QueueUrl": queue_url(target_arn), "MessageBody": body}
    raise DeliveryFailed("ValidationException", f"no Lambda, Step Functions, SQS or universal target: {target_arn}")
