"""Start, report and stop the embedded backend.

`python -m idemlab.embedded --port 4566` serves in the foreground (`make up` runs it in
the background); `EmbeddedBackend(port).start()` starts it as a child process and returns
once it answers (what the tests use).

The server runs uploaded Lambda code, so it serves this machine only. moto's server answers
any request that reaches its port. It echoes any `Origin` back in its CORS answers, so a
page on any web site can call it from the learner's browser (cross-site requests), and it
ignores `Host`, so a site whose name is re-pointed at 127.0.0.1 can read the answers too
(DNS rebinding): a web page could create a Lambda function here and run its code on the
laptop. So the server binds to loopback, and its front door answers 403, before moto sees
the request and without any CORS allowance, when its `Host` is not a loopback name
(`localhost`, `*.localhost`, `127.x.x.x`, `[::1]`, any port: a rebinding site sends its own
name), or when it has an `Origin` that is not a loopback one (browsers send `Origin` on
cross-site and CORS requests; boto3, Terraform, the Lambda workers and Step Functions send none).

`--allow-remote` (or IDEMLAB_ALLOW_REMOTE=1) binds to another address, for a lab served
from a VM or container to its host: anyone who reaches it can then run code here. The
`Host` check is then off (other machines reach it under its network name); the `Origin`
check stays.
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
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
import uuid
from pathlib import Path
from urllib.parse import urlsplit

ALLOW_REMOTE_VARIABLE = "IDEMLAB_ALLOW_REMOTE"
HEALTH_PATH = "/_idemlab/health"  # control endpoints stay off the AWS API paths
COUNTS_PATH = "/_idemlab/counts"
STATE_PATH = "/_idemlab/state"  # what a stop would discard: all state is in this process's memory
# Which server process this is, in its health answer: every resource lives in that process's
# memory, so a deploy recorded against another instance (before a `make down`, a reboot) has
# nothing left here (idemlab/stack.py). Made once per process, never reused.
INSTANCE = uuid.uuid4().hex
# A starting server is waited for while its process lives: start() returns as soon as it
# answers, once it has imported moto and bound its port, about half a second on a quiet
# machine and over a minute on a loaded one (60 s ran out with a suite, its notebooks and
# busy loops on 2 cores). This bounds only a start that is stuck, not one that is slow.
# Each probe may take what is left of it: a server that listens but answers slowly is
# starting, not absent.
READY_TIMEOUT_SECONDS = 600
FORBIDDEN = {"message": "Forbidden: the embedded backend answers only loopback clients"}
# Lesson code runs at most 16 identical checkout requests at once (notebook 05's full
# benchmark), and each calls the card processor function synchronously while it runs:
# 32 invocations in flight. 40 leaves room for the sweeper and async retries besides,
# and bounds the busy workers (one Python process each: 48 MB resident with boto3 and a
# client loaded, measured with Python 3.11) to about 2 GB. AWS's own default is 1,000;
# a new account's can be much lower.
DEFAULT_CONCURRENT_EXECUTIONS = 40
LIMIT_VARIABLE = "LAMBDA_LIMITS_CONCURRENT_EXECUTIONS"  # LocalStack's knob: one setting for both emulators


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def health(url: str, timeout: float = 1.0) -> dict | None:
    try:
        with urllib.request.urlopen(url + HEALTH_PATH, timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def in_memory_state() -> dict:
    """What the server holds and a stop discards: accepted async invocations not yet run to
    their end, SQS messages not yet deleted, and the resources a deploy created."""
    from moto.awslambda.models import lambda_backends
    from moto.dynamodb.models import dynamodb_backends
    from moto.sqs.models import sqs_backends

    from idemlab.embedded import lambda_api

    def regional(backends):  # moto's backends of every account and Region used so far
        return [backend for account in backends.values() for backend in account.values()]

    queues = [queue for backend in regional(sqs_backends) for queue in backend.queues.values()]
    return {
        "async_invocations": lambda_api.pending_events(),
        "sqs_messages": sum(len(queue._messages) for queue in queues),
        "queues": len(queues),
        "functions": sum(len(list(backend.list_functions())) for backend in regional(lambda_backends)),
        "tables": sum(len(backend.tables) for backend in regional(dynamodb_backends)),
    }


def discarded_work(url: str) -> str:
    """The line `make down` prints before it stops the server at `url`: what stopping discards."""
    try:
        with urllib.request.urlopen(url + STATE_PATH, timeout=5) as response:
            state = json.loads(response.read())
    except (OSError, ValueError) as exc:
        return f"embedded backend: could not read what stopping discards ({exc})"
    return (
        f"embedded backend: its state is in memory only; stopping discards {state['async_invocations']} "
        f"accepted async invocation(s) not yet finished and {state['sqs_messages']} SQS message(s), with "
        f"{state['functions']} function(s), {state['queues']} queue(s) and {state['tables']} table(s): "
        "after `make up`, run `make deploy`"
    )


def request_counts(url: str, timeout: float = 30) -> dict:
    """DynamoDB requests served so far, by action ("dynamodb") and by table and action ("dynamodb_by_table").

    It waits for the answer: a busy server on a loaded 2-core machine has taken seconds to
    give one (5 s was a guess), and the callers want the counts, not a probe's verdict."""
    with urllib.request.urlopen(url + COUNTS_PATH, timeout=timeout) as response:
        return json.loads(response.read())


class EmbeddedBackend:
    """The embedded server as a child process on loopback."""

    def __init__(self, port: int = 0, environment: dict | None = None):
        """``environment``: variables to set for the server process (e.g. IDEMLAB_FAST_PATH=0)."""
        self.port = port or free_port()
        self.environment = environment
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkstemp(prefix="idemlab-embedded-", suffix=".log")[1])
        self.process: subprocess.Popen | None = None

    def start(self) -> EmbeddedBackend:
        if port_in_use(self.port):
            raise RuntimeError(f"port {self.port} is already in use; see log {self.log_path}")
        environment = {**os.environ, **self.environment} if self.environment else None
        command = [sys.executable, "-m", "idemlab.embedded", "--port", str(self.port)]
        with open(self.log_path, "ab") as log:  # the child keeps its own copy
            self.process = subprocess.Popen(
                command, env=environment, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            # A refused connection answers at once; an accepted one is waited for, however slow.
            if health(self.url, timeout=max(0.5, left)):
                return self
            if (code := self.process.poll()) is not None:
                raise RuntimeError(f"embedded backend exited with code {code}; see log {self.log_path}")
            time.sleep(0.05)
        self.stop()
        said = self.log_path.read_text(errors="replace").strip()[-500:] or "nothing"
        raise RuntimeError(
            f"embedded backend did not answer {self.url + HEALTH_PATH} within {READY_TIMEOUT_SECONDS} s; "
            f"its log ({self.log_path}) says: {said}"
        )

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> EmbeddedBackend:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@functools.lru_cache(maxsize=256)  # a pure function of the text, asked on every request
def is_loopback_name(host: str, port: bool = False) -> bool:
    """Whether a host name names loopback; with `port`, a `Host` value (`127.0.0.1:4566`, `[::1]:4566`)."""
    host = host.strip().lower()
    if host.startswith("[") and (port or host.endswith("]")):
        host = host[1:].split("]", 1)[0]
    elif port and host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    host = host.rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):  # RFC 6761: always loopback
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _front_door(app, runtime, check_host: bool):
    """WSGI middleware: 403 with no CORS allowance to a foreign Host (when `check_host`) or
    Origin, then the control endpoints (health, with the Lambda runtime's environments; request counts)."""
    from idemlab.embedded import dynamodb_counts

    documents = {
        HEALTH_PATH: lambda: {
            "status": "ready",
            "backend": "embedded",
            "instance": INSTANCE,
            "lambda_environments": runtime.environments(),
        },
        COUNTS_PATH: dynamodb_counts.counts,
        STATE_PATH: in_memory_state,
    }

    def answer(start_response, status: str, document: dict) -> list[bytes]:
        body = json.dumps(document).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def front(environ, start_response):
        host = environ.get("HTTP_HOST")
        origin = environ.get("HTTP_ORIGIN")
        parts = urlsplit(origin) if origin is not None else None
        if check_host and host is not None and not is_loopback_name(host, port=True):
            reason = f"Host {host!r} is not a loopback name"
        elif parts and (parts.scheme not in ("http", "https") or not is_loopback_name(parts.hostname or "")):
            reason = f"Origin {origin!r} is not a loopback origin"
        else:
            document = documents.get(environ.get("PATH_INFO"))
            return app(environ, start_response) if document is None else answer(start_response, "200 OK", document())
        request = f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')}"
        print(f"embedded: refused {request}: {reason}", file=sys.stderr, flush=True)
        return answer(start_response, "403 Forbidden", FORBIDDEN)

    return front


def serve(port: int, host: str, allow_remote: bool, lambda_concurrency: int) -> None:
    """Serve until SIGTERM or SIGINT; `main` refuses a host beyond loopback without `allow_remote`."""
    os.environ["MOTO_PORT"] = str(port)  # moto's Step Functions call back into this server
    # Workers and our own clients call back over loopback when bound to every address.
    endpoint_url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"

    import boto3
    from werkzeug.serving import make_server

    from idemlab.embedded import (
        alarm_evaluator,
        durable_api,
        dynamodb_atomic,
        fast_path,
        lambda_api,
        rule_scheduler,
        scheduler_api,
        sqs_atomic,
        sqs_event_source,
        stepfunctions_ext,
        terraform_compat,
    )
    from idemlab.embedded.patching import every

    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test")
    lock = threading.Lock()

    @functools.cache
    def client(service: str, region: str):
        """A boto3 client of this very server, for the parts that act like AWS's own callers."""
        with lock:  # a boto3 session is not thread-safe
            return session.client(service, endpoint_url=endpoint_url, region_name=region)

    service = lambda_api.LambdaService(endpoint_url, client, lambda_concurrency)
    dynamodb_atomic.install(fast_path=fast_path.enabled())
    lambda_api.install(service)
    durable = durable_api.install(endpoint_url, os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    for module in (stepfunctions_ext, scheduler_api, sqs_atomic, sqs_event_source, terraform_compat):
        module.install()
    app, handler = fast_path.app_and_handler()  # after every install: it caches the patched classes' methods
    app = _front_door(durable_api.routes(app), service.runtime, check_host=not allow_remote)
    server = make_server(host, port, app, threaded=True, request_handler=handler)

    for signum in (signal.SIGTERM, signal.SIGINT):  # shutdown() waits for serve_forever: call it from another thread
        signal.signal(signum, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    rules = rule_scheduler.RuleScheduler(client, region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    rules_stop = every(rule_scheduler.RULE_POLL_SECONDS, rules.run_once, "rule scheduler")
    invoke = durable_api.event_source_invoke(service.invoke_by_arn)  # a durable function: an execution per delivery
    event_sources = sqs_event_source.SqsEventSources(client, invoke, endpoint_url)
    alarms = alarm_evaluator.AlarmEvaluator(
        client, region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"), outcomes=service.outcomes
    )
    alarms_stop = every(alarm_evaluator.PASS_SECONDS, alarms.run_once, "alarm evaluator")
    print(f"embedded: serving AWS APIs on {endpoint_url}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        rules_stop.set()
        alarms_stop.set()
        event_sources.stop()
        if durable is not None:
            durable.stop()
        service.shutdown()
        print("embedded: stopped", file=sys.stderr, flush=True)


def _positive(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1 (also {LIMIT_VARIABLE}), got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m idemlab.embedded", description=__doc__)
    parser.add_argument("--port", type=int, default=4566)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind; loopback unless --allow-remote")
    remote_help = f"serve other machines too (also {ALLOW_REMOTE_VARIABLE}=1): they can run code on this one"
    remote_default = os.environ.get(ALLOW_REMOTE_VARIABLE) == "1"
    parser.add_argument("--allow-remote", action="store_true", default=remote_default, help=remote_help)
    # argparse converts a text default with `type` too: a bad variable is refused as a bad flag is.
    limit = os.environ.get(LIMIT_VARIABLE) or str(DEFAULT_CONCURRENT_EXECUTIONS)
    limit_help = "Lambda invocations in flight per account and Region before Invoke answers 429, default %(default)s"
    parser.add_argument("--lambda-concurrency", type=_positive, default=limit, help=f"{limit_help} ({LIMIT_VARIABLE})")
    args = parser.parse_args(argv)
    if not (args.allow_remote or is_loopback_name(args.host)):
        reason = "the backend runs uploaded code; add --allow-remote to serve other machines"
        parser.error(f"--host {args.host} is not a loopback address: {reason}")
    serve(args.port, args.host, args.allow_remote, args.lambda_concurrency)
