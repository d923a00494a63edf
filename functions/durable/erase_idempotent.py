"""Idempotent: the goodbye carries a key made of the execution and the step, so the
provider keeps one email however often the step runs within this execution."""

from aws_durable_execution_sdk_python import DurableContext, durable_execution

from erasure import erase


def execution_step_key(request: dict, execution_arn: str, step_name: str) -> str:
    return f"{execution_arn}#{step_name}"


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    return erase(event, context, execution_step_key)
