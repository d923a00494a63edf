"""Route moto's Lambda Invoke API to the real runtime (lambda_runtime.py).

moto keeps the function's configuration and zip; this module replaces what happens
at Invoke: RequestResponse runs the handler and waits, Event queues it (202),
DryRun only checks the function exists (204). It also keeps a function's
DeadLetterConfig, which moto drops, because async failures must reach it.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

from moto.awslambda.exceptions import LambdaClientError
from moto.awslambda.models import LambdaBackend, LambdaFunction, lambda_backends
from moto.awslambda.responses import LambdaResponse

from idemlab.embedded.lambda_async import AsyncInvoker, QueuedEvent
from idemlab.embedded.lambda_concurrency import ConcurrencyLimit, Throttled
from idemlab.embedded.lambda_runtime import LambdaRuntime, lambda_error
from idemlab.embedded.patching import replace_once, wrap

MAX_SYNC_RESPONSE_BYTES = 6 * 1024 * 1024  # Lambda's synchronous payload limit
REQUEST_ID = "x-amzn-requestid"  # the header moto fills with a random id of its own
THROTTLE_HEADERS = {"status": "429", "content-type": "application/json", "x-amzn-ErrorType": "TooManyRequestsException"}


class LambdaService:
    """The runtime and the async queue, shared by every request thread."""

    def __init__(self, runtime: LambdaRuntime, invoker_factory, concurrency: ConcurrencyLimit | None = None):
        self.runtime = runtime
        self.concurrency = concurrency or ConcurrencyLimit()
        self.invoker: AsyncInvoker = invoker_factory(self.invoke_by_arn)
        self.backend_lookup = None  # set by install(): (arn) -> moto LambdaFunction

    def invoke_function(self, fn: LambdaFunction, payload: bytes):
        """Run one invocation; raises Throttled past a concurrency limit, before running."""
        with self.concurrency.lease(fn, lambda_backends[fn.account_id][fn.region].list_functions()):
            return self.runtime.invoke(fn, payload)

    def invoke_by_arn(self, function_arn: str, payload: bytes):
        return self.invoke_function(self.backend_lookup(function_arn), payload)


_service: LambdaService | None = None


def _invoke(self: LambdaResponse):
    """Replacement for LambdaResponse.invoke (the Invoke API)."""
    fn = self.backend.get_function(unquote(self.path.rsplit("/", 2)[-2]), self._get_param("qualifier"))  # or AWS's 404
    payload = self.body if isinstance(self.body, bytes) else (self.body or "").encode()
    try:
        json.loads(payload or b"{}")
    except ValueError as exc:  # Invoke API reference: "The request body could not be parsed as JSON"
        message = f"Could not parse request body into json: Could not parse payload into json: {exc}"
        raise LambdaClientError("InvalidRequestContentException", message) from exc
    headers = {"content-type": "application/json", "X-Amz-Executed-Version": "$LATEST"}
    invocation_type = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
    if invocation_type == "DryRun":
        return 204, {**headers, "status": "204"}, ""
    if invocation_type == "Event":
        config = fn.event_invoke_config[-1].config if fn.event_invoke_config else {}  # moto appends; the last wins
        event = QueuedEvent(fn.function_arn, payload, config, (fn.idemlab_dead_letter_config or {}).get("TargetArn"))
        _service.invoker.submit(event)
        return 202, {**headers, "status": "202", REQUEST_ID: event.request_id}, ""
    try:
        result = _service.invoke_function(fn, payload)
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
            "CodeSizeUnzipped": 262144000,
            "CodeSizeZipped": 52428800,
            "ConcurrentExecutions": _service.concurrency.limit,
            "UnreservedConcurrentExecutions": _service.concurrency.unreserved(functions),
        },
        "AccountUsage": {"TotalCodeSize": code_size, "FunctionCount": len(functions)},
    }
    return 200, {"content-type": "application/json"}, json.dumps(document)


def install(service: LambdaService, lookup) -> None:
    """Patch moto in this process; call once, before the server starts."""
    from moto.awslambda import urls

    global _service
    _service = service
    service.backend_lookup = lookup
    replace_once(LambdaResponse, "invoke", _invoke)
    urls.url_paths.setdefault(r"{0}/(?P<api_version>[^/]+)/account-settings/?$", LambdaResponse.dispatch)
    LambdaResponse.get_account_settings = _get_account_settings
    LambdaFunction.idemlab_dead_letter_config = None  # moto drops DeadLetterConfig: kept, and described back

    @wrap(LambdaBackend, "create_function")
    def create_function(original, self, spec):
        fn = original(self, spec)
        fn.idemlab_dead_letter_config = spec.get("DeadLetterConfig")
        return fn

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
