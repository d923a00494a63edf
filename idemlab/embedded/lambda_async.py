"""Asynchronous invocation (InvocationType=Event), as Lambda does it.

The caller gets 202 at once; the event is queued, invoked, and on error retried up to
MaximumRetryAttempts (default 2) while younger than MaximumEventAgeInSeconds (default
6 h). Then the record goes to the on-failure destination, or the original event to the
function's dead-letter queue. Retry delays scale with LAMBDA_RETRY_BASE_DELAY (seconds,
the same knob LocalStack has): AWS waits about 1 and then 2 minutes, a workshop cannot.
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

from idemlab.embedded.lambda_runtime import InvokeResult

DEFAULT_MAX_RETRY_ATTEMPTS = 2  # Lambda's documented default
DEFAULT_MAX_EVENT_AGE_SECONDS = 21600  # 6 hours, Lambda's documented default
RETRY_BASE_DELAY_SECONDS = float(os.environ.get("LAMBDA_RETRY_BASE_DELAY", "1"))


@dataclass
class AsyncPolicy:
    max_retry_attempts: int = DEFAULT_MAX_RETRY_ATTEMPTS
    max_event_age_seconds: int = DEFAULT_MAX_EVENT_AGE_SECONDS
    on_success_arn: str | None = None
    on_failure_arn: str | None = None
    dead_letter_arn: str | None = None

    @classmethod
    def from_moto(cls, fn) -> "AsyncPolicy":
        policy = cls(dead_letter_arn=(getattr(fn, "idemlab_dead_letter_config", None) or {}).get("TargetArn"))
        if fn.event_invoke_config:
            config = fn.event_invoke_config[-1].config  # moto appends on update; the last wins
            policy.max_retry_attempts = int(config.get("MaximumRetryAttempts", policy.max_retry_attempts))
            policy.max_event_age_seconds = int(config.get("MaximumEventAgeInSeconds", policy.max_event_age_seconds))
            destinations = config.get("DestinationConfig") or {}
            policy.on_success_arn = (destinations.get("OnSuccess") or {}).get("Destination")
            policy.on_failure_arn = (destinations.get("OnFailure") or {}).get("Destination")
        return policy


@dataclass
class QueuedEvent:
    function_arn: str
    payload: bytes
    policy: AsyncPolicy
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    enqueued_at: float = field(default_factory=time.time)
    attempts: int = 0


class AsyncInvoker:
    """Queues events, retries them, and delivers records where the config says."""

    def __init__(self, invoke: Callable[[str, bytes], InvokeResult], deliver: Callable[[str, str, dict], None]):
        self._invoke = invoke  # (function arn, payload) -> result
        self._deliver = deliver  # (target arn, message body, sqs attributes) -> None
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="lambda-async")
        self._timers: set[threading.Timer] = set()
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, event: QueuedEvent) -> None:
        if not self._closed:
            self._pool.submit(self._attempt_logged, event)

    def _attempt_logged(self, event: QueuedEvent) -> None:
        # The pool would swallow an exception; a lost event must at least be visible.
        try:
            self._attempt(event)
        except Exception as exc:
            print(f"embedded: async event {event.request_id} for {event.function_arn} lost: {exc!r}", file=sys.stderr, flush=True)

    def shutdown(self) -> None:
        self._closed = True
        with self._lock:
            for timer in self._timers:
                timer.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _attempt(self, event: QueuedEvent) -> None:
        event.attempts += 1
        try:
            result = self._invoke(event.function_arn, event.payload)
        except Exception as exc:  # the function was deleted meanwhile: give up like Lambda
            result = InvokeResult(json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}).encode(), "Unhandled")
        if not result.failed:
            self._finish(event, result, "Success")
            return
        age = time.time() - event.enqueued_at
        if event.attempts > event.policy.max_retry_attempts:
            self._finish(event, result, "RetriesExhausted")
        elif age >= event.policy.max_event_age_seconds:
            self._finish(event, result, "EventAgeExceeded")
        else:
            self._retry_later(event, RETRY_BASE_DELAY_SECONDS * event.attempts)

    def _retry_later(self, event: QueuedEvent, delay: float) -> None:
        def fire() -> None:
            with self._lock:
                self._timers.discard(timer)
            self.submit(event)

        timer = threading.Timer(delay, fire)
        timer.daemon = True
        with self._lock:
            if self._closed:
                return
            self._timers.add(timer)
        timer.start()

    def _finish(self, event: QueuedEvent, result: InvokeResult, condition: str) -> None:
        target = event.policy.on_success_arn if condition == "Success" else event.policy.on_failure_arn
        if target:
            self._deliver(target, json.dumps(self._record(event, result, condition)), {})
        elif condition != "Success" and event.policy.dead_letter_arn:
            # A DLQ receives the original event, with the error in message attributes.
            error = json.loads(result.payload or b"{}")
            attributes = {
                "RequestID": event.request_id,
                "ErrorCode": "200",
                "ErrorMessage": str(error.get("errorMessage", ""))[:256],
            }
            self._deliver(event.policy.dead_letter_arn, event.payload.decode() or "{}", attributes)

    @staticmethod
    def _record(event: QueuedEvent, result: InvokeResult, condition: str) -> dict:
        """The invocation record Lambda sends to a destination."""
        response_context = {"statusCode": 200, "executedVersion": "$LATEST"}
        if result.failed:
            response_context["functionError"] = result.function_error
        try:
            request_payload = json.loads(event.payload or b"{}")
        except ValueError:
            request_payload = event.payload.decode(errors="replace")
        try:
            response_payload = json.loads(result.payload) if result.payload else None
        except ValueError:
            response_payload = result.payload.decode(errors="replace")
        return {
            "version": "1.0",
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "requestContext": {
                "requestId": event.request_id,
                "functionArn": f"{event.function_arn}:$LATEST",
                "condition": condition,
                "approximateInvokeCount": event.attempts,
            },
            "requestPayload": request_payload,
            "responseContext": response_context,
            "responsePayload": response_payload,
        }
