"""Lambda's Invoke API on the real runtime (lambda_runtime.py), within Lambda's concurrency
limits, and its asynchronous invocation.

moto keeps the function's configuration and zip; this module replaces what happens
at Invoke: RequestResponse runs the handler and waits, Event queues it (202),
DryRun only checks the function exists (204). It also keeps a function's
DeadLetterConfig, which moto drops, because async failures must reach it.

Concurrency: Lambda counts the invocations in flight per account and Region. A function
with reserved concurrency (PutFunctionConcurrency) runs at most that many at once; the
others share what is left of the account's limit. Past either, Invoke answers HTTP 429
TooManyRequestsException, message "Rate Exceeded.", Type "User", with the Reason below
(Invoke API reference, and what AWS answered in the recordings of LocalStack's
tests/aws/services/lambda_/test_lambda.py, v4.14.0), before running anything. Each
invocation in flight is a process here, so the account limit also bounds the processes.

Asynchronous invocation (InvocationType=Event): the caller gets 202 at once; the event is
queued and invoked, and on error retried up to MaximumRetryAttempts (default 2) while
younger than MaximumEventAgeInSeconds (default 6 h); then the record goes to the on-failure
destination, or the event to the dead-letter queue. Retry delays scale with
LAMBDA_RETRY_BASE_DELAY (seconds, LocalStack's knob too): AWS waits about 1 and then 2
minutes, a workshop cannot. An event too old when its turn comes (queued, throttled or
between retries), or whose next retry would come too late, is discarded unrun with the
condition EventAgeExceeded (what AWS did in the recording of LocalStack's
test_lambda_destinations.py::test_maxeventage, v4.14.0). A throttled attempt is not an
attempt: the event is tried again with a growing delay until it is too old (the Lambda
developer guide, "Asynchronous invocation").
"""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
import uuid
import zipfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from urllib.parse import unquote

from moto.awslambda.exceptions import LambdaClientError
from moto.awslambda.models import LambdaBackend, LambdaFunction, lambda_backends
from moto.awslambda.responses import LambdaResponse
from moto.core.exceptions import JsonRESTError

from idemlab.embedded.lambda_runtime import InvokeResult, LambdaRuntime, lambda_error
from idemlab.embedded.patching import wrap

MAX_SYNC_RESPONSE_BYTES = 6 * 1024 * 1024  # Lambda's synchronous payload limit
# Invoke API reference: "For synchronous invocations, the maximum payload size is 6 MB. For
# asynchronous invocations, the maximum payload size is 1 MB." (MB of 2**20 bytes: AWS's own
# message names 6291456 bytes.) Past them AWS answers HTTP 413 RequestEntityTooLargeException
# (botocore's model calls the shape RequestTooLargeException), before running anything.
MAX_SYNC_REQUEST_BYTES = 6 * 1024 * 1024
MAX_ASYNC_REQUEST_BYTES = 1024 * 1024
# Lambda quotas: a deployment package unzipped is at most 250 MB, the CodeSizeUnzipped that
# GetAccountSettings reports; AWS refuses a larger one at CreateFunction/UpdateFunctionCode.
MAX_UNZIPPED_CODE_BYTES = 262144000
CODE_ATTRIBUTES = ("code_bytes", "code_size", "code_sha_256", "code_digest")
REQUEST_ID = "x-amzn-requestid"  # the header moto fills with a random id of its own
THROTTLE_HEADERS = {"status": "429", "content-type": "application/json", "x-amzn-ErrorType": "TooManyRequestsException"}
DEFAULT_MAX_RETRY_ATTEMPTS = 2  # Lambda's documented default
DEFAULT_MAX_EVENT_AGE_SECONDS = 21600  # 6 hours, Lambda's documented default
RETRY_BASE_DELAY_SECONDS = float(os.environ.get("LAMBDA_RETRY_BASE_DELAY", "1"))


class LambdaUserError(JsonRESTError):
    """An error with the body Lambda sends for the caller's mistakes: its `Type` and `message`."""

    def __init__(self, error_type: str, message: str, status: int = 400):
        super().__init__(error_type, message)
        self.code = status
        self.description = json.dumps({"Type": "User", "message": message})


def code_problem(code: bytes) -> str | None:
    """Why Lambda would refuse this deployment package, with AWS's wording (recorded in
    LocalStack's test_lambda_api.snapshot.json, v4.14.0: test_lambda_invalid_zip_file,
    test_oversized_unzipped_lambda), or None."""
    try:
        with zipfile.ZipFile(io.BytesIO(code)) as archive:
            if sum(entry.file_size for entry in archive.infolist()) >= MAX_UNZIPPED_CODE_BYTES:
                return f"Unzipped size must be smaller than {MAX_UNZIPPED_CODE_BYTES} bytes"
            if archive.testzip() is None:  # every member reads back whole, its CRC matching
                return None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, ValueError, EOFError, OSError):
        pass  # not a zip, a corrupt one, or one compressed in a way nothing here can read
    return "Could not unzip uploaded file. Please check your file, then try to upload again."


class Throttled(Exception):
    """Past a concurrency limit: Lambda refuses the invocation before running it. Its argument is the Reason."""


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


class LambdaService:
    """The runtime, the invocations in flight (by function ARN with reserved concurrency, else by
    account and Region) and the async queue, shared by every request thread. `client(service,
    region)` is a boto3 client of this server: async records reach their destinations through it."""

    def __init__(self, endpoint_url: str, client, limit: int):
        self.runtime = LambdaRuntime(endpoint_url)
        self.endpoint_url, self.client, self.limit = endpoint_url, client, limit
        self._lock = threading.Lock()
        self._running: Counter = Counter()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="lambda-async")
        self._closed = False
        self._accepted: set[str] = set()  # request ids of async events accepted and not yet finished

    def accept(self, event: QueuedEvent) -> None:
        """Queue an Event invocation the caller was answered 202 for."""
        with self._lock:
            self._accepted.add(event.request_id)
        self.submit(event)

    def pending_events(self) -> int:
        """Async invocations accepted and not yet finished (queued, running, or waiting to retry)."""
        with self._lock:
            return len(self._accepted)

    def unreserved(self, functions) -> int:
        """The limit less the concurrency reserved by `functions` (moto's, of one account and Region)."""
        return max(0, self.limit - sum(int(fn.reserved_concurrency or 0) for fn in functions))

    def invoke(self, fn: LambdaFunction, payload: bytes) -> InvokeResult:
        """Run one invocation of moto function `fn`; raises Throttled past a concurrency limit, before running."""
        if fn.reserved_concurrency is None:
            functions = lambda_backends[fn.account_id][fn.region].list_functions()
            scope, limit = (fn.account_id, fn.region), self.unreserved(functions)
            reason = "ConcurrentInvocationLimitExceeded"
        else:  # PutFunctionConcurrency; 0 stops the function
            scope, limit = fn.function_arn, int(fn.reserved_concurrency)
            reason = "ReservedFunctionConcurrentInvocationLimitExceeded"
        with self._lock:
            if self._running[scope] >= limit:
                raise Throttled(reason)
            self._running[scope] += 1
        try:
            return self.runtime.invoke(fn, payload)
        finally:
            with self._lock:
                self._running[scope] -= 1

    def invoke_by_arn(self, function_arn: str, payload: bytes) -> InvokeResult:
        _, _, _, region, account, _ = function_arn.split(":", 5)
        return self.invoke(lambda_backends[account][region].get_function(function_arn), payload)

    def submit(self, event: QueuedEvent) -> None:
        if not self._closed:
            self._pool.submit(self._attempt, event)

    def shutdown(self) -> None:
        self._closed = True  # a retry timer still pending finds it closed, and does nothing
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.runtime.shutdown()

    def _attempt(self, event: QueuedEvent) -> None:
        if time.time() >= event.expires_at:  # it waited too long: never run it
            return self._finish(event, event.last_result, "EventAgeExceeded")
        try:
            result = self.invoke_by_arn(event.function_arn, event.payload)
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
        with self._lock:
            self._accepted.discard(event.request_id)
        try:
            destinations = event.config.get("DestinationConfig") or {}
            target = (destinations.get("OnSuccess" if condition == "Success" else "OnFailure") or {}).get("Destination")
            if target:  # the record Lambda sends to a destination (no response when the event never ran)
                context = {"requestId": event.request_id, "functionArn": f"{event.function_arn}:$LATEST",
                           "condition": condition, "approximateInvokeCount": event.attempts}
                now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
                record = {"version": "1.0", "timestamp": now, "requestContext": context}
                record["requestPayload"] = json.loads(event.payload or b"{}")  # _invoke let only JSON in
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

    def _deliver(self, target_arn: str, body: str, attributes: dict) -> None:
        """Send an async-invocation record to its destination, through this server's own API."""
        _, _, service, region, account, resource = target_arn.split(":", 5)
        if service == "sqs":
            attributes = {k: {"DataType": "String", "StringValue": v} for k, v in attributes.items() if v}
            url = f"{self.endpoint_url}/{account}/{resource}"
            self.client("sqs", region).send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
        elif service == "sns":
            self.client("sns", region).publish(TopicArn=target_arn, Message=body)
        elif service == "lambda":
            self.client("lambda", region).invoke(FunctionName=target_arn, InvocationType="Event", Payload=body.encode())
        elif service == "events":
            entry = {"Source": "lambda", "DetailType": "Lambda Function Invocation Result", "Detail": body}
            self.client("events", region).put_events(Entries=[entry | {"EventBusName": target_arn}])
        else:
            print(f"embedded: cannot deliver to {target_arn}", file=sys.stderr)


_service: LambdaService | None = None


def pending_events() -> int:
    return _service.pending_events() if _service else 0


def _invoke(self: LambdaResponse):
    """Replacement for LambdaResponse.invoke (the Invoke API)."""
    fn = self.backend.get_function(unquote(self.path.rsplit("/", 2)[-2]), self._get_param("qualifier"))  # or AWS's 404
    payload = self.body if isinstance(self.body, bytes) else (self.body or "").encode()
    invocation_type = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
    limit = MAX_ASYNC_REQUEST_BYTES if invocation_type == "Event" else MAX_SYNC_REQUEST_BYTES
    if len(payload) > limit:  # the wording AWS answers (its InvokeFunction and Event messages)
        if invocation_type == "Event":
            message = f"{len(payload)} byte payload is too large for the Event invocation type (limit {limit} bytes)"
        else:
            message = f"Request must be smaller than {limit} bytes for the InvokeFunction operation"
        raise LambdaUserError("RequestEntityTooLargeException", message, status=413)
    try:
        json.loads(payload or b"{}")
    except ValueError as exc:  # Invoke API reference: "The request body could not be parsed as JSON"
        message = f"Could not parse request body into json: Could not parse payload into json: {exc}"
        raise LambdaClientError("InvalidRequestContentException", message) from exc
    headers = {"content-type": "application/json", "X-Amz-Executed-Version": "$LATEST"}
    if invocation_type == "DryRun":
        return 204, {"content-type": "application/json", "status": "204"}, ""
    if invocation_type == "Event":
        config = fn.event_invoke_config[-1].config if fn.event_invoke_config else {}  # moto appends; the last wins
        event = QueuedEvent(fn.function_arn, payload, config, (fn.idemlab_dead_letter_config or {}).get("TargetArn"))
        _service.accept(event)
        # No X-Amz-Executed-Version: no version has run yet (AWS sends none on a 202, as
        # recorded in LocalStack's test_lambda.py snapshots, v4.14.0).
        return 202, {"content-type": "application/json", "status": "202", REQUEST_ID: event.request_id}, ""
    try:
        result = _service.invoke(fn, payload)
    except Throttled as throttled:  # Lambda's 429, with the fields AWS sends
        body = json.dumps({"Reason": str(throttled), "Type": "User", "message": "Rate Exceeded."})
        return 429, dict(THROTTLE_HEADERS), body
    headers[REQUEST_ID] = result.request_id  # also the requestId of an error payload
    if len(result.payload) > MAX_SYNC_RESPONSE_BYTES:
        message = "Response payload size exceeded maximum allowed payload size (6291556 bytes)."
        result = lambda_error("Function.ResponseSizeTooLarge", message)
    if result.function_error:
        headers["X-Amz-Function-Error"] = result.function_error
    return 200, headers, result.payload


def _get_account_settings(self: LambdaResponse):
    """GetAccountSettings (moto has none): the limits this backend enforces. Lesson code sizes its
    concurrent copies from UnreservedConcurrentExecutions: here, the embedded limit less what functions reserve."""
    functions = list(self.backend.list_functions())
    code_size = sum(int(getattr(fn, "code_size", 0) or 0) for fn in functions)
    document = {
        "AccountLimit": {
            # Lambda's published quotas for code storage and deployment package size.
            "TotalCodeSize": 80530636800, "CodeSizeUnzipped": 262144000, "CodeSizeZipped": 52428800,
            "ConcurrentExecutions": _service.limit,
            "UnreservedConcurrentExecutions": _service.unreserved(functions),
        },
        "AccountUsage": {"TotalCodeSize": code_size, "FunctionCount": len(functions)},
    }
    return 200, {"content-type": "application/json"}, json.dumps(document)


def install(service: LambdaService) -> None:
    """Patch moto in this process; call once, before the server starts."""
    from moto.awslambda import urls

    global _service
    _service = service
    LambdaResponse.invoke = _invoke
    urls.url_paths.setdefault(r"{0}/(?P<api_version>[^/]+)/account-settings/?$", LambdaResponse.dispatch)
    LambdaResponse.get_account_settings = _get_account_settings
    LambdaFunction.idemlab_dead_letter_config = None  # moto drops DeadLetterConfig: kept, and described back

    @wrap(LambdaBackend, "create_function")
    def create_function(original, self, spec):
        fn = original(self, spec)
        fn.idemlab_dead_letter_config = spec.get("DeadLetterConfig")
        return fn

    @wrap(LambdaFunction, "_set_function_code")
    def checked_code(original, self, updated_spec):
        """Refuse a package Lambda would refuse (CreateFunction, UpdateFunctionCode, from a zip
        or from S3), leaving the function's code as it was: moto stores anything, and every
        Invoke then failed with an HTML 500 (retried by boto3)."""
        before = {name: getattr(self, name) for name in CODE_ATTRIBUTES if hasattr(self, name)}
        code_before = dict(self.code)  # moto writes an update's ZipFile or S3 location into it
        original(self, updated_spec)
        code = getattr(self, "code_bytes", b"") if self.package_type == "Zip" else b""
        problem = code_problem(code) if code else None
        if problem:
            for name, value in before.items():
                setattr(self, name, value)
            self.code.clear()
            self.code.update(code_before)
            raise LambdaUserError("InvalidParameterValueException", problem)

    @wrap(LambdaFunction, "update_configuration")
    def update_configuration(original, self, config_updates):
        self.idemlab_dead_letter_config = config_updates.get("DeadLetterConfig", self.idemlab_dead_letter_config)
        return original(self, config_updates)

    @wrap(LambdaFunction, "get_configuration")
    def get_configuration(original, self, *args, **kwargs):
        config = original(self, *args, **kwargs)
        if (self.idemlab_dead_letter_config or {}).get("TargetArn"):
            config["DeadLetterConfig"] = self.idemlab_dead_letter_config
        return config

    @wrap(LambdaResponse, "_enrich_response")
    def keep_invocation_request_id(original, headers, body):
        """Answer an Invoke with the invocation's own request id, not one moto makes up."""
        invocation = headers.get(REQUEST_ID)
        headers, body = original(headers, body)
        if invocation:
            headers[REQUEST_ID] = invocation
        return headers, body
