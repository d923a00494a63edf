"""Lambda's Invoke API on the real runtime (lambda_runtime.py), and GetAccountSettings.

moto keeps the function's configuration and zip; this module replaces what happens
at Invoke: RequestResponse runs the handler and waits, Event queues it (202,
lambda_async.py), DryRun only checks the function exists (204); every run first takes a
place within Lambda's concurrency limits (lambda_concurrency.py). It also keeps a
function's DeadLetterConfig, which moto drops, because async failures must reach it, and
refuses a deployment package Lambda would refuse.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import threading
import zipfile
from datetime import datetime, timezone
from urllib.parse import unquote

from moto.awslambda.exceptions import LambdaClientError
from moto.awslambda.models import LambdaBackend, LambdaFunction, lambda_backends
from moto.awslambda.responses import LambdaResponse
from moto.core.exceptions import JsonRESTError

from idemlab.embedded.alarm_evaluator import InvocationOutcomes, Outcome
from idemlab.embedded.lambda_async import AsyncInvocations, QueuedEvent
from idemlab.embedded.lambda_concurrency import ConcurrencyLimits, Throttled
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
# Packages whose verdict (refused or not) is remembered by digest: the lab deploys 4 zips.
CHECKED_PACKAGES_KEPT = 256
CODE_ATTRIBUTES = ("code_bytes", "code_size", "code_sha_256", "code_digest")
REQUEST_ID = "x-amzn-requestid"  # the header moto fills with a random id of its own
THROTTLE_HEADERS = {"status": "429", "content-type": "application/json", "x-amzn-ErrorType": "TooManyRequestsException"}


class LambdaUserError(JsonRESTError):
    """An error with the body Lambda sends for the caller's mistakes: its `Type` and `message`."""

    def __init__(self, error_type: str, message: str, status: int = 400):
        super().__init__(error_type, message)
        self.code = status
        self.description = json.dumps({"Type": "User", "message": message})


class _VerdictCache:
    """code_problem's answers by the package's sha256: a deploy creates many functions from
    the same few zips (and a redeploy creates them again), and checking one reads every member
    back (tens of milliseconds a megabyte). The same bytes always get the same answer; a few
    hundred recent digests are kept, each with its verdict only (not the bytes)."""

    def __init__(self, size: int):
        self.size = size
        self.verdicts: collections.OrderedDict[bytes, str | None] = collections.OrderedDict()
        self.lock = threading.Lock()

    def get(self, digest: bytes) -> tuple[bool, str | None]:
        with self.lock:
            if digest not in self.verdicts:
                return False, None
            self.verdicts.move_to_end(digest)
            return True, self.verdicts[digest]

    def put(self, digest: bytes, verdict: str | None) -> None:
        with self.lock:
            self.verdicts[digest] = verdict
            while len(self.verdicts) > self.size:
                self.verdicts.popitem(last=False)


VERDICTS = _VerdictCache(CHECKED_PACKAGES_KEPT)


def code_problem(code: bytes) -> str | None:
    """Why Lambda would refuse this deployment package, with AWS's wording (recorded in
    LocalStack's test_lambda_api.snapshot.json, v4.14.0: test_lambda_invalid_zip_file,
    test_oversized_unzipped_lambda), or None. Each distinct package is checked once (VERDICTS)."""
    digest = hashlib.sha256(code).digest()
    known, verdict = VERDICTS.get(digest)
    if known:
        return verdict
    verdict = _check_package(code)
    VERDICTS.put(digest, verdict)
    return verdict


def _check_package(code: bytes) -> str | None:
    try:
        with zipfile.ZipFile(io.BytesIO(code)) as archive:
            if sum(entry.file_size for entry in archive.infolist()) >= MAX_UNZIPPED_CODE_BYTES:
                return f"Unzipped size must be smaller than {MAX_UNZIPPED_CODE_BYTES} bytes"
            if archive.testzip() is None:  # every member reads back whole, its CRC matching
                return None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, ValueError, EOFError, OSError):
        pass  # not a zip, a corrupt one, or one compressed in a way nothing here can read
    return "Could not unzip uploaded file. Please check your file, then try to upload again."


class LambdaService:
    """What the Invoke API needs, shared by every request thread: the runtime, the concurrency
    limits (lambda_concurrency.py) and the async queue (lambda_async.py). `client(service,
    region)` is a boto3 client of this server: async records reach their destinations through it."""

    def __init__(self, endpoint_url: str, client, limit: int):
        self.runtime = LambdaRuntime(endpoint_url)
        self.limits = ConcurrencyLimits(limit)
        self.events = AsyncInvocations(self.invoke_by_arn, endpoint_url, client)
        # What the alarm evaluator publishes as AWS/Lambda Invocations and Errors.
        self.outcomes = InvocationOutcomes()

    @property
    def limit(self) -> int:
        return self.limits.limit

    def unreserved(self, functions) -> int:
        return self.limits.unreserved(functions)

    def invoke(self, fn: LambdaFunction, payload: bytes) -> InvokeResult:
        """Run one invocation of moto function `fn`; raises Throttled past a concurrency limit, before running."""
        with self.limits.slot(fn):
            started = datetime.now(timezone.utc)
            result = self.runtime.invoke(fn, payload)
        self.outcomes.record(Outcome(fn.function_name, fn.region, started, result.function_error is not None))
        return result

    def invoke_by_arn(self, function_arn: str, payload: bytes) -> InvokeResult:
        _, _, _, region, account, _ = function_arn.split(":", 5)
        return self.invoke(lambda_backends[account][region].get_function(function_arn), payload)

    def accept(self, event: QueuedEvent) -> None:
        """Queue an Event invocation the caller was answered 202 for."""
        self.events.accept(event)

    def pending_events(self) -> int:
        return self.events.pending()

    def shutdown(self) -> None:
        self.events.shutdown()
        self.runtime.shutdown()


_service: LambdaService | None = None


def pending_events() -> int:
    """Async invocations accepted and not yet finished; 0 before the server is set up."""
    if _service is None:
        return 0
    return _service.pending_events()


def _invoke(self: LambdaResponse):
    """Replacement for LambdaResponse.invoke (the Invoke API)."""
    name = unquote(self.path.rsplit("/", 2)[-2])
    fn = self.backend.get_function(name, self._get_param("qualifier"))  # or AWS's 404
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
        dead_letter_arn = (fn.idemlab_dead_letter_config or {}).get("TargetArn")
        event = QueuedEvent(fn.function_arn, payload, config, dead_letter_arn)
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
            "TotalCodeSize": 80530636800,
            "CodeSizeUnzipped": MAX_UNZIPPED_CODE_BYTES,
            "CodeSizeZipped": 52428800,
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
    LambdaFunction.idemlab_durable_config = None  # and DurableConfig (durable_api.py runs such functions)

    @wrap(LambdaBackend, "create_function")
    def create_function(original, self, spec):
        fn = original(self, spec)
        fn.idemlab_dead_letter_config = spec.get("DeadLetterConfig")
        fn.idemlab_durable_config = spec.get("DurableConfig")  # set only at creation, as on Lambda
        return fn

    @wrap(LambdaFunction, "create_from_cloudformation_json")
    def from_template(original, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        """An AWS::Lambda::Function of a CloudFormation stack: moto copies a fixed list of its
        properties, without DurableConfig (the CloudFormation template reference has it)."""
        fn = original(resource_name, cloudformation_json, account_id, region_name, **kwargs)
        fn.idemlab_durable_config = cloudformation_json.get("Properties", {}).get("DurableConfig")
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
        if self.idemlab_durable_config:
            config["DurableConfig"] = dict(self.idemlab_durable_config)
        return config

    @wrap(LambdaResponse, "_enrich_response")
    def keep_invocation_request_id(original, headers, body):
        """Answer an Invoke with the invocation's own request id, not one moto makes up. An
        answer that has one is not given to moto's: it only makes up an id (52 random
        characters: a few percent of a warm invoke's server CPU) and writes it into an XML body's
        <RequestId>, and an Invoke answers the handler's own bytes, never XML of moto's."""
        invocation = headers.get(REQUEST_ID)
        if not invocation:
            return original(headers, body)
        if "status" in headers:  # what moto's does besides, for the status it reads back
            headers["status"] = str(headers["status"])
        return headers, body
