"""Run Lambda handlers for real: one worker process per execution environment.

What the lessons rely on, and what this module guarantees:
- a handler runs from the function's own uploaded zip, with its handler, environment
  variables and timeout;
- a warm environment is reused for the next request, so module state persists within
  an environment and never leaks across environments;
- concurrent invocations run in parallel, each in its own environment;
- a timeout kills the worker (its in-flight work stops mid-way, as on AWS);
- a worker that dies mid-invoke is reported as Runtime.ExitError.
"""

from __future__ import annotations

import io
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from idemlab.embedded.patching import every

# Lambda gives a handler 10 s to initialise; importing boto3 and Powertools on a busy
# 2-core machine with many cold starts at once can take longer, so be generous.
INIT_TIMEOUT_SECONDS = 30
# Idle environments are reclaimed after this long, as Lambda does (its exact timing
# is unpublished; minutes is the commonly observed order), by a timer: a learner who
# stops invoking gets the processes back.
IDLE_SECONDS = float(os.environ.get("IDEMLAB_LAMBDA_IDLE_SECONDS", "300"))
# Environments kept warm per function version; more may run at once, the surplus is
# stopped when it finishes.
MAX_IDLE_PER_VERSION = 32

# Host variables a Python process needs to start; nothing else of the host leaks in.
_HOST_VARIABLES = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "SYSTEMROOT")


@dataclass(frozen=True)
class FunctionVersion:
    """Everything that defines an execution environment; a change means new ones."""

    arn: str
    name: str
    handler: str
    timeout: int
    memory_size: int
    code_sha256: str
    environment: tuple[tuple[str, str], ...]
    region: str

    @classmethod
    def from_moto(cls, fn) -> "FunctionVersion":
        return cls(
            arn=fn.function_arn,
            name=fn.function_name,
            handler=fn.handler or "",
            timeout=int(fn.timeout or 3),
            memory_size=int(fn.memory_size or 128),
            code_sha256=fn.code_sha_256,
            environment=tuple(sorted((fn.environment_vars or {}).items())),
            region=fn.region,
        )


@dataclass
class InvokeResult:
    payload: bytes
    function_error: str | None = None  # "Unhandled" when the payload is an error
    request_id: str | None = None


def lambda_error(error_type: str, message: str) -> bytes:
    return json.dumps({"errorType": error_type, "errorMessage": message}).encode()


def exit_error(request_id: str, code: int) -> bytes:
    """Lambda's report of a runtime process that ended.

    The wording AWS answered in the recordings of LocalStack's test_lambda_handler_exit
    (sys.exit(0): no reason) and test_lambda_runtime_wrapper_not_found (exit status 127).
    """
    reason = "Runtime exited without providing a reason" if code == 0 else f"Runtime exited with error: exit status {code}"
    return lambda_error("Runtime.ExitError", f"RequestId: {request_id} Error: {reason}")


@dataclass(eq=False)
class ExecutionEnvironment:
    version: FunctionVersion
    process: subprocess.Popen
    replies: "queue.Queue[dict | None]" = field(default_factory=queue.Queue)
    last_used: float = field(default_factory=time.monotonic)

    @classmethod
    def spawn(cls, version: FunctionVersion, code_dir: Path, endpoint_url: str) -> "ExecutionEnvironment":
        env = {
            **{k: os.environ[k] for k in _HOST_VARIABLES if k in os.environ},
            "AWS_ENDPOINT_URL": endpoint_url,  # as LocalStack does: boto3 in a handler finds us
            **dict(version.environment),
            "_HANDLER": version.handler,
            "LAMBDA_TASK_ROOT": str(code_dir),
            "AWS_LAMBDA_FUNCTION_NAME": version.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(version.memory_size),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{version.name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": uuid.uuid4().hex,
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3",
            "AWS_REGION": version.region,
            "AWS_DEFAULT_REGION": version.region,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "IDEMLAB_FUNCTION_ARN": version.arn,
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        worker = [sys.executable, "-m", "idemlab.embedded.lambda_worker"]
        pipe = subprocess.PIPE
        process = subprocess.Popen(worker, stdin=pipe, stdout=pipe, cwd=code_dir, env=env, text=True)
        environment = cls(version=version, process=process)
        threading.Thread(target=environment._read_replies, daemon=True).start()
        return environment

    def _read_replies(self) -> None:
        for line in self.process.stdout:
            self.replies.put(json.loads(line))
        self.replies.put(None)  # end of file: the worker is gone

    def wait_ready(self, request_id: str) -> InvokeResult | None:
        """None when the handler is loaded; else the init error to return."""
        try:
            message = self.replies.get(timeout=INIT_TIMEOUT_SECONDS)
        except queue.Empty:
            message = {"init_error": {"errorType": "Runtime.InitTimeout", "errorMessage": "Init timed out"}}
        if message is None:
            return InvokeResult(exit_error(request_id, self.process.wait()), "Unhandled")
        if "init_error" in message:
            self.kill()
            return InvokeResult(json.dumps(message["init_error"]).encode(), "Unhandled")
        return None

    def invoke(self, payload: bytes, request_id: str) -> InvokeResult:
        """Run one invocation; a timeout or a worker that died leaves the environment dead."""
        timeout = self.version.timeout
        deadline_ms = int(time.time() * 1000) + timeout * 1000
        request = {"request_id": request_id, "payload": payload.decode() or "{}", "deadline_ms": deadline_ms}
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            reply = self.replies.get(timeout=timeout)
        except (BrokenPipeError, OSError):
            reply = None
        except queue.Empty:
            self.kill()
            message = f"RequestId: {request_id} Error: Task timed out after {timeout:.2f} seconds"
            reply = {"error": {"errorType": "Sandbox.Timedout", "errorMessage": message}}
        finally:
            self.last_used = time.monotonic()
        if reply is None:
            return InvokeResult(exit_error(request_id, self.process.wait()), "Unhandled")
        if "error" in reply:
            return InvokeResult(json.dumps(reply["error"]).encode(), "Unhandled")
        return InvokeResult(reply["result"].encode())

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()


class LambdaRuntime:
    """Pools of execution environments, one pool per function version."""

    def __init__(self, endpoint_url: str, work_dir: Path):
        self.endpoint_url = endpoint_url
        self.work_dir = Path(work_dir)
        self._idle: dict[FunctionVersion, list[ExecutionEnvironment]] = {}
        self._all: dict[int, ExecutionEnvironment] = {}
        self._lock = threading.Lock()
        self._code_lock = threading.Lock()
        self._stopped = every(min(30.0, max(0.2, IDLE_SECONDS / 4)), self._reap_idle, "lambda reaper")

    def invoke(self, version: FunctionVersion, code_zip: bytes, payload: bytes) -> InvokeResult:
        request_id = str(uuid.uuid4())
        result = environment = self._acquire(version, code_zip, request_id)
        if isinstance(environment, ExecutionEnvironment):
            result = environment.invoke(payload, request_id)
            self._release(environment)
        result.request_id = request_id
        return result

    def environments(self) -> list[int]:
        """PIDs of live environments (for tests and the notebooks)."""
        with self._lock:
            return [pid for pid, env in self._all.items() if env.alive()]

    def shutdown(self) -> None:
        self._stopped.set()
        with self._lock:
            environments = list(self._all.values())
            self._all.clear()
            self._idle.clear()
        for environment in environments:
            environment.kill()
        shutil.rmtree(self.work_dir / "code", ignore_errors=True)

    def _acquire(self, version: FunctionVersion, code_zip: bytes, request_id: str) -> ExecutionEnvironment | InvokeResult:
        self._reap_idle()
        with self._lock:
            pool = self._idle.setdefault(version, [])
            while pool:
                environment = pool.pop()
                if environment.alive():
                    return environment
                self._all.pop(environment.pid, None)
        code_dir = self._code_dir(version, code_zip)
        environment = ExecutionEnvironment.spawn(version, code_dir, self.endpoint_url)
        failure = environment.wait_ready(request_id)
        if failure is not None:
            return failure
        with self._lock:
            self._all[environment.pid] = environment
        return environment

    def _release(self, environment: ExecutionEnvironment) -> None:
        with self._lock:
            pool = self._idle.get(environment.version)
            if environment.alive() and pool is not None and len(pool) < MAX_IDLE_PER_VERSION:
                pool.append(environment)
                return
            self._all.pop(environment.pid, None)
        environment.kill()

    def _reap_idle(self) -> None:
        """Stop the environments idle for IDLE_SECONDS (those of replaced versions too), and dead ones."""
        now = time.monotonic()
        with self._lock:
            for pool in self._idle.values():
                stale = [e for e in pool if now - e.last_used >= IDLE_SECONDS or not e.alive()]
                pool[:] = [e for e in pool if e not in stale]
                for environment in stale:
                    self._all.pop(environment.pid, None)
                    environment.kill()

    def _code_dir(self, version: FunctionVersion, code_zip: bytes) -> Path:
        """The zip, extracted once per code hash (what Lambda calls /var/task)."""
        target = self.work_dir / "code" / version.code_sha256.replace("/", "_").replace("+", "-")
        with self._code_lock:
            if not target.exists():
                staging = target.with_name(target.name + ".tmp")
                shutil.rmtree(staging, ignore_errors=True)
                with zipfile.ZipFile(io.BytesIO(code_zip)) as archive:
                    archive.extractall(staging)
                staging.rename(target)
        return target
