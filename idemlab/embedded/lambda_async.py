"""Lambda's asynchronous invocation (InvocationType=Event): the queue, its retries, and
where a finished event's record goes.

The caller gets 202 at once; the event is queued and invoked, and on error retried up to
MaximumRetryAttempts (default 2) while younger than MaximumEventAgeInSeconds (default 6 h);
then the record goes to the on-failure destination, or the event to the dead-letter queue.
Retry delays scale with LAMBDA_RETRY_BASE_DELAY (seconds, LocalStack's knob too): AWS waits
about 1 and then 2 minutes, a workshop cannot. An event too old when its turn comes (queued,
throttled or between retries), or whose next retry would come too late, is discarded unrun
with the condition EventAgeExceeded (what AWS did in the recording of LocalStack's
test_lambda_destinations.py::test_maxeventage, v4.14.0). A throttled attempt is not an
attempt: the event is tried again with a growing delay until it is too old (the Lambda
developer guide, "Asynchronous invocation").
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone

from idemlab.embedded.lambda_concurrency import Throttled
from idemlab.embedded.lambda_runtime import InvokeResult, lambda_error

DEFAULT_MAX_RETRY_ATTEMPTS = 2  # Lambda's documented default
DEFAULT_MAX_EVENT_AGE_SECONDS = 21600  # 6 hours, Lambda's documented default
RETRY_BASE_DELAY_SECONDS = float(os.environ.get("LAMBDA_RETRY_BASE_DELAY", "1"))
# A throttled event waits 1 s, then twice as long each time, up to 5 minutes (developer
# guide, "Asynchronous invocation").
MAX_THROTTLE_BACKOFF_SECONDS = 300.0


@dataclass
class QueuedEvent:
    """One asynchronous invocation, with its function's async settings as they were when queued."""

    function_arn: str
    payload: bytes
    config: dict  # the function's event invoke config (PutFunctionEventInvokeConfig), {} when it has none
    dead_letter_arn: str | None  # the function's DeadLetterConfig target, if any
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    attempts: int = 0  # attempts that ran (a throttled one did not)
    throttles: int = 0  # attempts refused by a concurrency limit
    last_result: InvokeResult | None = None  # of the last attempt that ran

    def __post_init__(self):
        max_age = int(self.config.get("MaximumEventAgeInSeconds", DEFAULT_MAX_EVENT_AGE_SECONDS))
        self.expires_at = time.time() + max_age


class AsyncInvocations:
    """The queue of Event invocations. ``invoke_by_arn`` runs one attempt (raising Throttled
    past a limit); ``client(service, region)`` is a boto3 client of this server, through which
    records reach their destinations."""

    def __init__(self, invoke_by_arn: Callable[[str, bytes], InvokeResult], endpoint_url: str, client):
        self.invoke_by_arn = invoke_by_arn
        self.endpoint_url = endpoint_url
        self.client = client
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="lambda-async")
        self._closed = False
        self._accepted: set[str] = set()  # request ids of async events accepted and not yet finished

    def accept(self, event: QueuedEvent) -> None:
        """Queue an Event invocation the caller was answered 202 for."""
        with self._lock:
            self._accepted.add(event.request_id)
        self.submit(event)

    def pending(self) -> int:
        """Async invocations accepted and not yet finished (queued, running, or waiting to retry)."""
        with self._lock:
            return len(self._accepted)

    def submit(self, event: QueuedEvent) -> None:
        if not self._closed:
            self._pool.submit(self._attempt, event)

    def shutdown(self) -> None:
        self._closed = True  # a retry timer still pending finds it closed, and does nothing
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _attempt(self, event: QueuedEvent) -> None:
        if time.time() >= event.expires_at:  # it waited too long: never run it
            return self._finish(event, event.last_result, "EventAgeExceeded")
        try:
            result = self.invoke_by_arn(event.function_arn, event.payload)
        except Throttled:
            event.throttles += 1
            backoff = min(2.0 ** (event.throttles - 1), MAX_THROTTLE_BACKOFF_SECONDS)
            remaining = event.expires_at - time.time()  # wake up when it expires at the latest
            return self._retry_later(event, max(0.0, min(backoff, remaining)))
        except Exception as exc:  # the function was deleted meanwhile: give up like Lambda
            result = lambda_error(type(exc).__name__, str(exc))
        event.attempts += 1
        event.last_result = result
        delay = RETRY_BASE_DELAY_SECONDS * event.attempts
        if result.function_error is None:
            self._finish(event, result, "Success")
        elif event.attempts > int(event.config.get("MaximumRetryAttempts", DEFAULT_MAX_RETRY_ATTEMPTS)):
            self._finish(event, result, "RetriesExhausted")
        elif time.time() + delay > event.expires_at:
            self._finish(event, result, "EventAgeExceeded")
        else:
            self._retry_later(event, delay)

    def _retry_later(self, event: QueuedEvent, delay: float) -> None:
        timer = threading.Timer(delay, self.submit, (event,))
        timer.daemon = True
        timer.start()

    def _finish(self, event: QueuedEvent, result: InvokeResult | None, condition: str) -> None:
        """Send the invocation record to the destination for `condition`, else a failed event to the DLQ."""
        with self._lock:
            self._accepted.discard(event.request_id)
        try:
            destinations = event.config.get("DestinationConfig") or {}
            which = "OnSuccess" if condition == "Success" else "OnFailure"
            target = (destinations.get(which) or {}).get("Destination")
            if target:
                self._deliver(target, json.dumps(invocation_record(event, result, condition)), {})
            elif condition != "Success" and event.dead_letter_arn:
                # A DLQ receives the original event, with the error in message attributes.
                error = json.loads(result.payload or b"{}") if result else {}
                message = str(error.get("errorMessage", ""))[:256]
                attributes = {"RequestID": event.request_id, "ErrorCode": "200", "ErrorMessage": message}
                self._deliver(event.dead_letter_arn, event.payload.decode() or "{}", attributes)
        except Exception as exc:  # the pool would swallow it; a lost record must at least be visible
            print(f"embedded: async event {event.request_id} for {event.function_arn} lost: {exc!r}", file=sys.stderr)

    def _deliver(self, target_arn: str, body: str, attributes: dict) -> None:
        """Send an async-invocation record to its destination, through this server's own API."""
        _, _, service, region, account, resource = target_arn.split(":", 5)
        if service == "sqs":
            message_attributes = {
                name: {"DataType": "String", "StringValue": value} for name, value in attributes.items() if value
            }
            url = f"{self.endpoint_url}/{account}/{resource}"
            self.client("sqs", region).send_message(
                QueueUrl=url, MessageBody=body, MessageAttributes=message_attributes
            )
        elif service == "sns":
            self.client("sns", region).publish(TopicArn=target_arn, Message=body)
        elif service == "lambda":
            lambda_ = self.client("lambda", region)
            lambda_.invoke(FunctionName=target_arn, InvocationType="Event", Payload=body.encode())
        elif service == "events":
            entry = {"Source": "lambda", "DetailType": "Lambda Function Invocation Result", "Detail": body}
            self.client("events", region).put_events(Entries=[entry | {"EventBusName": target_arn}])
        else:
            print(f"embedded: cannot deliver to {target_arn}", file=sys.stderr)


def invocation_record(event: QueuedEvent, result: InvokeResult | None, condition: str) -> dict:
    """The record Lambda sends to a destination (no response when the event never ran)."""
    context = {
        "requestId": event.request_id,
        "functionArn": f"{event.function_arn}:$LATEST",
        "condition": condition,
        "approximateInvokeCount": event.attempts,
    }
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    record = {"version": "1.0", "timestamp": now, "requestContext": context}
    record["requestPayload"] = json.loads(event.payload or b"{}")  # the Invoke API let only JSON in
    if result is not None:
        response = {"statusCode": 200, "executedVersion": "$LATEST", "functionError": result.function_error}
        record["responseContext"] = {key: value for key, value in response.items() if value is not None}
        record["responsePayload"] = json.loads(result.payload)
    return record
