"""The backend a test session shares, and the per-test helpers built on it.

`Backend` starts the embedded server (idemlab.embedded) on a free loopback port and
keeps what is worth creating once per session: the IAM role functions need, the
deployed functions (one per handler and configuration), the crash-arming table.

`Lab` is what a test gets: tables it creates are deleted when the test ends, and
`deliver` / `assert_exactly_once` send copies of an event to a handler running in
real Lambda worker processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from typing import Callable

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from idemlab.embedded.server import EmbeddedBackend
from idemlab.testing import _bootstrap
from idemlab.testing.crash import Crash
from idemlab.testing.handlers import BOOTSTRAP_HANDLER, Handler
from idemlab.testing.report import CopyResult, CrashNotReached, Delivery, DuplicateEffectError, EffectReport, Round

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
CRASH_TABLE = "idemlab-testing-crashes"
# Lambda's default is 3 s; handlers that call other services usually get more.
DEFAULT_TIMEOUT_SECONDS = 10
# A warm-up ping holds its environment this long, so the pings sent together each
# need an environment of their own (a cold start on this machine takes about 1 s).
WARMUP_HOLD_SECONDS = 0.3
# The runtime allows a cold start this long (idemlab.embedded.lambda_runtime).
INIT_ALLOWANCE_SECONDS = 30
# Errors after which the copy's execution environment is gone.
FATAL_ERROR_TYPES = {"Runtime.ExitError", "Sandbox.Timedout", "Runtime.InitTimeout"}
# Errors that mean the handler never loaded: nothing to count, the test is set up wrong.
INIT_ERROR_TYPES = {"Runtime.ImportModuleError", "Runtime.HandlerNotFound", "Runtime.InitTimeout"}


# Variables that would send boto3 elsewhere than AWS_ENDPOINT_URL, or to a real account.
CLEARED_VARIABLES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")


@contextlib.contextmanager
def aws_environment(variables: dict[str, str]):
    """os.environ with `variables` set and the redirecting ones removed; restored after."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name in CLEARED_VARIABLES or name.startswith("AWS_ENDPOINT_URL_"):  # per-service endpoints win
            del os.environ[name]
    os.environ.update(variables)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class DeliveryError(RuntimeError):
    """The backend refused or lost an invocation (not the handler's own error)."""


class Backend:
    """The embedded backend for one test session, and what lives as long as it."""

    def __init__(self):
        self.server = EmbeddedBackend()
        self._lock = threading.RLock()
        self._functions: dict[str, str] = {}  # configuration digest -> function name
        self._warm: dict[str, int] = {}  # function -> environments known to be warm
        self._role_arn: str | None = None
        self._clients: dict = {}
        self._crash_table = False

    def start(self) -> "Backend":
        started = time.perf_counter()
        # The server (a child process) inherits the environment: a developer's
        # AWS_PROFILE there would make its boto3 fail, so it starts in a clean one.
        with aws_environment({"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": REGION}):
            self.server.start()
        self.start_seconds = time.perf_counter() - started
        return self

    def stop(self) -> None:
        self.server.stop()

    @property
    def url(self) -> str:
        return self.server.url

    def environment(self) -> dict[str, str]:
        """The variables that point boto3 (and the AWS CLI) at this backend."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }

    def client(self, service: str, **config):
        """A client for this backend (one per service and options; clients are thread-safe)."""
        key = (service, json.dumps(config, sort_keys=True))
        with self._lock:
            if key not in self._clients:
                # No SDK retries: a retried Invoke would be one more copy than the test sent.
                options = {"retries": {"total_max_attempts": 1}, "max_pool_connections": 64, **config}
                self._clients[key] = self._session().client(service, endpoint_url=self.url, config=Config(**options))
            return self._clients[key]

    def resource(self, service: str):
        return self._session().resource(service, endpoint_url=self.url)

    def _session(self):
        # A session of its own, with explicit credentials and region, so neither a
        # profile nor boto3's shared default session decides where calls go.
        with aws_environment({}):
            session = boto3.session.Session(region_name=REGION, **CREDENTIALS)
            session._session.get_scoped_config()  # read the (now profile-less) config while it is clean
            return session

    # -- functions ---------------------------------------------------------------

    def role_arn(self) -> str:
        with self._lock:
            if self._role_arn is None:
                trust = {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}],
                }
                role = self.client("iam").create_role(RoleName="idemlab-testing-handler", AssumeRolePolicyDocument=json.dumps(trust))
                self._role_arn = role["Role"]["Arn"]
            return self._role_arn

    def crash_table(self) -> str:
        with self._lock:
            if not self._crash_table:
                dynamodb = self.client("dynamodb")
                dynamodb.create_table(
                    TableName=CRASH_TABLE,
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                    BillingMode="PAY_PER_REQUEST",
                )
                self._crash_table = True
            return CRASH_TABLE

    def function(self, handler: Handler, environment: dict, timeout: int, crash: Crash | None) -> str:
        """The deployed function for this handler and configuration (created once)."""
        variables = {**environment, _bootstrap.HANDLER_VARIABLE: handler.name}
        digest = hashlib.sha256(json.dumps([handler.digest(), variables, timeout, crash and crash.__dict__], sort_keys=True).encode()).hexdigest()[:12]
        name = f"idemlab-{handler.slug()}-{digest}"
        if crash is not None:
            spec = {"target": crash.target, "when": crash.when, "how": crash.how, "table": self.crash_table(), "key": name}
            variables[_bootstrap.CRASH_VARIABLE] = json.dumps(spec)
        with self._lock:
            if digest in self._functions:
                return self._functions[digest]
            self.client("lambda").create_function(
                FunctionName=name,
                Runtime="python3.12",
                Role=self.role_arn(),
                Handler=BOOTSTRAP_HANDLER,
                Code={"ZipFile": handler.with_bootstrap()},
                Timeout=timeout,
                Environment={"Variables": variables},
            )
            self._functions[digest] = name
            return name

    def warm_environments(self, function: str) -> int:
        """How many execution environments of `function` are known to be warm."""
        return self._warm.get(function, 0)

    def set_warm_environments(self, function: str, count: int) -> None:
        self._warm[function] = count


class Lab:
    """The plugin's helpers for one test (the `idemlab` fixture)."""

    def __init__(self, backend: Backend, environment: dict | None = None):
        self.backend = backend
        self.environment = dict(environment or {})  # passed to every function deployed
        self._tables: list[str] = []
        self._invoker = backend.client("lambda", read_timeout=900 + INIT_ALLOWANCE_SECONDS)

    @property
    def url(self) -> str:
        return self.backend.url

    def client(self, service: str):
        return self.backend.client(service)

    def resource(self, service: str):
        return self.backend.resource(service)

    # -- tables ------------------------------------------------------------------

    def make_table(self, name: str, key: str = "pk", sort_key: str | None = None, ttl: str | None = None, key_type: str = "S", sort_key_type: str = "S"):
        """A pay-per-request table, deleted when the test ends; returns a boto3 Table."""
        schema = [{"AttributeName": key, "KeyType": "HASH"}]
        attributes = [{"AttributeName": key, "AttributeType": key_type}]
        if sort_key:
            schema.append({"AttributeName": sort_key, "KeyType": "RANGE"})
            attributes.append({"AttributeName": sort_key, "AttributeType": sort_key_type})
        dynamodb = self.client("dynamodb")
        dynamodb.create_table(TableName=name, KeySchema=schema, AttributeDefinitions=attributes, BillingMode="PAY_PER_REQUEST")
        self._tables.append(name)
        if ttl:
            dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl})
        return self.resource("dynamodb").Table(name)

    def powertools_table(self, name: str = "idempotency"):
        """The table Powertools' DynamoDBPersistenceLayer expects by default: key `id`, TTL `expiration`."""
        return self.make_table(name, key="id", ttl="expiration")

    def close(self) -> None:
        dynamodb = self.client("dynamodb")
        for name in self._tables:
            try:
                dynamodb.delete_table(TableName=name)
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                    raise
        self._tables.clear()

    # -- delivering copies -------------------------------------------------------

    def deliver(
        self,
        handler: Handler | str,
        event,
        copies: int = 2,
        together: bool = True,
        crash: Crash | None = None,
        timeout: int = DEFAULT_TIMEOUT_SECONDS,
        environment: dict | None = None,
    ) -> Delivery:
        """Send `copies` copies of `event` to `handler`, running in Lambda worker processes.

        together=True releases all copies at once (after each has a warm environment of
        its own, so they overlap); together=False sends each after the previous answered,
        as a retry would. `crash` makes the first copy to reach its point die there.
        """
        if not isinstance(copies, int) or copies < 1:
            raise ValueError(f"copies must be a whole number, at least 1, not {copies!r}")
        if crash is not None and not isinstance(crash, Crash):
            raise TypeError(f"crash must be a Crash (e.g. Crash.after('shop.payments.charge')), not {crash!r}")
        handler = Handler.of(handler)
        function = self.backend.function(handler, {**self.environment, **(environment or {})}, timeout, crash)
        if together and copies > self.backend.warm_environments(function):
            self._warm_up(function, copies)
        if crash is not None:
            self._arm(function, crash.times)
        payload = json.dumps(event).encode()
        results = [CopyResult(number=n + 1, sent=0.0) for n in range(copies)]
        if together:
            barrier = threading.Barrier(copies)
            errors: list[BaseException] = []

            def send(copy: CopyResult) -> None:
                try:
                    barrier.wait()
                    self._invoke(function, payload, copy)
                except BaseException as exc:  # re-raised in the test's thread below
                    errors.append(exc)

            threads = [threading.Thread(target=send, args=(copy,)) for copy in results]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if errors:
                raise errors[0]
        else:
            for copy in results:
                self._invoke(function, payload, copy)
        if any(copy.error_type in FATAL_ERROR_TYPES for copy in results):
            self.backend.set_warm_environments(function, 0)  # some died; which ones is unknown
        crashes = self._disarm(function, crash.times) if crash is not None else 0
        return Delivery(handler.name, event, together, results, crash, crashes)

    def _invoke(self, function: str, payload: bytes, copy: CopyResult) -> None:
        copy.sent = time.time()
        try:
            response = self._invoker.invoke(FunctionName=function, Payload=payload)
        except ClientError as exc:
            error = exc.response["Error"]
            raise DeliveryError(f"the backend refused copy {copy.number}: {error.get('Code')}: {error.get('Message')}") from exc
        body = response["Payload"].read()
        copy.answered = time.time()
        document = json.loads(body) if body else None
        if response.get("FunctionError"):
            copy.error = document if isinstance(document, dict) else {"errorType": "Unknown", "errorMessage": str(document)}
            if copy.error_type in INIT_ERROR_TYPES:
                raise DeliveryError(f"the handler could not start: {copy.error_type}: {copy.error.get('errorMessage')}")
            return
        report = document[_bootstrap.REPORT_KEY]
        copy.pid, copy.started, copy.ended = report["pid"], report["started"], report["ended"]
        copy.result = document["result"]

    def _warm_up(self, function: str, copies: int) -> None:
        """Give each copy a warm environment, so copies sent together start together."""
        ping = json.dumps({_bootstrap.WARMUP_KEY: WARMUP_HOLD_SECONDS}).encode()
        replies: list[dict] = []

        def send() -> None:
            try:
                response = self._invoker.invoke(FunctionName=function, Payload=ping)
            except ClientError as exc:
                error = exc.response["Error"]
                replies.append({"error": "refused", "body": {"errorType": error.get("Code"), "errorMessage": error.get("Message")}})
                return
            replies.append({"error": response.get("FunctionError"), "body": json.loads(response["Payload"].read() or b"null")})

        threads = [threading.Thread(target=send) for _ in range(copies)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for reply in replies:
            if reply["error"]:
                body = reply["body"] if isinstance(reply["body"], dict) else {}
                raise DeliveryError(f"the handler could not start: {body.get('errorType')}: {body.get('errorMessage')}")
        self.backend.set_warm_environments(function, copies)

    def _arm(self, function: str, times: int) -> None:
        table = self.backend.crash_table()
        self.client("dynamodb").put_item(TableName=table, Item={"pk": {"S": function}, "armed": {"N": str(times)}})

    def _disarm(self, function: str, times: int) -> int:
        """How many armed crashes went off; nothing stays armed for the next delivery."""
        table = self.backend.crash_table()
        left = self.client("dynamodb").delete_item(TableName=table, Key={"pk": {"S": function}}, ReturnValues="ALL_OLD")
        return times - int(left.get("Attributes", {}).get("armed", {}).get("N", "0"))

    # -- effects -----------------------------------------------------------------

    def assert_exactly_once(
        self,
        handler: Handler | str,
        make_event: Callable[[int], object],
        count_effect: Callable[[object], int],
        rounds: int = 100,
        copies: int = 2,
        together: bool = True,
        crash: Crash | None = None,
        **options,
    ) -> EffectReport:
        """Deliver `copies` copies of a fresh event per round; the effect must count 1 each time.

        make_event(round_number) builds the event; count_effect(event) counts what the
        handler did for it (rows written, downstream calls recorded). Raises
        DuplicateEffectError naming the rounds that went wrong, with their timelines.
        """
        __tracebackhide__ = True
        handler = Handler.of(handler)
        report = EffectReport(handler.name, copies, together, crash)
        for number in range(rounds):
            event = make_event(number)
            delivery = self.deliver(handler, event, copies=copies, together=together, crash=crash, **options)
            if crash is not None and delivery.crashes == 0:
                lines = [f"Crash point never reached: no copy got {crash.when} {crash.target} in round {number}.", "Timeline:"]
                raise CrashNotReached("\n".join(lines + delivery.timeline() + ["Is the name right, and does the handler call it for this event?"]))
            report.rounds.append(Round(number, event, delivery, int(count_effect(event))))
        if report.bad_rounds:
            raise DuplicateEffectError(report)
        return report


def unique(prefix: str = "") -> str:
    """A fresh identifier for an event (order ids, idempotency keys)."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"
