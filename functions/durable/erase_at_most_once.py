"""At most once: the send step (still without a key) runs under AT_MOST_ONCE_PER_RETRY
with one attempt. Its START is checkpointed before it runs; a replay that finds it started
and unfinished does not run it again, and the step fails with StepInterruptedError
(the SDK's StepConfig). No second email, and no proof that the first one went out."""

from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_durable_execution_sdk_python.config import StepConfig, StepSemantics
from aws_durable_execution_sdk_python.retries import RetryStrategyConfig, create_retry_strategy

from erase_naive import no_key
from erasure import erase

AT_MOST_ONCE = StepConfig(
    step_semantics=StepSemantics.AT_MOST_ONCE_PER_RETRY,
    # One attempt: a retry would be a new attempt, which runs the step (and sends) again.
    retry_strategy=create_retry_strategy(RetryStrategyConfig(max_attempts=1)),
)


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    return erase(event, context, no_key, AT_MOST_ONCE)
