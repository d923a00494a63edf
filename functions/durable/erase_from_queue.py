"""Fed by an SQS event source mapping, one deletion per message (batch size 1), with the
goodbye keyed by the execution and the step, as in ``erase_idempotent``. A mapping starts
a new execution for every delivery (it passes no execution name), so a second delivery of
the same message is a second execution with keys of its own."""

import json

from aws_durable_execution_sdk_python import DurableContext, durable_execution

from erase_idempotent import execution_step_key
from erasure import erase


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    (record,) = event["Records"]  # the mapping's batch size is 1
    return erase(json.loads(record["body"]), context, execution_step_key)
