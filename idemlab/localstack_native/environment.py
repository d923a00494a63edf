"""One Lambda execution environment for native LocalStack: the job LocalStack's Go init
does inside a function's container, done by a local process.

LocalStack runs this file (with the Python of the function's runtime, so it imports nothing
outside the standard library) once per execution environment. It serves two HTTP APIs on
loopback and runs the handler in a child process:

- the executor side, which LocalStack speaks: LocalStack POSTs ``/invoke`` here, and this
  process reports back to LocalStack's executor endpoint (``status/<id>/ready`` or
  ``/error`` once, then ``invocations/<request id>/logs`` and ``/response`` or ``/error``
  per invocation), as ``services/lambda_/invocation/executor_endpoint.py`` of LocalStack
  4.14.0 expects;
- the Lambda Runtime API (``/2018-06-01/runtime/...``), which AWS's own runtime interface
  client (``python -m awslambdaric``, the runtime of AWS's python3.12 and later images)
  polls from the child process: so events, context, error documents and their stack
  traces are made by AWS's code, not ours.

What this process adds is what the Go init adds on AWS and in LocalStack: the function's
timeout (the child is killed and an ``Sandbox.Timedout`` error reported), a child that
exits mid-invocation (``Runtime.ExitError``), the START / END / REPORT log lines, and a
fresh runtime after either (the next invocation initialises it again, as Lambda does).

The first line this process prints is ``{"invoke_port": N}``: the port of its executor
side, chosen by the system, so no two environments race for one.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOOPBACK = "127.0.0.1"
RUNTIME_API_PREFIX = "/2018-06-01/runtime"
# LocalStack's endpoint answers at once; a callback that takes longer is a LocalStack in trouble.
CALLBACK_TIMEOUT_SECONDS = 30
# Never proxy a loopback callback, whatever HTTP_PROXY says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def log(message: str) -> None:
    """A line of this environment's own log (LocalStack shows it with the environment's)."""
    print(f"[environment] {message}", file=sys.stderr, flush=True)


def error_document(error_type: str, message: str) -> bytes:
    return json.dumps({"errorType": error_type, "errorMessage": message}).encode()


class Invocation:
    """The one invocation in flight: its request, its deadline, and the log lines it wrote."""

    def __init__(self, document: dict, timeout_seconds: int):
        self.request_id = document["invoke-id"]
        self.payload = document.get("payload", "").encode()
        self.function_arn = document.get("invoked-function-arn", "")
        self.trace_id = document.get("trace-id", "")
        self.started = time.monotonic()
        self.deadline_ms = int(time.time() * 1000) + timeout_seconds * 1000
        self.done = threading.Event()


class Environment:
    def __init__(self, environ: dict[str, str]):
        self.callback_base = environ["LOCALSTACK_RUNTIME_ENDPOINT"]
        self.runtime_id = environ["LOCALSTACK_RUNTIME_ID"]
        self.timeout_seconds = int(environ.get("AWS_LAMBDA_FUNCTION_TIMEOUT", "3"))
        self.memory_mb = environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.version = environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.handler = environ.get("_HANDLER", "")
        self.task_root = environ["LAMBDA_TASK_ROOT"]
        self.python = environ["IDEMLAB_RUNTIME_PYTHON"]
        self.runtime_name = environ.get("IDEMLAB_RUNTIME", "python3")
        self.environ = environ
        self.lock = threading.Lock()
        self.events: queue.Queue[Invocation | None] = queue.Queue()
        self.current: Invocation | None = None
        self.ready_reported = False
        self.runtime: subprocess.Popen | None = None
        self.log_lines: list[str] = []
        self.runtime_api = ThreadingHTTPServer((LOOPBACK, 0), self._handler_class(self._runtime_api))
        self.executor_api = ThreadingHTTPServer((LOOPBACK, 0), self._handler_class(self._executor_api))
        for server in (self.runtime_api, self.executor_api):
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()

    # The child process running AWS's runtime interface client.

    def start_runtime(self) -> None:
        env = {
            **self.environ,
            "AWS_LAMBDA_RUNTIME_API": f"{LOOPBACK}:{self.runtime_api.server_address[1]}",
            # As the runtime's own bootstrap sets it on AWS (LocalStack passes its placeholder).
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{self.runtime_name}",
            # The function's own modules (and what its zip bundles) come first, as /var/task does on AWS.
            "PYTHONPATH": self.task_root,
        }
        for name in ("IDEMLAB_RUNTIME_PYTHON", "IDEMLAB_RUNTIME", "LOCALSTACK_RUNTIME_ENDPOINT"):
            env.pop(name, None)
        # A queue per runtime: a killed runtime's last poll must not take the next event.
        self.events = queue.Queue()
        runtime = subprocess.Popen(
            [self.python, "-m", "awslambdaric", self.handler],
            cwd=self.task_root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout kills whatever it started
        )
        self.runtime = runtime
        threading.Thread(target=self._read_output, args=(runtime,), daemon=True).start()
        threading.Thread(target=self._watch_exit, args=(runtime,), daemon=True).start()

    def _read_output(self, runtime: subprocess.Popen) -> None:
        for raw in runtime.stdout:
            line = raw.decode(errors="replace")
            sys.stderr.write(line)
            with self.lock:
                self.log_lines.append(line)

    def _watch_exit(self, runtime: subprocess.Popen) -> None:
        code = runtime.wait()
        with self.lock:
            if self.runtime is not runtime:  # killed on purpose, and already replaced or reported
                return
            self.runtime = None
            invocation = self.current
            ready = self.ready_reported
        if code >= 0:
            message = f"Runtime exited with error: exit status {code}"
        else:  # as the Go init words a signal
            message = f"Runtime exited with error: signal: {signal.Signals(-code).name.lower()}"
        if not ready:
            self.report_status("error", error_document("Runtime.ExitError", message))
        elif invocation is not None:
            self.finish(
                invocation,
                error_document("Runtime.ExitError", f"RequestId: {invocation.request_id} Error: {message}"),
                error=True,
            )

    def kill_runtime(self) -> None:
        with self.lock:
            runtime = self.runtime
            self.runtime = None
        self.events.put(None)  # frees the killed runtime's pending poll, if any
        if runtime is not None and runtime.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(runtime.pid, signal.SIGKILL)
            runtime.wait()

    # Callbacks to LocalStack's executor endpoint.

    def post(self, path: str, body: bytes) -> None:
        request = urllib.request.Request(self.callback_base + path, data=body, method="POST")
        request.add_header("Content-Type", "application/json")
        try:
            with _OPENER.open(request, timeout=CALLBACK_TIMEOUT_SECONDS) as response:
                response.read()
        except OSError as exc:  # LocalStack gone or this environment no longer registered
            log(f"callback {path} failed: {exc}")

    def report_status(self, status: str, body: bytes = b"{}") -> None:
        with self.lock:
            if self.ready_reported:
                return
            self.ready_reported = True
        self.post(f"/status/{self.runtime_id}/{status}", body)

    def finish(self, invocation: Invocation, body: bytes, error: bool) -> None:
        """Report an invocation's logs, then its result; once, whoever gets here first."""
        with self.lock:
            if invocation.done.is_set():
                return
            invocation.done.set()
            if self.current is invocation:
                self.current = None
            lines = self.log_lines
            self.log_lines = []
        elapsed_ms = (time.monotonic() - invocation.started) * 1000
        request_id = invocation.request_id
        logs = (
            f"START RequestId: {request_id} Version: {self.version}\n"
            + "".join(lines)
            + f"END RequestId: {request_id}\n"
            + f"REPORT RequestId: {request_id}\tDuration: {elapsed_ms:.2f} ms\t"
            + f"Billed Duration: {max(1, round(elapsed_ms))} ms\tMemory Size: {self.memory_mb} MB\n"
        )
        self.post(f"/invocations/{request_id}/logs", json.dumps({"logs": logs}).encode())
        self.post(f"/invocations/{request_id}/{'error' if error else 'response'}", body)

    # The two APIs.

    def invoke(self, document: dict) -> None:
        invocation = Invocation(document, self.timeout_seconds)
        with self.lock:
            self.current = invocation
            needs_runtime = self.runtime is None
            self.log_lines = []
        if needs_runtime:  # the last one timed out or exited: Lambda initialises a fresh one
            self.start_runtime()
        self.events.put(invocation)
        timer = threading.Timer(self.timeout_seconds, self.time_out, args=(invocation,))
        timer.daemon = True
        timer.start()

    def time_out(self, invocation: Invocation) -> None:
        if invocation.done.is_set():
            return
        self.kill_runtime()
        message = f"RequestId: {invocation.request_id} Error: Task timed out after {self.timeout_seconds:.2f} seconds"
        self.finish(invocation, error_document("Sandbox.Timedout", message), error=True)

    def _runtime_api(self, method: str, path: str, body: bytes) -> tuple[int, dict, bytes]:
        if method == "GET" and path == f"{RUNTIME_API_PREFIX}/invocation/next":
            self.report_status("ready")  # the first poll: initialisation is over
            invocation = self.events.get()
            if invocation is None:  # this runtime was killed while it waited
                return HTTPStatus.GONE, {}, b""
            headers = {
                "Lambda-Runtime-Aws-Request-Id": invocation.request_id,
                "Lambda-Runtime-Deadline-Ms": str(invocation.deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": invocation.function_arn,
                "Lambda-Runtime-Trace-Id": invocation.trace_id,
                "Content-Type": "application/json",
            }
            return HTTPStatus.OK, headers, invocation.payload
        if method == "POST" and path == f"{RUNTIME_API_PREFIX}/init/error":
            with self.lock:
                invocation = self.current
                ready = self.ready_reported
            if not ready:
                self.report_status("error", body)
            elif invocation is not None:  # a fresh runtime failed its init during an invocation
                self.finish(invocation, body, error=True)
            return HTTPStatus.ACCEPTED, {}, b'{"status":"OK"}'
        parts = path.removeprefix(f"{RUNTIME_API_PREFIX}/invocation/").split("/")
        if method == "POST" and len(parts) == 2 and parts[1] in ("response", "error"):
            with self.lock:
                invocation = self.current
            if invocation is None or invocation.request_id != parts[0]:
                return HTTPStatus.BAD_REQUEST, {}, error_document("InvalidRequestID", "Invalid request ID")
            self.finish(invocation, body, error=parts[1] == "error")
            return HTTPStatus.ACCEPTED, {}, b'{"status":"OK"}'
        return HTTPStatus.NOT_FOUND, {}, error_document("NotFound", f"{method} {path}")

    def _executor_api(self, method: str, path: str, body: bytes) -> tuple[int, dict, bytes]:
        if method == "POST" and path == "/invoke":
            self.invoke(json.loads(body))
            return HTTPStatus.OK, {}, b""
        return HTTPStatus.NOT_FOUND, {}, b""

    @staticmethod
    def _handler_class(route):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the runtime client's curl expects

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, headers, answer = route(self.command, self.path, body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args) -> None:  # one line per request is noise here
                pass

        return Handler


def main() -> None:
    environment = Environment(dict(os.environ))

    def stop(signum, frame) -> None:
        environment.kill_runtime()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    parent = os.getppid()

    def stop_when_orphaned() -> None:
        """LocalStack stops its environments; one killed outright cannot, so each ends with it."""
        while os.getppid() == parent:
            time.sleep(1)
        stop(None, None)

    threading.Thread(target=stop_when_orphaned, daemon=True).start()
    environment.start_runtime()
    print(json.dumps({"invoke_port": environment.executor_api.server_address[1]}), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
