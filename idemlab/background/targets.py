"""Deliver an event to a target ARN the way EventBridge Scheduler does.

Shared by the scheduler firer and the redrive tool: both hand an input to a target
and must tell a failure worth retrying from one that no retry can fix.
"""

from __future__ import annotations

import json
import uuid

from botocore import xform_name
from botocore.exceptions import ClientError, ConnectionError as BotocoreConnectionError, ParamValidationError

from idemlab import clients

UNIVERSAL_PREFIX = "arn:aws:scheduler:::aws-sdk:"
# Scheduler's universal targets name services by their SDK names; boto3 differs for some.
BOTO3_SERVICE = {"sfn": "stepfunctions"}
# Failures Scheduler retries: throttling and the service's own trouble. Anything else
# (a missing target, a bad input, a refused permission) fails the same way every time.
RETRYABLE_CODES = {
    "ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded",
    "ServiceUnavailable", "ServiceUnavailableException", "InternalServerError", "InternalFailure", "ServiceException",
}


class DeliveryFailed(Exception):
    """The target refused the event or could not be reached."""

    def __init__(self, code: str, message: str, retryable: bool = False):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.retryable = code, message, retryable


def queue_url(queue_arn: str) -> str:
    """The URL of the SQS queue with this ARN."""
    _, _, _, _, account, name = queue_arn.split(":", 5)
    return clients.client("sqs").get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]


def deliver(target_arn: str, input_text: str | None, execution_name: str | None = None) -> dict:
    """Hand ``input_text`` to the target; returns the target's answer. Raises DeliveryFailed.

    ``execution_name`` names the execution when the target is a state machine (a
    redrive names it after the message, so delivering the message again is refused).
    """
    body = "{}" if input_text is None else input_text
    try:
        if target_arn.startswith(UNIVERSAL_PREFIX):
            return _universal(target_arn, body, execution_name)
        parts = target_arn.split(":", 5)
        service, resource = (parts[2], parts[5]) if len(parts) == 6 and parts[0] == "arn" else (None, "")
        if service == "lambda":
            # Scheduler invokes Lambda asynchronously: delivered means queued, not run.
            invoke = clients.client("lambda").invoke
            answer = invoke(FunctionName=target_arn, InvocationType="Event", Payload=body.encode())
            return {"StatusCode": answer.get("StatusCode")}
        if service == "states" and resource.startswith("stateMachine:"):
            # moto needs a name on every StartExecution; AWS would make one up the same way.
            name = execution_name or uuid.uuid4().hex
            answer = clients.client("stepfunctions").start_execution(stateMachineArn=target_arn, name=name, input=body)
            return {"executionArn": answer["executionArn"]}
        if service == "sqs":
            sent = clients.client("sqs").send_message(QueueUrl=queue_url(target_arn), MessageBody=body)
            return {"MessageId": sent["MessageId"]}
        raise DeliveryFailed("ValidationException", f"no Lambda, Step Functions, SQS or universal target: {target_arn}")
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "Unknown")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        raise DeliveryFailed(code, error.get("Message", ""), code in RETRYABLE_CODES or status >= 500) from exc
    except BotocoreConnectionError as exc:
        raise DeliveryFailed("ConnectionError", str(exc), True) from exc
    except ParamValidationError as exc:
        # The input does not fit the target's API: the same every time, never retried.
        raise DeliveryFailed("ValidationException", str(exc)) from exc


def _universal(target_arn: str, body: str, execution_name: str | None) -> dict:
    """``arn:aws:scheduler:::aws-sdk:<service>:<apiAction>`` with the input as parameters.

    ``execution_name`` replaces the ``Name`` of an ``sfn:startExecution``: the name the
    schedule gave belongs to the first delivery, and once that execution closed, Step
    Functions refuses the name whatever became of the work (StartExecution API
    reference), so reusing it would make a redrive look delivered when it was not.
    """
    service, _, action = target_arn[len(UNIVERSAL_PREFIX) :].partition(":")
    if not service or not action:
        raise DeliveryFailed("ValidationException", f"incomplete universal target: {target_arn}")
    client = clients.client(BOTO3_SERVICE.get(service, service))
    operation = action[0].upper() + action[1:]
    try:
        model = client.meta.service_model.operation_model(operation)
    except Exception as exc:  # botocore raises OperationNotFoundError, not a ClientError
        raise DeliveryFailed("ValidationException", f"{service} has no action {action}") from exc
    try:
        parameters = json.loads(body)
    except ValueError as exc:
        raise DeliveryFailed("ValidationException", f"the input of {target_arn} is not JSON: {exc}") from exc
    if not isinstance(parameters, dict):
        raise DeliveryFailed("ValidationException", f"the input of {target_arn} must be a JSON object")
    if execution_name and operation == "StartExecution":
        parameters = {key: value for key, value in parameters.items() if key.lower() != "name"}
        parameters["Name"] = execution_name
    # Universal targets spell parameters in PascalCase ("StateMachineArn"); some APIs
    # name them in camelCase ("stateMachineArn"): match them without regard to case.
    members = {name.lower(): name for name in (model.input_shape.members if model.input_shape else {})}
    unknown = [key for key in parameters if key.lower() not in members]
    if unknown:
        raise DeliveryFailed("ValidationException", f"{action} takes no parameter {', '.join(unknown)}")
    call = getattr(client, xform_name(operation))
    answer = call(**{members[key.lower()]: value for key, value in parameters.items()})
    answer.pop("ResponseMetadata", None)
    return answer
