"""One Lambda execution environment: a process that imports a handler once and then
serves invocations one at a time, as the Python runtime does.

The parent (lambda_runtime.py) speaks newline-delimited JSON with it: requests on
stdin, replies on the process's original stdout. The handler's own prints and logs
go to stderr, so nothing a learner prints can corrupt the protocol.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback


class LambdaContext:
    """The attributes and method of the context object the Python runtime passes."""

    function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME")  # this process's environment is the function's
    function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
    invoked_function_arn = os.environ.get("IDEMLAB_FUNCTION_ARN")
    memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
    log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
    log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
    identity = client_context = None

    def __init__(self, request_id: str, deadline_ms: int):
        self.aws_request_id = request_id
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def fault(error_type: str, message: str, request_id: str = "", stack_trace: list[str] | None = None) -> dict:
    """The error document the Python runtime sends: these four keys, in this order (requestId
    empty during init: the runtime reports an init error outside any invocation)."""
    return {"errorMessage": message, "errorType": error_type, "requestId": request_id, "stackTrace": stack_trace or []}


# Where Lambda puts the function's code: its frames name files there ("/var/task/app.py" in
# the stackTrace AWS answered in the recordings of LocalStack's test_lambda.py, v4.14.0).
TASK_ROOT = "/var/task"


def task_path(text: str) -> str:
    """`text` with this environment's code directory named as Lambda names it."""
    return text.replace(os.environ.get("LAMBDA_TASK_ROOT", TASK_ROOT).rstrip("/") + "/", TASK_ROOT + "/")


def exception_fault(exc: BaseException, request_id: str = "") -> dict:
    # The first frame is this runtime's own; Lambda shows the frames after it.
    frames = [task_path(frame) for frame in traceback.format_tb(exc.__traceback__.tb_next)]
    return fault(type(exc).__name__, str(exc), request_id, frames)


def load_handler():
    """Import the handler as the Python runtime does (awslambdaric's bootstrap._get_handler);
    the init error's document instead when it cannot.

    Only an ImportError becomes Runtime.ImportModuleError, and a SyntaxError
    Runtime.UserCodeSyntaxError. Any other exception raised while the module loads is
    reported as itself: its own class name and message (python3.12 and later, whose
    runtime is that client; AWS answered errorType "Exception" for a module that raises
    Exception, in the recordings of LocalStack's test_lambda_runtime_error).
    """
    handler = os.environ["_HANDLER"]
    module_name, dot, function_name = handler.rpartition(".")
    if not dot or not module_name:
        message = f"Bad handler '{handler}': not enough values to unpack (expected 2, got 1)"
        return fault("Runtime.MalformedHandlerName", message)
    sys.path.insert(0, os.environ["LAMBDA_TASK_ROOT"])
    if module_name.split(".")[0] in sys.builtin_module_names:
        return fault("Runtime.BuiltInModuleConflict", f"Cannot use built-in module {module_name} as a handler module")
    try:
        module = importlib.import_module(module_name.replace("/", "."))
    except ImportError as exc:
        return fault("Runtime.ImportModuleError", f"Unable to import module '{module_name}': {exc}")
    except SyntaxError as exc:
        trace = [f'  File "{task_path(exc.filename or "")}" Line {exc.lineno}\n    {exc.text}']
        return fault("Runtime.UserCodeSyntaxError", f"Syntax error in module '{module_name}': {exc}", stack_trace=trace)
    except Exception as exc:  # raised by the module's own top-level code
        return exception_fault(exc)
    handler = getattr(module, function_name, None)
    if handler is None:
        return fault("Runtime.HandlerNotFound", f"Handler '{function_name}' missing on module '{module_name}'")
    return handler


def serve() -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)  # flushed at each line's end
    os.dup2(2, 1)  # the handler's stdout joins stderr, the backend's log

    def reply(kind: str, document=None) -> None:
        """One line: ["ready", "null"], or "result" or "error" with its payload as JSON text."""
        protocol.write(json.dumps([kind, json.dumps(document)]) + "\n")

    handler = load_handler()
    if isinstance(handler, dict):  # the environment is unusable: report and end
        return reply("error", handler)
    reply("ready")
    for line in sys.stdin:
        request = json.loads(line)
        request_id = request["request_id"]
        try:
            result = handler(json.loads(request["payload"]), LambdaContext(request_id, request["deadline_ms"]))
        except Exception as exc:  # a handler error is data for the caller, not a crash
            reply("error", exception_fault(exc, request_id))
            continue
        try:
            reply("result", result)
        except (TypeError, ValueError) as exc:
            reply("error", fault("Runtime.MarshalError", f"Unable to marshal response: {exc}", request_id))


if __name__ == "__main__":
    serve()
