"""What a test session shares (`Backend`) and what a test gets (`Lab`, the `idemlab` fixture)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import numbers
import os
import re
import threading
import time
import traceback
import uuid
import warnings
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from unittest import mock

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from idemlab.barrier import all_at_once
from idemlab.embedded.server import EmbeddedBackend
from idemlab.testing import _bootstrap
from idemlab.testing.explore import Explorer, explore
from idemlab.testing.handlers import Crash, Handler, Queue
from idemlab.testing.report import CopyResult, CrashNotReached, Delivery, DuplicateEffectError, EffectReport, Round

# The plugin's handler in every function's zip; it loads and calls the handler under test.
BOOTSTRAP_MODULE = "idemlab_testing_bootstrap"

REGION = "us-east-1"
# Dummy credentials and the region: the server's environment, and the test's while it runs.
LOCAL_VARIABLES = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
}
# Variables that would send boto3 elsewhere than AWS_ENDPOINT_URL, or to a real account
# (and every AWS_ENDPOINT_URL_<SERVICE>: a per-service endpoint wins over AWS_ENDPOINT_URL).
CLEARED_VARIABLES = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
)
# Lambda's default is 3 s; handlers that call other services usually get more.
DEFAULT_TIMEOUT_SECONDS = 10
# A warm-up ping holds its environment this long, so the pings sent together each
# need an environment of their own (a cold start on this machine takes about 1 s).
WARMUP_HOLD_SECONDS = 0.3
# No SDK retries: a retried Invoke would be one more copy than the test sent. A call waits as
# long as a copy can take: Lambda's largest timeout (15 minutes, AWS docs:
# lambda/latest/dg/gettingstarted-limits.html) plus the cold start the runtime allows
# (idemlab.embedded.lambda_runtime).
CLIENT_CONFIG = Config(retries={"total_max_attempts": 1}, max_pool_connections=64, read_timeout=15 * 60 + 30)
# Lambda's retries of a failed asynchronous invocation, at most and by default (AWS docs:
# lambda/latest/dg/invocation-async-error-handling.html).
ASYNC_RETRIES = 2
# Errors after which the copy's execution environment is gone.
FATAL_ERROR_TYPES = {"Runtime.ExitError", "Sandbox.Timedout", "Runtime.InitTimeout"}
# Errors that mean the handler never loaded: nothing to count, the test is set up wrong.
INIT_ERROR_TYPES = {"Runtime.ImportModuleError", "Runtime.HandlerNotFound", "Runtime.InitTimeout"}


@contextlib.contextmanager
def aws_environment(variables: dict[str, str]):
    """os.environ with `variables` set and the redirecting ones removed; restored after."""
    with mock.patch.dict(os.environ, variables):
        for name in [n for n in os.environ if n in CLEARED_VARIABLES or n.startswith("AWS_ENDPOINT_URL_")]:
            del os.environ[name]
        yield


class DeliveryError(RuntimeError):
    """The backend refused or lost an invocation (not the handler's own error)."""


class Backend(EmbeddedBackend):
    """The embedded backend for one test session, and what lives as long as it: the role
    functions run with, the crash-arming table, the deployed functions."""

    def __init__(self, port: int = 0, environment: dict | None = None):
        super().__init__(port, environment)
        self._lock = threading.RLock()
        self._clients: dict = {}  # service -> client, made on first use
        self._session: boto3.session.Session | None = None  # made in start(), with the server
        self.warm: dict[str, int] = {}  # deployed function -> execution environments known to be warm
        self.role_arn: str | None = None  # the role functions run with, made in start()
        self.queues: dict[str, str] = {}  # queue name -> URL, each feeding one function
        self.dead_letters: dict[str, str] = {}  # dead-letter queue name -> URL

    def start(self) -> Backend:
        # The server (a child process) inherits the environment, and boto3 reads it when a
        # client is made: a developer's AWS_PROFILE would make either fail, so a clean one.
        with aws_environment(LOCAL_VARIABLES):
            super().start()
            # A session of its own, with explicit credentials and region (its config read while
            # the environment is clean): neither a profile nor boto3's default session decides.
            credentials = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
            self._session = boto3.session.Session(region_name=REGION, **credentials)
            self._session._session.get_scoped_config()
            trust = {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
            policy = json.dumps({"Version": "2012-10-17", "Statement": [trust]})
            role = self.client("iam").create_role(RoleName="idemlab-testing-handler", AssumeRolePolicyDocument=policy)
        self.role_arn = role["Role"]["Arn"]
        return self

    def client(self, service: str):
        """A client for this backend, one per service (clients are thread-safe; a session is not)."""
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self._session.client(service, endpoint_url=self.url, config=CLIENT_CONFIG)
            return self._clients[service]

    def table(self, name: str, *keys: str, ttl: str | None = None):
        """A new pay-per-request table of string keys (hash key, then any sort key), as a boto3 Table."""
        with self._lock:
            dynamodb = self._session.resource("dynamodb", endpoint_url=self.url)
        table = dynamodb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[
                {"AttributeName": key, "KeyType": kind} for key, kind in zip(keys, ("HASH", "RANGE"), strict=False)
            ],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key in keys],
        )
        if ttl:
            ttl_specification = {"Enabled": True, "AttributeName": ttl}
            table.meta.client.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl_specification)
        return table

    @functools.cached_property
    def crash_table(self):
        """Made on the first crash only: a test that lists its tables sees none of the plugin's."""
        return self.table(_bootstrap.CRASH_TABLE, "pk")

    def function(self, handler: Handler, environment: dict, timeout: int, crash: Crash | None) -> str:
        """The deployed function for this handler and configuration: created once, named
        readably and one per both, its zip the handler's with the plugin's bootstrap at its root."""
        variables = {**environment, _bootstrap.HANDLER_VARIABLE: handler.name}
        if crash is not None:
            variables[_bootstrap.CRASH_VARIABLE] = json.dumps(crash.__dict__, sort_keys=True)
        digest = hashlib.sha256(handler.code + json.dumps([variables, timeout], sort_keys=True).encode())
        name = f"idemlab-{re.sub(r'[^A-Za-z0-9-]', '-', handler.name)[-30:].strip('-')}-{digest.hexdigest()[:12]}"
        with self._lock:
            if name not in self.warm:
                code = io.BytesIO(handler.code)
                with zipfile.ZipFile(code, "a", zipfile.ZIP_DEFLATED) as archive:
                    archive.write(_bootstrap.__file__, f"{BOOTSTRAP_MODULE}.py")
                self.client("lambda").create_function(
                    FunctionName=name,
                    Runtime="python3.12",
                    Role=self.role_arn,
                    Handler=f"{BOOTSTRAP_MODULE}.handler",
                    Code={"ZipFile": code.getvalue()},
                    Timeout=timeout,
                    Environment={"Variables": variables},
                )
                self.warm[name] = 0
        return name

    def queue(self, function: str, queue: Queue, timeout: int) -> str:
        """The queue feeding `function` through an event source mapping, made once per both; its URL."""
        visibility = max(queue.visibility_timeout or timeout, timeout)
        name = f"{function}-{hashlib.sha256(repr((queue, visibility)).encode()).hexdigest()[:8]}"
        name += ".fifo" if queue.fifo else ""
        with self._lock:
            if name not in self.queues:
                sqs = self.client("sqs")
                attributes = {"VisibilityTimeout": str(visibility), **({"FifoQueue": "true"} if queue.fifo else {})}
                if queue.max_receive_count is not None:
                    # A FIFO queue's dead-letter queue is a FIFO queue too
                    # (AWS docs: AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html).
                    dead_name = name.removesuffix(".fifo") + "-dlq" + (".fifo" if queue.fifo else "")
                    fifo = {"FifoQueue": "true"} if queue.fifo else {}
                    dead_url = sqs.create_queue(QueueName=dead_name, Attributes=fifo)["QueueUrl"]
                    found = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])
                    dead_arn = found["Attributes"]["QueueArn"]
                    policy = {"deadLetterTargetArn": dead_arn, "maxReceiveCount": str(queue.max_receive_count)}
                    attributes["RedrivePolicy"] = json.dumps(policy)
                    self.dead_letters[dead_name] = dead_url
                url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
                arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
                types = ["ReportBatchItemFailures"] if queue.report_batch_item_failures else []
                self.client("lambda").create_event_source_mapping(
                    EventSourceArn=arn,
                    FunctionName=function,
                    BatchSize=queue.batch_size,
                    FunctionResponseTypes=types,
                )
                self.queues[name] = url
            return self.queues[name]

    def destination(self, function: str, retries: int) -> str:
        """The queue receiving `function`'s asynchronous invocation records (on success and on
        failure), its retries set; made once per both; its URL."""
        name = f"{function}-async-{retries}"
        with self._lock:
            if name not in self.queues:
                sqs = self.client("sqs")
                url = sqs.create_queue(QueueName=name)["QueueUrl"]
                arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
                self.client("lambda").put_function_event_invoke_config(
                    FunctionName=function,
                    MaximumRetryAttempts=retries,
                    DestinationConfig={"OnSuccess": {"Destination": arn}, "OnFailure": {"Destination": arn}},
                )
                self.queues[name] = url
            return self.queues[name]


class Lab:
    """One test's tables, deleted when it ends, and `deliver` / `assert_exactly_once`, which send
    copies of an event to a handler in Lambda worker processes."""

    def __init__(self, backend: Backend):
        self.backend, self.url = backend, backend.url
        self.environment: dict[str, str] = {}  # passed to every function deployed
        self._tables: list[str] = []
        self._explorer = None  # made by the first explore(), closed with the test

    def client(self, service: str):
        return self.backend.client(service)

    def make_table(self, name: str, key: str = "pk", sort_key: str | None = None, ttl: str | None = None):
        """A pay-per-request table of string keys, deleted when the test ends; returns a boto3 Table."""
        table = self.backend.table(name, key, *([sort_key] if sort_key else []), ttl=ttl)
        self._tables.append(name)
        return table

    def powertools_table(self, name: str = "idempotency"):
        """The table Powertools' DynamoDBPersistenceLayer expects by default: key `id`, TTL `expiration`."""
        return self.make_table(name, key="id", ttl="expiration")

    def explorer(self):
        """The loopback server explored copies report to: one per test, so each exploration of
        a handler reuses the same deployed function and its warm environments."""
        if self._explorer is None:
            self._explorer = Explorer()
        return self._explorer

    def close(self) -> None:
        if self._explorer is not None:
            self._explorer.close()
        dynamodb = self.client("dynamodb")
        for name in self._tables:
            with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
                dynamodb.delete_table(TableName=name)

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
        _check_crash(crash)
        environment = {**self.environment, **(environment or {})}
        handler = Handler.of(handler)
        function = self.backend.function(handler, environment, timeout, crash)
        if together and copies > self.backend.warm[function]:
            # Give each copy a warm environment, so copies sent together start together.
            ping = json.dumps({_bootstrap.WARMUP_KEY: WARMUP_HOLD_SECONDS}).encode()
            all_at_once([functools.partial(self._send, function, handler, ping, 0)] * copies, join_seconds=None)
            self.backend.warm[function] = copies
        self._arm(function, crash)
        sends = [
            functools.partial(self._send, function, handler, json.dumps(event).encode(), n + 1) for n in range(copies)
        ]
        results = all_at_once(sends, join_seconds=None) if together else [send() for send in sends]
        if any(copy.error_type in FATAL_ERROR_TYPES for copy in results):
            self.backend.warm[function] = 0  # some died; which ones is unknown
        return Delivery(results, crash, self._disarm(function, crash))

    def _check_loads(self, function: str, handler: Handler) -> None:
        """One ping to a function not yet known to load: a handler (or crash point) that cannot
        load fails here with its cause, rather than leaving messages in a queue or events to retries."""
        if not self.backend.warm[function]:
            self._send(function, handler, json.dumps({_bootstrap.WARMUP_KEY: 0}).encode(), 0)
            self.backend.warm[function] = 1

    def _arm(self, function: str, crash: Crash | None) -> None:
        """Arm `crash.times` crashes for the copies of the next delivery to `function` to share."""
        if crash is not None:
            self.backend.crash_table.put_item(Item={"pk": function, "armed": crash.times})

    def _disarm(self, function: str, crash: Crash | None) -> int:
        """How many armed crashes went off; nothing stays armed for the next delivery."""
        if crash is None:
            return 0
        left = self.backend.crash_table.delete_item(Key={"pk": function}, ReturnValues="ALL_OLD")
        return crash.times - int(left.get("Attributes", {}).get("armed", 0))

    def deliver_sqs(
        self,
        handler: Handler | str,
        event,
        copies: int = 2,
        queue: Queue | None = None,
        timeout: int = DEFAULT_TIMEOUT_SECONDS,
        environment: dict | None = None,
        crash: Crash | None = None,
    ) -> Delivery:
        """Send `copies` messages, each holding `event` as its JSON body, to a queue that feeds
        `handler`; return when the queue is empty (every message handled and deleted).

        `crash` makes the first invocation to reach its point die there: the poller's batch
        fails, and its messages come back after the visibility timeout, as on AWS.

        A message the handler keeps failing stays: the delivery fails after `copies` times
        the time a message can take (the visibility timeout, plus the function's timeout) and
        a minute, naming what is left in the queue.
        """
        if not isinstance(copies, int) or copies < 1:
            raise ValueError(f"copies must be a whole number, at least 1, not {copies!r}")
        queue = queue or Queue()
        if not isinstance(queue, Queue):
            raise TypeError(f"queue must be a Queue (e.g. Queue(fifo=True)), not {queue!r}")
        _check_crash(crash)
        handler = Handler.of(handler)
        function = self.backend.function(handler, {**self.environment, **(environment or {})}, timeout, crash)
        self._check_loads(function, handler)
        url = self.backend.queue(function, queue, timeout)
        self._arm(function, crash)
        sqs, body, results = self.client("sqs"), json.dumps(event), []
        for number in range(1, copies + 1):
            copy = CopyResult(number, sent=time.time())
            group = {"MessageGroupId": "idemlab", "MessageDeduplicationId": uuid.uuid4().hex} if queue.fifo else {}
            copy.message_id = sqs.send_message(QueueUrl=url, MessageBody=body, **group)["MessageId"]
            results.append(copy)
        visibility = max(queue.visibility_timeout or timeout, timeout)
        # Each receive can take the function's timeout and then the visibility timeout; each crash is one more.
        receives = copies * (queue.max_receive_count or 1) + (crash.times if crash is not None else 0)
        allowed = receives * (visibility + timeout) + 60
        deadline = time.monotonic() + allowed
        # Both counts come from one reading, at one instant (idemlab/embedded/sqs_atomic.py):
        # read apart, a message coming back from its visibility timeout between them was in
        # neither, and the round was counted before its redelivery.
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        while True:
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
            left = sum(int(attributes[name]) for name in names)
            if not left:
                break
            if time.monotonic() > deadline:
                raise DeliveryError(
                    f"{left} of the {copies} messages for {handler.name!r} are still in the queue "
                    f"after {allowed} s: does the handler keep failing?"
                )
            time.sleep(0.05)  # polling the condition, not waiting out a time
        for copy in results:
            copy.answered = time.time()  # the queue was seen empty: every message handled or dead-lettered
        if queue.max_receive_count is not None:
            self._dead_lettered(url, results, queue.max_receive_count)
        crashes = self._disarm(function, crash)
        if crashes:
            self.backend.warm[function] = 0  # the crashed environments are gone; which ones is unknown
        return Delivery(results, crash, crashes)

    def _dead_lettered(self, url: str, copies: list[CopyResult], receives: int) -> None:
        """Mark the copies whose messages SQS moved to the dead-letter queue (and empty it for the next round)."""
        sqs = self.client("sqs")
        dead_name = url.rsplit("/", 1)[1].removesuffix(".fifo") + "-dlq" + (".fifo" if url.endswith(".fifo") else "")
        dead_url = self.backend.dead_letters[dead_name]
        by_id = {copy.message_id: copy for copy in copies}
        # The first receive long-polls (it returns as soon as a message is there): moto moves a
        # message by removing it from the source queue, then adding it to the dead-letter queue.
        # The embedded backend does both inside the source's receive, under its lock
        # (idemlab/embedded/sqs_atomic.py), so the source should not look empty first; the wait
        # costs nothing when the message is here.
        wait = 1
        while True:
            found = sqs.receive_message(QueueUrl=dead_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait)
            messages = found.get("Messages", [])
            wait = 0
            if not messages:
                break
            for message in messages:
                sqs.delete_message(QueueUrl=dead_url, ReceiptHandle=message["ReceiptHandle"])
                copy = by_id.get(message["MessageId"])  # a redriven message keeps its id
                if copy is not None:
                    copy.error = {
                        "errorType": "MovedToDeadLetterQueue",
                        "errorMessage": (
                            f"the handler failed it {receives} times; SQS moved it to the dead-letter queue"
                        ),
                    }

    def deliver_async(
        self,
        handler: Handler | str,
        event,
        copies: int = 1,
        retries: int = ASYNC_RETRIES,
        timeout: int = DEFAULT_TIMEOUT_SECONDS,
        environment: dict | None = None,
        crash: Crash | None = None,
    ) -> Delivery:
        """Invoke asynchronously (InvocationType=Event) `copies` times: Lambda retries a failed
        event up to `retries` times, then sends it to the on-failure destination. Returns when
        every copy's invocation record has reached the destination, each copy with its attempts.
        `crash` makes the first attempt to reach its point die there; Lambda retries it."""
        if not isinstance(copies, int) or copies < 1:
            raise ValueError(f"copies must be a whole number, at least 1, not {copies!r}")
        if not isinstance(retries, int) or not 0 <= retries <= ASYNC_RETRIES:
            # MaximumRetryAttempts: 0 to 2 (AWS docs: lambda/latest/api/API_PutFunctionEventInvokeConfig.html).
            raise ValueError(f"retries must be 0, 1 or 2, not {retries!r}")
        _check_crash(crash)
        handler = Handler.of(handler)
        function = self.backend.function(handler, {**self.environment, **(environment or {})}, timeout, crash)
        self._check_loads(function, handler)
        url = self.backend.destination(function, retries)
        self._arm(function, crash)
        sqs, lam, pending = self.client("sqs"), self.client("lambda"), {}
        for number in range(1, copies + 1):
            copy = CopyResult(number, sent=time.time(), code_root=str(handler.root) if handler.root else None)
            response = lam.invoke(FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode())
            pending[response["ResponseMetadata"]["RequestId"]] = copy
        results = list(pending.values())
        # Each attempt can take the timeout; retries wait 1 s, then 2 s (the backend's LAMBDA_RETRY_BASE_DELAY).
        deadline = time.monotonic() + copies * (retries + 1) * (timeout + 3) + 60
        while pending:
            if time.monotonic() > deadline:
                raise DeliveryError(
                    f"{len(pending)} of the {copies} asynchronous invocations of {handler.name!r} "
                    "sent no record to their destination in time"
                )
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
            for message in messages:
                record = json.loads(message["Body"])
                copy = pending.pop(record["requestContext"]["requestId"], None)
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                if copy is not None:
                    self._record(copy, record)
        crashes = self._disarm(function, crash)
        if crashes:
            self.backend.warm[function] = 0  # the crashed environments are gone; which ones is unknown
        return Delivery(results, crash, crashes)

    @staticmethod
    def _record(copy: CopyResult, record: dict) -> None:
        """What an asynchronous invocation record says of the copy's last attempt."""
        copy.answered = time.time()
        copy.attempts = record["requestContext"].get("approximateInvokeCount")
        copy.condition = record["requestContext"].get("condition")
        response = record.get("responsePayload")
        if record.get("responseContext", {}).get("functionError"):
            copy.error = (
                response if isinstance(response, dict) else {"errorType": "Unknown", "errorMessage": str(response)}
            )
        elif isinstance(response, dict) and _bootstrap.REPORT_KEY in response:
            report = response[_bootstrap.REPORT_KEY]
            copy.pid, copy.started, copy.ended = report["pid"], report.get("started"), report.get("ended")
            copy.powertools = bool(report.get("powertools"))
            copy.result = response.get("result")
        else:  # no response: the event expired before it ran
            copy.error = {"errorType": copy.condition or "Unknown", "errorMessage": "the event never ran"}

    def _send(self, function: str, handler: Handler, payload: bytes, number: int) -> CopyResult:
        """Invoke once: copy `number`, or a warm-up ping (0); what came back, or the handler's error."""
        copy = CopyResult(number, sent=time.time(), code_root=str(handler.root) if handler.root else None)
        try:
            response = self.client("lambda").invoke(FunctionName=function, Payload=payload)
        except ClientError as exc:
            error, what = exc.response["Error"], f"copy {number}" if number else "a warm-up ping"
            raise DeliveryError(f"the backend refused {what}: {error.get('Code')}: {error.get('Message')}") from exc
        copy.answered, document = time.time(), json.loads(response["Payload"].read() or b"null")
        if response.get("FunctionError"):
            unknown = {"errorType": "Unknown", "errorMessage": str(document)}
            copy.error = document if isinstance(document, dict) else unknown
            # A ping calls no handler: its error, like a handler that could not load, is the setup's.
            if copy.error_type in INIT_ERROR_TYPES or not number:
                raise DeliveryError(self._load_failure(handler, copy))
        elif isinstance(document, dict) and _bootstrap.REPORT_KEY in document:
            report = document[_bootstrap.REPORT_KEY]
            copy.pid, copy.started, copy.ended = report["pid"], report.get("started"), report.get("ended")
            copy.powertools = bool(report.get("powertools"))
            copy.result = document.get("result")
        else:  # an SQS-shaped event: the bootstrap answers with the handler's own answer, unwrapped
            copy.result = document
        return copy

    @staticmethod
    def _load_failure(handler: Handler, copy: CopyResult) -> str:
        """Why the handler could not start, naming it and its own file and line first."""
        message = str(copy.error.get("errorMessage"))
        # The runtime names the module it imported, the plugin's bootstrap: the cause follows it.
        _, found, cause = message.partition(f"Unable to import module '{BOOTSTRAP_MODULE}': {_bootstrap.LOAD_FAILURE}")
        if found:
            message = _bootstrap.LOAD_FAILURE + cause
        else:
            message = f"the handler {handler.name!r} could not start: {copy.error_type}: {message}"
        if handler.root is not None:  # the worker's copy of the code is the user's folder, zipped
            message = message.replace('"/var/task/', f'"{handler.root}/')
        return message

    def assert_exactly_once(
        self,
        handler: Handler | str,
        make_event: Callable[[int], object],
        count_effect: Callable[[object], int | Mapping[str, int]],
        rounds: int = 100,
        copies: int = 2,
        together: bool = True,
        crash: Crash | None = None,
        timeout: int = DEFAULT_TIMEOUT_SECONDS,
        environment: dict | None = None,
        queue: Queue | None = None,
        asynchronous: bool = False,
    ) -> EffectReport:
        """Deliver `copies` copies of a fresh event per round; the effect must count 1 each time.

        make_event(round_number) builds the event; count_effect(event) counts what the
        handler did for it (rows written, downstream calls recorded), or counts several
        effects by name ({"bonus": 1, "email": 1}), each of which must be 1. Raises
        DuplicateEffectError naming the rounds that went wrong, with their timelines.
        """
        __tracebackhide__ = True
        handler = Handler.of(handler)
        if queue is not None and asynchronous:
            raise ValueError("deliver through a queue or asynchronously, not both")
        report = EffectReport(
            handler.name, copies, together, crash, timeout=timeout, queue=queue, asynchronous=asynchronous
        )
        options = {"copies": copies, "crash": crash, "timeout": timeout, "environment": environment}
        for number in range(rounds):
            event = make_event(number)
            if asynchronous:
                delivery = self.deliver_async(handler, event, **options)
            elif queue is not None:
                delivery = self.deliver_sqs(handler, event, queue=queue, **options)
            else:
                delivery = self.deliver(handler, event, together=together, **options)
            if crash is not None and delivery.crashes == 0 and not delivery.failed:
                never = f"Crash point never reached: no copy got {crash.when} {crash.target} in round {number}."
                ask = "Is the name right, and does the handler call it for this event?"
                raise CrashNotReached("\n".join([never, "Timeline:", *delivery.timeline(), ask]))
            report.rounds.append(Round(number, event, delivery, self._count(count_effect, event, number)))
        if report.doubled() and together and copies > 1 and crash is None and queue is None and not asynchronous:
            # Did the copies double because they raced, or would they even one after another?
            event = make_event(rounds)
            delivery = self.deliver(handler, event, together=False, **options)
            report.apart_check = Round(rounds, event, delivery, self._count(count_effect, event, rounds))
        if report.bad_rounds:
            raise DuplicateEffectError(report)
        failed = [copy for r in report.rounds for copy in r.delivery.failed]
        if failed:  # the effect was right, yet copies failed: say so, as a passing test shows no message
            warnings.warn(CopiesFailedWarning(report.message()), stacklevel=2)
        return report

    def explore(
        self,
        handler: Handler | str,
        make_event: Callable[[int], object],
        count_effect: Callable[[object], int | Mapping[str, int]],
        effects: tuple[str, ...] = (),
        schedule: str | None = None,
        timeout: int = DEFAULT_TIMEOUT_SECONDS,
        environment: dict | None = None,
    ):
        """Every crash point and every interleaving of two copies, one schedule at a time.

        Parameters
        ----------
        handler, make_event, count_effect
            As for `assert_exactly_once`: make_event(n) builds schedule n's own event.
        effects
            Functions ("shop.payments.charge") that are steps too, beside every AWS call.
        schedule
            One schedule id (from a failure's message) to rerun alone, as a regression test.
        timeout
            The function's timeout in seconds: where a timeout crash stops a copy, and when its
            late retry comes. Interleaved copies wait for each other outside it (see explore.py).

        Returns
        -------
        ExplorationReport
            The step map, the schedules run and how long they took.

        Raises
        ------
        DuplicateEffectError, LostEffectError
            Naming the smallest failing schedule, with its timeline and id.
        """
        __tracebackhide__ = True
        return explore(self, handler, make_event, count_effect, effects, schedule, timeout, environment)

    def _count(self, count_effect: Callable, event: object, number: int) -> int | dict[str, int]:
        """count_effect(event), or an EffectCountError naming it, the round, the table it asked for, and its frames."""
        __tracebackhide__ = True
        name = getattr(count_effect, "__qualname__", repr(count_effect))
        try:
            count = count_effect(event)
        except Exception as exc:
            table = _bootstrap._table_of(exc)
            asked = ""
            if table:
                existing = self.backend.client("dynamodb").list_tables()["TableNames"]
                asked = f" (table {table!r}; the tables on the backend now: {existing})"
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _library_frame(f.filename)]
            lines = [
                f"count_effect {name} raised in round {number}, event {json.dumps(event, default=str)}: "
                f"{type(exc).__name__}: {exc}{asked}"
            ]
            lines += ["Traceback (its own frames):", *(line.rstrip("\n") for line in traceback.format_list(frames))]
            raise EffectCountError("\n".join(lines)) from None
        if isinstance(count, Mapping):  # named effects: each must happen exactly once
            if not count or not all(isinstance(key, str) and key for key in count):
                raise EffectCountError(
                    f"count_effect {name} returned {count!r} in round {number}: a mapping of counts "
                    "needs at least one effect, each named by a non-empty string"
                )
            return {key: self._whole(name, value, number, key) for key, value in count.items()}
        return self._whole(name, count, number)

    @staticmethod
    def _whole(name: str, value: object, number: int, effect: str = "") -> int:
        """A count as an int: 2, or Decimal("2") as DynamoDB returns numbers; anything else refused."""
        if isinstance(value, bool) or not isinstance(value, numbers.Number) or int(value) != value:
            what = f"for effect {effect!r} " if effect else ""
            raise EffectCountError(
                f"count_effect {name} returned {value!r} {what}in round {number}: a count must be a "
                "whole number (or a mapping of effect names to whole numbers)"
            )
        return int(value)


def _check_crash(crash: object) -> None:
    if crash is not None and not isinstance(crash, Crash):
        raise TypeError(f"crash must be a Crash (e.g. Crash.after('shop.payments.charge')), not {crash!r}")


class CopiesFailedWarning(UserWarning):
    """The effect happened exactly once in every round, but some copies failed with an error of
    their own (a copy that lost a conditional write and raised, say): shown in pytest's warnings summary."""


class EffectCountError(RuntimeError):
    """count_effect raised, or returned something other than a count."""


# Shown as idemlab.testing.<name> in pytest's report, where users import them.
CopiesFailedWarning.__module__ = EffectCountError.__module__ = "idemlab.testing"


def _library_frame(filename: str) -> bool:
    """Frames of boto3, botocore and this plugin: not where a user's mistake is."""
    parts = Path(filename).parts
    return "botocore" in parts or "boto3" in parts or "s3transfer" in parts or str(Path(__file__).parent) in filename
