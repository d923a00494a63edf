"""The fix for a queue in front of a durable function: a plain (not durable) function takes
the messages and starts the deletion itself, naming the execution by the deletion request.

An event source mapping gives a durable function no execution name, so every delivery of a
message is a new execution (Lambda developer guide, durable-execution-idempotency, which
names this dispatcher as one remedy). Named by the business key, a second copy of the same
request finds the execution the first one started, whatever its state; a copy with another
payload under the same name is refused with DurableExecutionAlreadyStartedException, which
this function lets fail: the message then goes back to the queue, and to its dead-letter
queue, where someone looks at it.
"""

from __future__ import annotations

import json

from shared import clients, settings

ERASER = "erase_idempotent"  # the durable deletion this dispatcher starts (ERASE_IDEMPOTENT_FUNCTION)


def execution_name(request: dict) -> str:
    """The deletion request's id: the same on every copy of one request, different between requests."""
    return request["deletion_request_id"]


def handler(event: dict, context) -> dict:
    started = []
    for record in event["Records"]:
        request = json.loads(record["body"])
        # Event: the dispatcher starts the execution and returns; it does not wait for a deletion
        # that may take as long as its execution timeout.
        answer = clients.client("lambda").invoke(
            FunctionName=settings.function(ERASER),
            InvocationType="Event",
            DurableExecutionName=execution_name(request),
            Payload=json.dumps(request).encode(),
        )
        started.append(answer["DurableExecutionArn"])
    return {"executions": started}
