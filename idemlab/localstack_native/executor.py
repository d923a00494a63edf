"""A Lambda runtime executor for LocalStack without Docker: each execution environment is a
local process (environment.py) instead of a container.

LocalStack 4.14.0 loads executors as plugins of the namespace
``localstack.lambda.runtime_executor`` and picks one with ``LAMBDA_RUNTIME_EXECUTOR``
(``services/lambda_/invocation/plugins.py`` and ``runtime_executor.py``); the lab's package
registers this one as ``process`` (pyproject.toml). Only the place where a handler runs
changes: the Lambda service, its queues, retries, destinations, event source mappings and
Step Functions' calls to Lambda all stay LocalStack's own, and reach the environment through
LocalStack's executor protocol (``executor_endpoint.py``), as its Docker executor's do.

This module runs inside LocalStack's process and imports LocalStack; nothing else of the
lab imports it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from localstack.services.lambda_.invocation.executor_endpoint import ExecutorEndpoint
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion
from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin
from localstack.services.lambda_.invocation.runtime_executor import LambdaRuntimeException, RuntimeExecutor

from localstack import config

ENVIRONMENT_SCRIPT = Path(__file__).with_name("environment.py")
LOOPBACK = "127.0.0.1"
# Set by the lab's launcher (idemlab/localstack_native/launcher.py): one virtualenv per
# Python runtime, each with AWS's runtime interface client and the SDK a Lambda runtime has.
RUNTIMES_DIR_VARIABLE = "IDEMLAB_LAMBDA_RUNTIMES"
# How long the environment may take to print its port: it imports only the standard library.
HANDSHAKE_SECONDS = 30
# What of the host's environment a function's process keeps: enough to start Python, and
# the loopback-only library every process of native LocalStack is started with.
HOST_VARIABLES = ("PATH", "LANG", "LC_ALL", "TMPDIR", "LD_PRELOAD", "JAVA_TOOL_OPTIONS")


def runtime_python(runtime: str) -> Path:
    """The interpreter of ``runtime`` (``python3.12``), or LambdaRuntimeException saying which exist."""
    runtimes = Path(os.environ.get(RUNTIMES_DIR_VARIABLE, ""))
    python = runtimes / runtime / "bin" / "python"
    if python.exists():
        return python
    available = sorted(path.name for path in runtimes.glob("*") if (path / "bin" / "python").exists())
    raise LambdaRuntimeException(
        f"runtime {runtime!r} is not available to native LocalStack (prepared: {', '.join(available) or 'none'}); "
        "only the Python runtimes whose interpreter this machine has can run"
    )


class ProcessRuntimeExecutor(RuntimeExecutor):
    """One execution environment as one local process, speaking LocalStack's executor protocol."""

    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self.executor_endpoint = ExecutorEndpoint(self.id, container_address=LOOPBACK)
        self.process: subprocess.Popen | None = None
        self.log_file = Path(tempfile.gettempdir()) / f"lambda-environment-{self.id}.log"

    def start(self, env_vars: dict[str, str]) -> None:
        self.executor_endpoint.start()
        runtime = self.function_version.config.runtime
        python = runtime_python(runtime)
        code = self.function_version.config.code.get_unzipped_code_location()
        env = {name: os.environ[name] for name in HOST_VARIABLES if name in os.environ}
        env |= {name: str(value) for name, value in env_vars.items()}
        env |= {
            "LAMBDA_TASK_ROOT": str(code),  # /var/task in a container; here the unzipped code itself
            "HOME": str(code),
            "IDEMLAB_RUNTIME_PYTHON": str(python),
            "IDEMLAB_RUNTIME": runtime,
        }
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                [str(python), str(ENVIRONMENT_SCRIPT)],
                env=env,
                cwd=code,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,  # stop() ends the environment and its runtime together
            )
        self.executor_endpoint.container_port = self._read_port()
        self.executor_endpoint.wait_for_startup()

    def _read_port(self) -> int:
        ready, _, _ = select.select([self.process.stdout], [], [], HANDSHAKE_SECONDS)
        line = self.process.stdout.readline() if ready else b""
        if not line:
            self.stop()
            raise LambdaRuntimeException(f"execution environment {self.id} did not start; log {self.log_file}")
        return int(json.loads(line)["invoke_port"])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):  # already unregistered: stopping twice is fine
            self.executor_endpoint.shutdown()
        self.log_file.unlink(missing_ok=True)

    def get_address(self) -> str:
        return LOOPBACK

    def get_endpoint_from_executor(self) -> str:
        return LOOPBACK

    def get_runtime_endpoint(self) -> str:
        port = config.GATEWAY_LISTEN[0].port
        return f"http://{LOOPBACK}:{port}{self.executor_endpoint.get_endpoint_prefix()}"

    def invoke(self, payload: dict[str, str]):
        return self.executor_endpoint.invoke(payload)

    def get_logs(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return "no log: the environment was not started"

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()  # unzips the code once per version
        runtime_python(function_version.config.runtime)  # fails the function at create, as a missing image does

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass  # LocalStack removes the unzipped code itself

    @classmethod
    def validate_environment(cls) -> bool:
        if not Path(os.environ.get(RUNTIMES_DIR_VARIABLE, "")).is_dir():
            print(f"{RUNTIMES_DIR_VARIABLE} names no folder: the process executor finds no runtime", file=sys.stderr)
            return False
        return True


class ProcessRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    name = "process"

    def load(self, *args, **kwargs):
        return ProcessRuntimeExecutor
