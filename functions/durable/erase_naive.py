"""Naive: the goodbye is sent without a key, so a replayed send step sends it again."""

from aws_durable_execution_sdk_python import DurableContext, durable_execution

from erasure import erase


def no_key(request: dict, execution_arn: str, step_name: str) -> None:
    return None


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    return erase(event, context, no_key)
