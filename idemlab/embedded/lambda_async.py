"""Asynchronous invocation (InvocationType=Event), as Lambda does it.

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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from idemlab.embedded.lambda_concurrency import Throttled
from idemlab.embedded.lambda_runtime import InvokeResult, lambda_error

DEFAULT_MAX_RETRY_ATTEMPTS = 2  # Lambda's documented default
DEFAULT_MAX_EVENT_AGE_SECONDS = 21600  # 6 hours, Lambda's documented default
RETRY_BASE_DELAY_SECONDS = float(os.environ.get("LAMBDA_RETRY_BASE_DELAY", "1"))


@dataclass
class QueuedEvent:
    """One asynchronous invocation, with its function's async settings as they were when queued."""

    function_arn: str
    payload: bytes
    config: dict  # the function's event invoke config (PutFunctionEventInvokeConfig), {} when it has none
    dead_letter_arn: str | None
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    attempts: int = 0
    throttles: int = 0
    last_result: InvokeResult | None = None  # of the last attempt that ran

    def __post_init__(self):
        self.expires_at = time.time() + int(self.config.get("MaximumEventAgeInSeconds", DEFAULT_MAX_EVENT_AGE_SECONDS))


class AsyncInvoker:
    """Queues events, retries them, and delivers records where the config says."""

    def __init__(self, invoke: Callable[[str, bytes], InvokeResult], deliver: Callable[[str, str, dict], None]):
        self._invoke = invoke  # (function arn, payload) -> result
        self._deliver = deliver  # (target arn, message body, sqs attributes) -> None
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="lambda-async")
        self._closed = False

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
            result = self._invoke(event.function_arn, event.payload)
        except Throttled:
            event.throttles += 1
            # After 1 s, then twice as long each time, up to 5 minutes (developer guide, "Asynchronous invocation").
            backoff = min(2.0 ** (event.throttles - 1), 300.0)
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
        try:
            destinations = event.config.get("DestinationConfig") or {}
            target = (destinations.get("OnSuccess" if condition == "Success" else "OnFailure") or {}).get("Destination")
            if target:  # the record Lambda sends to a destination (no response when the event never ran)
                context = {"requestId": event.request_id, "functionArn": f"{event.function_arn}:$LATEST",
                           "condition": condition, "approximateInvokeCount": event.attempts}
                now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
                record = {"version": "1.0", "timestamp": now, "requestContext": context}
                record["requestPayload"] = json.loads(event.payload or b"{}")  # lambda_api.py let only JSON in
                if result is not None:
                    response = {"statusCode": 200, "executedVersion": "$LATEST", "functionError": result.function_error}
                    record["responseContext"] = {key: value for key, value in response.items() if value is not None}
                    record["responsePayload"] = json.loads(result.payload)
                self._deliver(target, json.dumps(record), {})
            elif condition != "Success" and event.dead_letter_arn:
                # A DLQ receives the original event, with the error in message attributes.
                message = str((json.loads(result.payload or b"{}") if result else {}).get("errorMessage", ""))[:256]
                attributes = {"RequestID": event.request_id, "ErrorCode": "200", "ErrorMessage": message}
                self._deliver(event.dead_letter_arn, event.payload.decode() or "{}", attributes)
        except Exception as exc:  # the pool would swallow it; a lost record must at least be visible
            print(f"embedded: async event {event.request_id} for {event.function_arn} lost: {exc!r}", file=sys.stderr)
