"""Ask for an account to be deleted later: store the request, schedule its start.

Asking twice for the same user (with the same idempotency key, by default none) returns
the same request: its id is derived from the user and the key, and it is created with
a conditional put. The same key with another delay is refused, as a payment provider
refuses a reused key with another amount. The schedule is created after the request,
and again on a repeat while the request is SCHEDULED, so a crash between the two writes
heals itself.

Once a request is over (COMPLETED, or CANCELLED by the user), asking again is a new
request: its id is derived from the finished one's, so a repeat of *that* ask finds it
in turn, and a user can change their mind any number of times.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid

from botocore.exceptions import ClientError

from erasure import config, state
from erasure import input as checked
from erasure.errors import DeletionStoreUnavailableError, IdempotencyKeyReusedError
from shared import clients, settings

# Fixed namespace for request ids: the same user and key always give the same id.
REQUEST_ID_NAMESPACE = uuid.UUID("6b1f0e2c-9d3a-4f57-8a61-3c2e5d7f9b10")

# The schedule starts the workflow through Scheduler's universal target, so that the
# execution can be named after the request and a duplicate start is recognised. The
# target's ARN names the partition (aws, aws-cn, aws-us-gov), taken from the workflow's.
START_EXECUTION_TARGET = "arn:{partition}:scheduler:::aws-sdk:sfn:startExecution"

# StartExecution fails only on throttling or an outage: three retries spread over
# Scheduler's backoff ride out either; after that the dead-letter queue keeps the event.
SCHEDULE_MAX_RETRY_ATTEMPTS = 3
# An hour late is still on time for a deletion due in 30 days; an event older than that
# goes to the dead-letter queue, where someone looks at it, instead of firing silently.
SCHEDULE_MAX_EVENT_AGE_SECONDS = 3600

# Requests one user may finish (complete or cancel) and ask again under one key: far
# more than anyone changes their mind, few enough that the walk along them stays short.
MAX_REQUESTS_PER_KEY = 100


def handler(event, context):
    user_id = checked.identifier(event, "user_id")
    key = event.get("idempotency_key", "")
    if key != "":
        key = checked.identifier(event, "idempotency_key")
    default_delay = config.number("DELETION_DELAY_SECONDS", config.DEFAULT_DELAY_SECONDS)
    delay = checked.whole_seconds(event, "delay_seconds", default_delay, config.MAX_DELAY_SECONDS)
    now = int(time.time())
    table = clients.dynamodb_table("deletion_requests")
    request_id = deletion_request_id(user_id, key)
    for _ in range(MAX_REQUESTS_PER_KEY):
        request, created = state.create(table, request_id, user_id, now + delay, now=now, delay_seconds=delay)
        if created or not request.is_final:
            break
        request_id = next_request_id(request.deletion_request_id)
    else:
        raise DeletionStoreUnavailableError(
            f"{user_id}: more than {MAX_REQUESTS_PER_KEY} finished requests under one key"
        )
    if not created and request.delay_seconds is not None and request.delay_seconds != delay:
        raise IdempotencyKeyReusedError(
            f"{request.deletion_request_id} was asked with delay_seconds={request.delay_seconds}, not {delay}; "
            "use another idempotency_key for another request"
        )
    if request.status is state.Status.SCHEDULED:
        ensure_schedule(request)
    return {
        "deletion_request_id": request.deletion_request_id,
        "user_id": request.user_id,
        "status": request.status.value,
        "due_at": request.due_at,
        "created": created,
    }


def deletion_request_id(user_id: str, idempotency_key: str = "") -> str:
    return "del-" + uuid.uuid5(REQUEST_ID_NAMESPACE, f"{user_id}\n{idempotency_key}").hex


def next_request_id(finished_request_id: str) -> str:
    """The id of the request that follows a finished one under the same user and key."""
    return "del-" + uuid.uuid5(REQUEST_ID_NAMESPACE, f"after\n{finished_request_id}").hex


def schedule_name(deletion_request_id: str) -> str:
    return f"deletion-{deletion_request_id}"


def at_expression(epoch_seconds: int) -> str:
    moment = datetime.datetime.fromtimestamp(epoch_seconds, tz=datetime.UTC)
    return f"at({moment:%Y-%m-%dT%H:%M:%S})"


def start_execution_target(state_machine_arn: str) -> str:
    """Scheduler's universal target for StartExecution, in the state machine's partition
    (the second field of its ARN: ``arn:<partition>:states:...``)."""
    return START_EXECUTION_TARGET.format(partition=state_machine_arn.split(":")[1])


def ensure_schedule(request: state.Request) -> None:
    """One one-time schedule per request; an existing one is left as it is."""
    execution_input = {"deletion_request_id": request.deletion_request_id}
    state_machine_arn = config.state_machine_arn()
    target_input = {
        "StateMachineArn": state_machine_arn,
        "Name": request.deletion_request_id,
        "Input": json.dumps(execution_input),
    }
    try:
        clients.client("scheduler").create_schedule(
            Name=schedule_name(request.deletion_request_id),
            GroupName=settings.required("SCHEDULE_GROUP"),
            ScheduleExpression=at_expression(request.due_at),
            ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"},
            ActionAfterCompletion="DELETE",
            Target={
                "Arn": start_execution_target(state_machine_arn),
                "RoleArn": settings.required("SCHEDULER_ROLE_ARN"),
                "Input": json.dumps(target_input),
                "RetryPolicy": {
                    "MaximumRetryAttempts": SCHEDULE_MAX_RETRY_ATTEMPTS,
                    "MaximumEventAgeInSeconds": SCHEDULE_MAX_EVENT_AGE_SECONDS,
                },
                "DeadLetterConfig": {"Arn": settings.required("SCHEDULER_DLQ_ARN")},
            },
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConflictException":
            return  # created by the first request
        raise DeletionStoreUnavailableError(
            f"scheduling {request.deletion_request_id}: {exc.response['Error'].get('Code')}"
        ) from exc
