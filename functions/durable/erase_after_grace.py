"""The deletion with its grace period inside the function: ``context.wait`` for 30 days,
then the erasure with the keyed goodbye. Lambda suspends the execution for the wait and
bills no compute for it (Lambda developer guide, durable-basic-concepts); a deletion the
user cancels meanwhile is the lesson's next question, not this handler's."""

from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_durable_execution_sdk_python.config import Duration

from erase_idempotent import execution_step_key
from erasure import erase

GRACE_DAYS = 30  # the deletion lesson's grace period (notebook 03)


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    context.wait(Duration.from_days(GRACE_DAYS), name="grace_period")
    return erase(event, context, execution_step_key)
