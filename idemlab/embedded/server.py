"""Start, report and stop the embedded backend.

`python -m idemlab.embedded --port 4566` serves in the foreground (what `make up`
launches in the background); `EmbeddedBackend(port).start()` does the same from
Python and returns only when the server answers (what the tests use).

The server runs uploaded Lambda code, so it serves this machine only: it binds to
loopback, and refuses requests whose Host or Origin is not a loopback one (see
loopback_guard.py). `--allow-remote` (or IDEMLAB_ALLOW_REMOTE=1) lets it bind to another
address, for a lab served from a VM or container to its host; anyone who reaches that
address can then run code on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ALLOW_REMOTE_VARIABLE = "IDEMLAB_ALLOW_REMOTE"
HEALTH_PATH = "/_idemlab/health"  # control endpoints stay off the AWS API paths
COUNTS_PATH = "/_idemlab/counts"
READY_TIMEOUT_SECONDS = 20


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((host, port)) == 0


def health(url: str, timeout: float = 1.0) -> dict | None:
    try:
        with urllib.request.urlopen(url + HEALTH_PATH, timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


class EmbeddedBackend:
    """The embedded server as a child process on loopback."""

    def __init__(self, port: int = 0, log_path: Path | None = None, environment: dict | None = None):
        """``environment``: variables to set for the server process (e.g. IDEMLAB_FAST_PATH=0)."""
        self.environment = environment
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="idemlab-embedded-", suffix=".log")[1])
        self.process: subprocess.Popen | None = None

    def start(self, detach: bool = False) -> "EmbeddedBackend":
        if port_in_use(self.port):
            raise RuntimeError(f"port {self.port} is already in use; see log {self.log_path}")
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "idemlab.embedded", "--port", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.environment} if self.environment else None,
            start_new_session=detach,  # `make up`: survive the shell that started it
        )
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if health(self.url, timeout=0.5):
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"embedded backend exited with code {self.process.returncode}; see log {self.log_path}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"embedded backend did not answer within {READY_TIMEOUT_SECONDS} s; see log {self.log_path}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "EmbeddedBackend":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _client_factory(endpoint_url: str):
    """boto3 clients to this very server, for the parts that act like AWS's own callers."""
    import boto3

    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test")
    clients: dict[tuple[str, str], object] = {}
    lock = threading.Lock()

    def client(service: str, region: str):
        with lock:
            if (service, region) not in clients:
                clients[(service, region)] = session.client(service, endpoint_url=endpoint_url, region_name=region)
            return clients[(service, region)]

    return client


def _deliverer(client, endpoint_url: str):
    """Send an async-invocation record to its destination, through our own API."""

    def deliver(target_arn: str, body: str, attributes: dict) -> None:
        _, _, service, region, account, resource = target_arn.split(":", 5)
        if service == "sqs":
            url = f"{endpoint_url}/{account}/{resource}"
            message_attributes = {k: {"DataType": "String", "StringValue": v} for k, v in attributes.items() if v}
            client("sqs", region).send_message(QueueUrl=url, MessageBody=body, MessageAttributes=message_attributes)
        elif service == "sns":
            client("sns", region).publish(TopicArn=target_arn, Message=body)
        elif service == "lambda":
            client("lambda", region).invoke(FunctionName=target_arn, InvocationType="Event", Payload=body.encode())
        elif service == "events":
            entry = {"Source": "lambda", "DetailType": "Lambda Function Invocation Result", "Detail": body, "EventBusName": target_arn}
            client("events", region).put_events(Entries=[entry])
        else:
            print(f"embedded: cannot deliver to {target_arn}", file=sys.stderr)

    return deliver


def _lookup_function(arn: str):
    from moto.awslambda.models import lambda_backends

    _, _, _, region, account, _ = arn.split(":", 5)
    return lambda_backends[account][region].get_function(arn)


def request_counts(url: str) -> dict:
    """DynamoDB requests served so far (for the cost benchmarks): by action under
    "dynamodb", by table and action under "dynamodb_by_table"."""
    with urllib.request.urlopen(url + COUNTS_PATH, timeout=5) as response:
        return json.loads(response.read())


def _control_middleware(app, runtime):
    from idemlab.embedded import dynamodb_atomic

    def reply(start_response, document: dict):
        body = json.dumps(document).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def wrapped(environ, start_response):
        path = environ.get("PATH_INFO")
        if path == HEALTH_PATH:
            return reply(start_response, {"status": "ready", "backend": "embedded", "lambda_environments": runtime.environments()})
        if path == COUNTS_PATH:
            return reply(start_response, dynamodb_atomic.counts())
        return app(environ, start_response)

    return wrapped


def is_loopback_bind(host: str) -> bool:
    from idemlab.embedded.loopback_guard import is_loopback_name

    return is_loopback_name(host)


def serve(port: int, host: str = "127.0.0.1", allow_remote: bool = False, lambda_concurrency: int | None = None) -> None:
    if not (allow_remote or is_loopback_bind(host)):
        raise ValueError(f"refusing to serve on {host}: not a loopback address (--allow-remote to serve other machines)")
    os.environ["MOTO_PORT"] = str(port)  # moto's Step Functions call back into this server
    # Workers and our own clients call back over loopback when bound to every address.
    callback_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    endpoint_url = f"http://{callback_host}:{port}"

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    from idemlab.embedded import dynamodb_atomic, fast_path, lambda_api, loopback_guard, scheduler_ext, stepfunctions_ext
    from idemlab.embedded.lambda_async import AsyncInvoker
    from idemlab.embedded.lambda_concurrency import ConcurrencyLimit
    from idemlab.embedded.lambda_runtime import LambdaRuntime
    from idemlab.embedded.rule_scheduler import RuleScheduler

    work_dir = Path(tempfile.mkdtemp(prefix="idemlab-lambda-"))
    runtime = LambdaRuntime(endpoint_url, work_dir)
    client = _client_factory(endpoint_url)
    concurrency = ConcurrencyLimit(lambda_concurrency or _default_lambda_concurrency())
    service = lambda_api.LambdaService(runtime, lambda invoke: AsyncInvoker(invoke, _deliverer(client, endpoint_url)), concurrency)
    dynamodb_atomic.install(serialise_outside_lock=fast_path.enabled(), item_rollback=fast_path.enabled())
    stepfunctions_ext.install()
    scheduler_ext.install()
    lambda_api.install(service, _lookup_function)
    from idemlab.embedded import sqs_event_source

    sqs_event_source.install()
    try:
        from idemlab.embedded import terraform_compat
    except ImportError:
        terraform_compat = None
    if terraform_compat is not None:
        terraform_compat.install()

    app = _control_middleware(_moto_app(DomainDispatcherApplication, create_backend_app), runtime)
    app = loopback_guard.guard(app, check_host=not allow_remote)
    server = make_server(host, port, app, threaded=True, request_handler=_request_handler(MotoRequestHandler))

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    rules = RuleScheduler(client, region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1")).start()
    event_sources = sqs_event_source.SqsEventSources(client, service.invoke_by_arn, endpoint_url).start()
    print(f"embedded: serving AWS APIs on {endpoint_url}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        rules.stop()
        event_sources.stop()
        service.invoker.shutdown()
        runtime.shutdown()
        print("embedded: stopped", file=sys.stderr, flush=True)


def _moto_app(dispatcher_class, create_backend_app):
    """moto's WSGI app; with the fast path on (fast_path.py), its routing cached and the
    hot DynamoDB actions and Lambda Invoke sent straight to moto's handlers. Called after every
    install() above, so the method-name cache sees the patched classes."""
    from idemlab.embedded import fast_path

    if not fast_path.enabled():
        print(f"embedded: fast path off ({fast_path.FAST_PATH_VARIABLE}=0)", file=sys.stderr, flush=True)
        return dispatcher_class(create_backend_app)
    fast_path.cache_method_names()
    fast_path.lean_json_errors()
    fast_path.cached_condition_parses()
    return fast_path.short_paths(fast_path.cached_dispatcher(create_backend_app))


def _request_handler(moto_handler):
    """HTTP/1.1 keep-alive with the fast path on, moto's own handler (one connection per request) off."""
    from idemlab.embedded import fast_path

    return fast_path.keep_alive_handler() if fast_path.enabled() else moto_handler


def _default_lambda_concurrency() -> int:
    from idemlab.embedded.lambda_concurrency import DEFAULT_CONCURRENT_EXECUTIONS, LIMIT_VARIABLE

    return int(os.environ.get(LIMIT_VARIABLE) or DEFAULT_CONCURRENT_EXECUTIONS)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m idemlab.embedded", description=__doc__)
    parser.add_argument("--port", type=int, default=4566)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind; loopback unless --allow-remote")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        default=os.environ.get(ALLOW_REMOTE_VARIABLE) == "1",
        help=f"serve other machines too (also {ALLOW_REMOTE_VARIABLE}=1): they can run code on this one",
    )
    parser.add_argument(
        "--lambda-concurrency",
        type=_positive,
        default=None,
        help="Lambda invocations in flight per account and Region before Invoke answers 429 "
        "(default: LAMBDA_LIMITS_CONCURRENT_EXECUTIONS, else 40)",
    )
    args = parser.parse_args(argv)
    if args.lambda_concurrency is None:
        try:
            args.lambda_concurrency = _positive(str(_default_lambda_concurrency()))
        except ValueError as exc:
            parser.error(f"LAMBDA_LIMITS_CONCURRENT_EXECUTIONS: {exc}")
    if not (args.allow_remote or is_loopback_bind(args.host)):
        parser.error(f"--host {args.host} is not a loopback address: the backend runs uploaded code; add --allow-remote to serve other machines")
    serve(args.port, args.host, args.allow_remote, args.lambda_concurrency)
