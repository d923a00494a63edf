"""Route moto's Lambda Invoke API to the real runtime (lambda_runtime.py).

moto keeps the function's configuration and zip; this module replaces what happens
at Invoke: RequestResponse runs the handler and waits, Event queues it (202),
DryRun only checks the function exists (204). It also keeps a function's
DeadLetterConfig, which moto drops, because async failures must reach it.
"""

from __future__ import annotations

import base64
import functools
import json
import sys
from urllib.parse import unquote

from moto.awslambda.models import LambdaBackend, LambdaFunction
from moto.awslambda.responses import LambdaResponse

from idemlab.embedded.lambda_async import AsyncInvoker, AsyncPolicy, QueuedEvent
from idemlab.embedded.lambda_concurrency import ConcurrencyLimit, Throttled
from idemlab.embedded.lambda_runtime import FunctionVersion, LambdaRuntime, lambda_error
from idemlab.embedded.patching import replace_once

MAX_SYNC_RESPONSE_BYTES = 6 * 1024 * 1024  # Lambda's synchronous payload limit
REQUEST_ID = "x-amzn-requestid"  # the header moto fills with a random id of its own


class LambdaService:
    """The runtime and the async queue, shared by every request thread."""

    def __init__(self, runtime: LambdaRuntime, invoker_factory, concurrency: ConcurrencyLimit | None = None):
        self.runtime = runtime
        self.concurrency = concurrency or ConcurrencyLimit()
        self.invoker: AsyncInvoker = invoker_factory(self.invoke_by_arn)
        self.backend_lookup = None  # set by install(): (arn) -> moto LambdaFunction

    def invoke_function(self, fn: LambdaFunction, payload: bytes):
        """Run one invocation; raises Throttled past a concurrency limit, before running."""
        with self.concurrency.lease(fn.function_arn, _reserved(fn), _reserved_total(fn)):
            return self.runtime.invoke(FunctionVersion.from_moto(fn), fn.code_bytes, payload)

    def invoke_by_arn(self, function_arn: str, payload: bytes):
        return self.invoke_function(self.backend_lookup(function_arn), payload)


_service: LambdaService | None = None


def _reserved(fn: LambdaFunction) -> int | None:
    reserved = getattr(fn, "reserved_concurrency", None)  # PutFunctionConcurrency; 0 stops it
    return None if reserved is None else int(reserved)


def _reserved_total(fn: LambdaFunction) -> int:
    from moto.awslambda.models import lambda_backends

    functions = lambda_backends[fn.account_id][fn.region].list_functions()
    return sum(_reserved(other) or 0 for other in functions)


def _throttled(reason: str):
    """Lambda's 429, with the fields AWS sends (Reason, Type, message)."""
    body = json.dumps({"Reason": reason, "Type": "User", "message": "Rate Exceeded."})
    return 429, {"status": "429", "content-type": "application/json", "x-amzn-ErrorType": "TooManyRequestsException"}, body


def _invoke(self: LambdaResponse):
    """Replacement for LambdaResponse.invoke (the Invoke API)."""
    function_name = unquote(self.path.rsplit("/", 2)[-2])
    qualifier = self._get_param("qualifier")
    fn = self.backend.get_function(function_name, qualifier)  # raises AWS's 404 error
    invocation_type = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
    payload = self.body if isinstance(self.body, bytes) else (self.body or "").encode()
    headers = {"content-type": "application/json", "X-Amz-Executed-Version": "$LATEST"}

    if invocation_type == "DryRun":
        return 204, {**headers, "status": "204"}, ""
    if invocation_type == "Event":
        event = QueuedEvent(function_arn=fn.function_arn, payload=payload, policy=AsyncPolicy.from_moto(fn))
        _service.invoker.submit(event)
        return 202, {**headers, "status": "202", REQUEST_ID: event.request_id}, ""

    try:
        result = _service.invoke_function(fn, payload)
    except Throttled as throttled:
        return _throttled(throttled.reason)
    headers[REQUEST_ID] = result.request_id  # also the requestId of an error payload
    body = result.payload
    if len(body) > MAX_SYNC_RESPONSE_BYTES:
        body = lambda_error("Function.ResponseSizeTooLarge", "Response payload size exceeded maximum allowed payload size (6291556 bytes).")
        result.function_error = "Unhandled"
    if result.function_error:
        headers["X-Amz-Function-Error"] = result.function_error
    if self.headers.get("X-Amz-Log-Type") == "Tail":
        headers["X-Amz-Log-Result"] = base64.b64encode(f"pid {result.pid}\n".encode()).decode()
    return 200, headers, body


def _keep_dead_letter_config() -> None:
    original_create = LambdaBackend.create_function
    original_update = LambdaFunction.update_configuration
    original_describe = LambdaFunction.get_configuration

    @functools.wraps(original_create)
    def create_function(self, spec):
        fn = original_create(self, spec)
        fn.idemlab_dead_letter_config = spec.get("DeadLetterConfig") or None
        return fn

    @functools.wraps(original_update)
    def update_configuration(self, config_updates):
        if "DeadLetterConfig" in config_updates:
            self.idemlab_dead_letter_config = config_updates["DeadLetterConfig"] or None
        return original_update(self, config_updates)

    @functools.wraps(original_describe)
    def get_configuration(self, *args, **kwargs):
        config = original_describe(self, *args, **kwargs)
        dead_letter = getattr(self, "idemlab_dead_letter_config", None)
        if dead_letter and dead_letter.get("TargetArn"):
            config["DeadLetterConfig"] = dead_letter
        return config

    LambdaBackend.create_function = create_function
    LambdaFunction.update_configuration = update_configuration
    LambdaFunction.get_configuration = get_configuration


def _keep_invocation_request_id() -> None:
    """Answer an Invoke with the invocation's own request id, not one moto makes up."""
    original = LambdaResponse._enrich_response

    def enrich_response(headers, body):
        invocation = headers.get(REQUEST_ID)
        headers, body = original(headers, body)
        if invocation:
            headers[REQUEST_ID] = invocation
        return headers, body

    LambdaResponse._enrich_response = staticmethod(enrich_response)


def _get_account_settings(self: LambdaResponse):
    """GetAccountSettings (moto has none): the limits this backend enforces.

    Lesson code sizes its concurrent copies from UnreservedConcurrentExecutions, on every
    backend; here that is the embedded limit less what functions reserve.
    """
    functions = list(self.backend.list_functions())
    reserved = sum(_reserved(fn) or 0 for fn in functions)
    code_size = sum(int(getattr(fn, "code_size", 0) or 0) for fn in functions)
    limit = _service.concurrency.limit
    document = {
        "AccountLimit": {
            # Lambda's published quotas for code storage and deployment package size.
            "TotalCodeSize": 80530636800,
            "CodeSizeUnzipped": 262144000,
            "CodeSizeZipped": 52428800,
            "ConcurrentExecutions": limit,
            "UnreservedConcurrentExecutions": max(0, limit - reserved),
        },
        "AccountUsage": {"TotalCodeSize": code_size, "FunctionCount": len(functions)},
    }
    return 200, {"content-type": "application/json"}, json.dumps(document)


def _answer_get_account_settings() -> None:
    from moto.awslambda import urls

    urls.url_paths.setdefault(r"{0}/(?P<api_version>[^/]+)/account-settings/?$", LambdaResponse.dispatch)
    LambdaResponse.get_account_settings = _get_account_settings


def install(service: LambdaService, lookup) -> None:
    """Patch moto in this process; call once, before the server starts."""
    global _service
    _service = service
    service.backend_lookup = lookup
    if not replace_once(LambdaResponse, "invoke", _invoke):
        return
    _keep_dead_letter_config()
    _keep_invocation_request_id()
    _answer_get_account_settings()
    print("embedded: Lambda invokes run in worker processes", file=sys.stderr)
