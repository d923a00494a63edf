"""The durable function of the conformance suite (``durable_handler.handler``).

Two steps, each counting its runs in the suite's table: ``mark`` always returns, ``crash``
runs past the function's timeout the first time it runs for an event (a crash before its
checkpoint), then returns. Lambda then invokes the handler again: the count of ``mark``
shows whether a completed step ran again on that replay.
"""

import os
import time

import boto3
from aws_durable_execution_sdk_python import DurableContext, StepContext, durable_execution, durable_step

_dynamodb = boto3.client("dynamodb")


@durable_step
def mark(step: StepContext, run_id: str) -> int:
    return _count(run_id, "mark")


@durable_step
def crash_once(step: StepContext, run_id: str, lambda_context) -> int:
    runs = _count(run_id, "crash")
    if runs == 1:
        time.sleep(lambda_context.get_remaining_time_in_millis() / 1000 + 5)
    return runs


@durable_execution
def handler(event, context: DurableContext):
    marked = context.step(mark(event["id"]), name="mark")
    if event.get("crash"):
        context.step(crash_once(event["id"], context.lambda_context), name="crash")
    return {"marked": marked}


def _count(run_id: str, step: str) -> int:
    answer = _dynamodb.update_item(
        TableName=os.environ["TABLE"],
        Key={"pk": {"S": f"{run_id}#{step}"}},
        UpdateExpression="ADD runs :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="UPDATED_NEW",
    )
    return int(answer["Attributes"]["runs"]["N"])
