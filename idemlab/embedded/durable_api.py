"""Lambda durable functions on the embedded backend, on AWS's own local engine.

AWS ships the engine of durable executions for local testing: the PyPI package
`aws-durable-execution-sdk-python-testing` (the `durable` extra), whose `WebRunner` keeps
executions, takes checkpoints and replays a handler by invoking it through Lambda's Invoke
API. This module runs that runner beside moto, in this process, on a loopback port of its
own, and joins the two:

- the durable execution API (`/2025-12-01/durable-executions/...`, and
  `/2025-12-01/functions/{name}/durable-executions`), which the durable SDK inside a
  function calls to checkpoint and to read its state, is passed to the runner as it came
  (`forward`): every checkpoint, state read, history and stop is the runner's code;
- the runner invokes the handler through this server's Invoke, marked with its header
  (`X-Dex-Handler-Invoke`), so each replay runs in a real worker process with the
  function's timeout (`lambda_runtime.py`): a crash is a worker stopped, as on Lambda;
- a caller's Invoke of a durable function (one created with `DurableConfig`, which moto
  drops: `lambda_api.py` keeps it) starts an execution at the runner instead of running the handler.

What the runner does not serve is Lambda's own front door: it starts a new execution for
every start it is sent. The execution name as an idempotency key is Lambda's rule, written
here (`Starts`), from the Lambda developer guide's page "Idempotency"
(lambda/latest/dg/durable-execution-idempotency.html): no name, a new execution; a name
never used, a new execution; the name of an execution with an identical payload, that
execution, and no new one; the name of one with another payload,
`DurableExecutionAlreadyStartedException`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass

from moto.awslambda.models import LambdaFunction
from moto.awslambda.responses import LambdaResponse

from idemlab.clients import EMULATOR_KEYS

try:  # the `durable` extra; without it (the take-home plugin) no function is durable here
    from aws_durable_execution_sdk_python_testing.invoker import INVOCATION_MARKER_HEADER
    from aws_durable_execution_sdk_python_testing.runner import WebRunner, WebRunnerConfig
    from aws_durable_execution_sdk_python_testing.web.server import WebServiceConfig
except ImportError:  # pragma: no cover - exercised where the extra is absent
    WebRunner = None
    INVOCATION_MARKER_HEADER = "X-Dex-Handler-Invoke"

API_PREFIX = "/2025-12-01/"
DURABLE_ARN_HEADER = "X-Amz-Durable-Execution-Arn"  # Invoke's DurableExecutionArn (botocore's model)
NAME_HEADER = "X-Amz-Durable-Execution-Name"  # Invoke's DurableExecutionName
# What the runner is told when a function's DurableConfig leaves a field out: the values its
# own command line starts an execution with (`invoke`: 300 s, 7 days). The lab's functions set both.
DEFAULT_EXECUTION_TIMEOUT_SECONDS = 300
DEFAULT_RETENTION_DAYS = 7
# A synchronous Invoke of a durable function waits for the whole execution, at most 15 minutes
# (Lambda developer guide, "Invoking durable Lambda functions"). Polled this often.
SYNC_LIMIT_SECONDS = 900
POLL_SECONDS = 0.1


def available() -> bool:
    return WebRunner is not None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServiceError(Exception):
    """An error Lambda answers with its own code and status."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code = code
        self.status = status

    def response(self):
        body = json.dumps({"Type": "User", "message": str(self), "Message": str(self)})
        headers = {"content-type": "application/json", "x-amzn-ErrorType": self.code, "status": str(self.status)}
        return self.status, headers, body


@dataclass
class Started:
    """One execution this front door started: what a later start under its name is compared with."""

    arn: str
    payload: bytes


class Starts:
    """Lambda's start rule for names (the module docstring), one lock for all: a start and
    a repeat of it racing must not both start an execution."""

    def __init__(self):
        self._lock = threading.Lock()
        # The exception's own text ("Each durable execution name must be unique within the
        # function") scopes a name to the function: keyed by its ARN and the name.
        self._by_name: dict[tuple[str, str], Started] = {}

    def start(self, function_arn: str, name: str | None, payload: bytes, begin) -> tuple[str, bool]:
        """The execution's ARN and whether this call started it; ``begin(name)`` starts one."""
        if not name:
            return begin(f"execution-{uuid.uuid4()}"), True
        with self._lock:
            known = self._by_name.get((function_arn, name))
            if known is not None:
                if _same_payload(known.payload, payload):
                    return known.arn, False
                raise ServiceError(
                    "DurableExecutionAlreadyStartedException",
                    f"Durable execution with name {name} already exists with a different payload",
                    status=409,
                )
            arn = begin(name)
            self._by_name[(function_arn, name)] = Started(arn, payload)
            return arn, True


def _same_payload(first: bytes, second: bytes) -> bool:
    try:
        return json.loads(first or b"{}") == json.loads(second or b"{}")
    except ValueError:
        return first == second


class DurableService:
    """AWS's WebRunner on a loopback port, its Lambda endpoint this server."""

    def __init__(self, endpoint_url: str, region: str):
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.region = region
        config = WebRunnerConfig(
            # WARNING: the runner configures this process's root logger at this level, and at INFO
            # it would log every checkpoint into the backend's log.
            web_service=WebServiceConfig(host="127.0.0.1", port=port, log_level=logging.WARNING),
            lambda_endpoint=endpoint_url,
            local_runner_endpoint=self.url,
            local_runner_region=region,
            # Each handler invocation is bounded by the function's own timeout, which the
            # embedded runtime enforces (a stopped worker is a failed invocation, retried by
            # the runner); the runner's own bound only has to outlast it.
            invocation_timeout_seconds=SYNC_LIMIT_SECONDS,
            # A durable wait (and a step's retry delay) ends at the runner's next turn instead
            # of on the wall clock: a 30-day `context.wait` takes seconds here, while the
            # execution's history keeps the wait's real duration. What Lambda does in days, the
            # embedded backend only simulates; the runner's own option (WebRunnerConfig.skip_time).
            skip_time=True,
        )
        self.runner = WebRunner(config)
        self.runner.start()
        self.thread = threading.Thread(target=self.runner.serve_forever, name="durable-runner", daemon=True)
        self.thread.start()
        self.starts = Starts()

    def stop(self) -> None:
        self.runner.stop()

    def call(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        """One request to the runner: (status, headers, body)."""
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=SYNC_LIMIT_SECONDS + 60) as answer:
                return answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def begin(self, fn: LambdaFunction, name: str, payload: bytes) -> str:
        config = fn.idemlab_durable_config or {}
        start = {
            "AccountId": fn.account_id,
            "FunctionName": fn.function_name,
            "FunctionQualifier": "$LATEST",
            "ExecutionName": name,
            "ExecutionTimeoutSeconds": config.get("ExecutionTimeout", DEFAULT_EXECUTION_TIMEOUT_SECONDS),
            "ExecutionRetentionPeriodDays": config.get("RetentionPeriodInDays", DEFAULT_RETENTION_DAYS),
            "InvocationId": str(uuid.uuid4()),
            "Input": (payload or b"{}").decode(),
        }
        status, _, body = self.call(
            "POST", "/start-durable-execution", json.dumps(start).encode(), {"Content-Type": "application/json"}
        )
        if status not in (200, 201):  # the runner answers a start 201 Created
            raise ServiceError("ServiceException", f"the durable runner refused the start: {body[:300]!r}", 500)
        return json.loads(body)["ExecutionArn"]

    def outcome(self, arn: str, deadline: float) -> dict:
        """GetDurableExecution once the execution has closed (or the deadline passed)."""
        path = f"{API_PREFIX}durable-executions/{urllib.parse.quote(arn, safe='')}"
        while True:
            _, _, body = self.call("GET", path)
            document = json.loads(body or b"{}")
            if document.get("Status") != "RUNNING" or time.monotonic() > deadline:
                return document
            time.sleep(POLL_SECONDS)


_service: DurableService | None = None


def durable_invoke(original):
    """Invoke: a caller's invocation of a durable function starts (or finds) an execution."""

    def invoke(self: LambdaResponse):
        marked = self.headers.get(INVOCATION_MARKER_HEADER) == "true"
        if _service is None or marked:
            return original(self)
        name = urllib.parse.unquote(self.path.rsplit("/", 2)[-2])
        fn = self.backend.get_function(name, self._get_param("qualifier"))
        if not fn.idemlab_durable_config:
            return original(self)
        payload = self.body if isinstance(self.body, bytes) else (self.body or "").encode()
        invocation_type = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
        try:
            arn, _ = _service.starts.start(
                fn.function_arn,
                self.headers.get(NAME_HEADER),
                payload,
                lambda execution_name: _service.begin(fn, execution_name, payload),
            )
        except ServiceError as error:
            return error.response()
        headers = {"content-type": "application/json", DURABLE_ARN_HEADER: arn, "X-Amz-Executed-Version": "$LATEST"}
        if invocation_type == "Event":
            return 202, {**headers, "status": "202"}, ""
        document = _service.outcome(arn, time.monotonic() + SYNC_LIMIT_SECONDS)
        if document.get("Status") == "SUCCEEDED":
            return 200, headers, document.get("Result") or "null"
        error = document.get("Error") or {}
        failure = {
            "errorType": error.get("ErrorType", document.get("Status", "Unknown")),
            "errorMessage": error.get("ErrorMessage", f"durable execution ended {document.get('Status')}"),
        }
        return 200, {**headers, "X-Amz-Function-Error": "Unhandled"}, json.dumps(failure)

    return invoke


def event_source_invoke(invoke_by_arn):
    """What an event source mapping calls to invoke a function (``invoke_by_arn(arn, payload)``).

    A durable function is invoked synchronously, and the mapping waits for the whole
    execution; each invocation, retries included, starts a new execution, since a mapping
    gives no execution name (Lambda developer guide: durable-invoking-esm,
    durable-execution-idempotency)."""
    from moto.awslambda.models import lambda_backends

    from idemlab.embedded.lambda_runtime import InvokeResult

    def invoke(function_arn: str, payload: bytes):
        _, _, _, region, account, _ = function_arn.split(":", 5)
        fn = lambda_backends[account][region].get_function(function_arn)
        if _service is None or not fn.idemlab_durable_config:
            return invoke_by_arn(function_arn, payload)
        arn, _ = _service.starts.start(fn.function_arn, None, payload, lambda name: _service.begin(fn, name, payload))
        document = _service.outcome(arn, time.monotonic() + SYNC_LIMIT_SECONDS)
        if document.get("Status") == "SUCCEEDED":
            return InvokeResult((document.get("Result") or "null").encode())
        error = document.get("Error") or {}
        failure = {"errorType": error.get("ErrorType", "Unknown"), "errorMessage": error.get("ErrorMessage", "")}
        return InvokeResult(json.dumps(failure).encode(), "Unhandled")

    return invoke


def routes(app):
    """WSGI middleware: the durable execution API goes to the runner unchanged."""

    def route(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if _service is None or not path.startswith(API_PREFIX):
            return app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else None
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or urllib.parse.quote(path)
        query = environ.get("QUERY_STRING")
        target = raw if "?" in raw or not query else f"{raw}?{query}"
        headers = {"Content-Type": environ.get("CONTENT_TYPE") or "application/json"}
        status, answer_headers, answer = _service.call(environ["REQUEST_METHOD"], target, body, headers)
        kept = [(k, v) for k, v in answer_headers.items() if k.lower() in ("content-type", "x-amzn-errortype")]
        start_response(f"{status} {'OK' if status < 400 else 'Error'}", [*kept, ("Content-Length", str(len(answer)))])
        return [answer]

    return route


def install(endpoint_url: str, region: str) -> DurableService | None:
    """Start the runner and replace moto's Invoke in this process; call once, after
    `lambda_api.install` (whose Invoke it wraps) and before the fast path caches methods.
    Without the `durable` extra, nothing changes and None is returned."""
    global _service
    if not available():
        return None
    # The runner invokes handlers with boto3 clients of its own, made from the default
    # credential chain (its `invoker.create_lambda_client`), in this process: a learner's
    # shell that started `make up` has no AWS keys, and every replay failed with "Unable to
    # locate credentials". This server accepts any key; the dummy ones fill in where unset.
    for variable, value in EMULATOR_KEYS.items():
        if not os.environ.get(variable):
            os.environ[variable] = value
    _service = DurableService(endpoint_url, region)

    LambdaResponse.invoke = durable_invoke(LambdaResponse.invoke)
    return _service
