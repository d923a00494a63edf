"""The embedded backend against plain moto, and with its fast path off and on, in one run.

- DynamoDB: PutItem, GetItem and conditional PutItem round trips per second, from 1 and
  8 client threads, on servers started side by side: plain moto (moto's own
  ThreadedMotoServer) and the embedded backend with its fast path off (IDEMLAB_FAST_PATH=0:
  the request path before the fast path) and on. Each server is warmed first (table
  created, clients connected, a round untimed).
- Lambda: the warm Invoke round trip (HTTP, worker process, JSON both ways), fast path
  off and on, next to calling the same handler in this process; cold starts (a new
  function's first invoke) apart. Plain moto cannot run a handler without Docker.

DynamoDB is seen two ways, in the same rounds:
- boto3: what a learner's code experiences. boto3 spends about half a millisecond of CPU
  of its own on every call (building, signing, sending and parsing it), so this view has a
  ceiling: the same calls against a server that answers at once with a canned reply
  ("boto3 alone"); its ratio to plain moto is the most any server can show here.
- raw HTTP: what each server can serve. The same requests, built and signed by boto3
  before the clock starts, are sent as bytes over a socket and each answer is read to its
  end: the client costs ~20 us a request, so the server is what is timed. A speed-up
  claimed for a server is read here; the boto3 view says how much of it a learner's code
  can feel, and its ceiling column why not more.

Every round gives every server the same batch, in an order that rotates from round to
round, and every ratio comes with its 95 % bootstrap interval over the rounds (intervals.py).

A peer: LocalStack 4.14.0, natively (no Docker), started through the lab's own harness
(``python -m idemlab up`` with BACKEND=localstack on a free port) where this machine can run
it, measured in the same rounds: DynamoDB through boto3, SQS send + receive + delete, a
one-state Express workflow's StartSyncExecution and the Lambda warm invoke.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from types import SimpleNamespace

from botocore.awsrequest import AWSResponse

from idemlab import progress
from idemlab.bench.intervals import (
    difference_interval,
    difference_text,
    per_round,
    percentiles,
    ratio_interval,
    ratio_text,
    round_order,
)
from idemlab.bench.strategy_report import markdown
from idemlab.clients import client
from idemlab.embedded.fast_path import FAST_PATH_VARIABLE
from idemlab.embedded.server import EmbeddedBackend, free_port, port_in_use

HANDLER_SOURCE = "def handler(event, context):\n    return {'echo': event}\n"
THREADS = (1, 8)
OPERATIONS = ("PutItem", "GetItem", "conditional PutItem")
PLAIN, SLOW, FAST = "plain moto", "embedded, fast path off", "embedded, fast path on"
LOCALSTACK = "LocalStack 4.14.0 (native)"
# The other services' round trips, one client thread (plain moto has no StartSyncExecution).
SQS_ROUND_TRIP, SYNC_EXECUTION = "SQS send + receive + delete", "StartSyncExecution (one Pass state, Express)"
CEILING, DIRECT = "boto3 alone (canned answer)", "in-process call"
BOTO3, RAW = "dynamodb_calls_per_s", "dynamodb_raw_calls_per_s"  # the two views, by their key in the results
# Full run (--full): rounds of calls per server. The default run: ten rounds, two more than
# an interval needs (intervals.MIN_ROUNDS), of fewer calls: the rounds, not the calls in
# one, are what the interval resamples, so it stays a 95 % interval of the same statistic,
# only wider, in a third of the time. Quick: a smoke run.
# The default run keeps one client thread (a learner's code); --full adds eight.
FULL = {"rounds": 20, "calls": 160, "invocations": 400, "threads": [1, 8]}
DEFAULT = {"rounds": 10, "calls": 80, "invocations": 200, "threads": [1]}
QUICK = {"rounds": 8, "calls": 48, "invocations": 40, "threads": [1]}
# Each in a child process (its own interpreter, as the embedded backend has), on {port}:
# moto's ThreadedMotoServer, unmodified, and serve_canned.
PLAIN_MOTO_CODE = (
    "import threading\nfrom moto.server import ThreadedMotoServer\n"
    "ThreadedMotoServer(ip_address='127.0.0.1', port={port}).start()\nthreading.Event().wait()\n"
)
CANNED_CODE = "from idemlab.bench.embedded import serve_canned\nserve_canned({port})\n"
# One answer for every request: DescribeTable (the table waiter) reads an ACTIVE table in
# it; boto3 ignores the member that PutItem's and GetItem's answers do not have.
CANNED_ANSWER = b'{"Table": {"TableStatus": "ACTIVE"}}'


# A client of one server (url None: AWS, when the run is `--backend aws`), one attempt a call.
_client = partial(client, max_pool_connections=16, retries={"max_attempts": 1})


@contextlib.contextmanager
def child_server(code: str):
    """``code`` (a server, its {port} filled with a free one) in a child process; its URL once it listens."""
    port = free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    process = subprocess.Popen([sys.executable, "-c", code.format(port=port)], **quiet)
    try:
        deadline = time.monotonic() + 20
        while not port_in_use(port):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"this server did not start: {code}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait()


def _rest_of_message(reader) -> dict[bytes, bytes]:
    """After an HTTP message's first line: its headers by lower-case name (its body is read and dropped)."""
    headers = {}
    while (line := reader.readline()) != b"\r\n":
        if not line:
            raise ConnectionError("the connection closed mid-message")
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get(b"content-length", 0))
    if len(reader.read(length)) < length:
        raise ConnectionError("the connection closed mid-message")
    return headers


def serve_canned(port: int) -> None:
    """Answer every request at once with CANNED_ANSWER, keeping connections alive: the
    server that costs a boto3 client nothing, for the ceiling column."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: canned\r\n"
    answer += b"Content-Length: %d\r\n\r\n%s" % (len(CANNED_ANSWER), CANNED_ANSWER)

    def connection(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn, conn.makefile("rb") as reader, contextlib.suppress(ConnectionError):
            while reader.readline():
                _rest_of_message(reader)
                conn.sendall(answer)

    with socket.create_server(("127.0.0.1", port), backlog=64) as listener:
        while True:
            threading.Thread(target=connection, args=(listener.accept()[0],), daemon=True).start()


def _send_raw(url: str, requests: list[bytes]) -> list[int]:
    """Each request's bytes sent and its answer read to the end; their status codes. HTTP/1.1
    keep-alive while the server keeps the connection, a new one after it answers `Connection: close`
    (as plain moto does)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    statuses: list[int] = []
    while len(statuses) < len(requests):
        with socket.create_connection((host, int(port)), timeout=30) as connection:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with connection.makefile("rb") as reader:
                for request in requests[len(statuses) :]:
                    status = b""
                    with contextlib.suppress(ConnectionError):
                        connection.sendall(request)
                        status = reader.readline()
                    if not status:  # the connection closed between requests without saying so: sent again on a new one
                        break
                    statuses.append(int(status.split(b" ", 2)[1]))
                    if _rest_of_message(reader).get(b"connection", b"").lower() == b"close":
                        break
    return statuses


@contextlib.contextmanager
def localstack_peer(wanted: bool = True):
    """(url, None) of a native LocalStack started for the bench through the lab's harness, or
    (None, why not): not asked for, this machine cannot run it, or it did not start. Stopped after."""
    if not wanted:
        yield None, "not asked for (--no-localstack)"
        return
    check = subprocess.run(
        [sys.executable, "-m", "idemlab.localstack_native.install", "--check"], capture_output=True, text=True
    )
    if check.returncode != 0:
        said = (check.stdout + check.stderr).strip().splitlines()
        yield None, f"this machine cannot run native LocalStack ({said[-1] if said else 'the install check failed'})"
        return
    port = free_port()
    # BACKEND=localstack on a port of its own: the learner's backend on 4566 is left alone.
    env = {**os.environ, "BACKEND": "localstack", "LAB_PORT": str(port)}
    harness = [sys.executable, "-m", "idemlab"]
    started = subprocess.run([*harness, "up"], env=env, capture_output=True, text=True)
    try:
        if started.returncode != 0:
            said = (started.stdout + started.stderr).strip().splitlines()
            yield None, f"native LocalStack did not start ({said[-1] if said else f'exit {started.returncode}'})"
        else:
            yield f"http://127.0.0.1:{port}", None
    finally:
        subprocess.run([*harness, "down"], env=env, capture_output=True, text=True)


class QueueTarget:
    """One server's queue: a call sends a message, receives it and deletes it."""

    def __init__(self, url: str):
        self.sqs = _client("sqs", url)
        self.queue = self.sqs.create_queue(QueueName=f"idemlab-bench-{uuid.uuid4().hex[:6]}")["QueueUrl"]

    def call(self, i: int) -> None:
        self.sqs.send_message(QueueUrl=self.queue, MessageBody=f"order {i}")
        for _ in range(50):  # a message just sent may take a receive or two to show (LocalStack)
            messages = self.sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=1).get("Messages", [])
            if messages:
                self.sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=messages[0]["ReceiptHandle"])
                return
        raise RuntimeError(f"a message sent to {self.queue} was never received")

    def close(self) -> None:
        self.sqs.delete_queue(QueueUrl=self.queue)


class SyncWorkflowTarget:
    """One server's Express workflow of one Pass state: a call is a StartSyncExecution."""

    def __init__(self, url: str):
        name = f"idemlab-bench-{uuid.uuid4().hex[:6]}"
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "states.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
        role = _client("iam", url).create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        self.sfn = _client("stepfunctions", url)
        definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
        self.arn = self.sfn.create_state_machine(name=name, definition=definition, roleArn=role, type="EXPRESS")[
            "stateMachineArn"
        ]

    def call(self, i: int) -> None:
        answer = self.sfn.start_sync_execution(stateMachineArn=self.arn, input=json.dumps({"order": i}))
        if answer["status"] != "SUCCEEDED":
            raise RuntimeError(f"the one-state workflow ended {answer['status']}: {answer.get('error')}")

    def close(self) -> None:
        self.sfn.delete_state_machine(stateMachineArn=self.arn)


def service_rounds(urls: dict[str, str], rounds: int, calls: int) -> dict:
    """{operation: {"1": {server: [calls/s per round]}}} for SQS and StartSyncExecution (no
    plain moto: it has no StartSyncExecution), one client thread, servers interleaved as above."""
    made = {SQS_ROUND_TRIP: {name: QueueTarget(url) for name, url in urls.items()}}
    made[SYNC_EXECUTION] = {name: SyncWorkflowTarget(url) for name, url in urls.items() if name != PLAIN}
    results: dict = {operation: {"1": {}} for operation in made}
    what = f"bench: SQS and Step Functions rounds on {', '.join(urls)} (a warm-up round first)"
    try:
        with progress.Stage(what, total=rounds + 1, unit="rounds") as stage:
            for number in range(-1, rounds):  # round -1 warms up, not kept
                size = calls if number >= 0 else max(calls // 4, 1)
                for operation, targets in made.items():
                    for name in round_order(list(targets), number):
                        started = time.perf_counter()
                        for i in range(size):
                            targets[name].call(i)
                        if number >= 0:
                            rate = size / (time.perf_counter() - started)
                            results[operation]["1"].setdefault(name, []).append(rate)
                stage.advance()
    finally:
        for target in (t for targets in made.values() for t in targets.values()):
            with contextlib.suppress(Exception):  # a server that went away leaves nothing to clean
                target.close()
    return results


class DynamoTarget:
    """One server's table and one warm client per thread."""

    def __init__(self, url: str | None):
        self.url, self.table, self.counter = url, f"idemlab-bench-{uuid.uuid4().hex[:6]}", 0
        self.ddb = _client("dynamodb", url)
        key = {"AttributeName": "pk"}
        self.ddb.create_table(
            TableName=self.table,
            KeySchema=[key | {"KeyType": "HASH"}],
            AttributeDefinitions=[key | {"AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        self.ddb.get_waiter("table_exists").wait(TableName=self.table, WaiterConfig={"Delay": 2, "MaxAttempts": 60})
        self.clients = [_client("dynamodb", url) for _ in range(max(THREADS))]

    def call(self, client, operation: str, thread: int, i: int) -> None:
        key = {"pk": {"S": f"{thread}-{i % 20}"}}
        if operation == "GetItem":
            return client.get_item(TableName=self.table, Key=key)
        self.counter += 1
        put = {"TableName": self.table, "Item": key | {"v": {"N": str(self.counter)}}}
        if operation == "conditional PutItem":  # the lessons' write: refused when a newer version is stored
            condition = "attribute_not_exists(v) OR v < :v"
            put |= {"ConditionExpression": condition, "ExpressionAttributeValues": {":v": put["Item"]["v"]}}
        with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):  # a refusal is an answer too
            client.put_item(**put)

    def _recorded(self, operation: str, threads: int, per_thread: int) -> list[bytes]:
        """The calls of ``rate``, as the bytes boto3 would send: built and signed, answered
        with an empty document without being sent."""
        recorder, recorded, host = _client("dynamodb", self.url), [], self.url.split("//", 1)[1]

        def record(request, **_):  # the signed headers hold all but Host; a DynamoDB body is JSON bytes
            headers = "".join(f"{k}: {v if isinstance(v, str) else v.decode()}\r\n" for k, v in request.headers.items())
            recorded.append(f"POST / HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n".encode() + request.body)
            return AWSResponse(request.url, 200, {}, SimpleNamespace(stream=lambda **_: iter([b"{}"])))

        recorder.meta.events.register("before-send.dynamodb", record)
        for n, i in itertools.product(range(threads), range(per_thread)):
            self.call(recorder, operation, n, i)
        return recorded

    def rate(self, pool: ThreadPoolExecutor, raw: bool, operation: str, threads: int, calls: int) -> float:
        """Calls per second from ``threads`` threads: through boto3, or (raw) the same calls
        built and signed by boto3 first, then sent as raw HTTP, where every answer must be
        200 or a refused condition."""
        per_thread = max(1, calls // threads)
        requests = self._recorded(operation, threads, per_thread) if raw else []

        def work(n: int) -> list:
            if raw:
                return _send_raw(self.url, requests[n * per_thread : (n + 1) * per_thread])
            return [self.call(self.clients[n], operation, n, i) for i in range(per_thread)]

        started = time.perf_counter()
        answers = [answer for batch in pool.map(work, range(threads)) for answer in batch]
        elapsed = time.perf_counter() - started
        unexpected = {a for a in answers if raw and a != 200 and not (a == 400 and operation == "conditional PutItem")}
        if unexpected:
            raise RuntimeError(f"{operation} answered {sorted(unexpected)} on {self.url}")
        return len(answers) / elapsed


def dynamodb_rounds(
    urls: dict[str, str | None],
    rounds: int,
    calls: int,
    raw: tuple[str, ...] = (),
    threads_measured: tuple[int, ...] | list[int] = THREADS,
) -> dict:
    """{BOTO3: {operation: {threads: {server: [calls/s per round]}}}, RAW: the same, sent as
    raw HTTP to the servers named in ``raw``}: servers and both views interleaved round by
    round; threads as strings (JSON's keys). The tables are deleted after (AWS bills them)."""
    targets = {name: DynamoTarget(url) for name, url in urls.items()}
    contenders = [(name, False) for name in urls] + [(name, True) for name in raw]
    results: dict = {view: {op: {str(t): {} for t in threads_measured} for op in OPERATIONS} for view in (BOTO3, RAW)}
    try:
        what = f"bench: DynamoDB rounds on {', '.join(urls)} (a warm-up round first)"
        with ThreadPoolExecutor(max_workers=max(THREADS)) as pool, progress.Stage(what, rounds + 1, "rounds") as stage:
            for number in range(-1, rounds):  # round -1 warms up connections, code paths, items; not kept
                size = calls if number >= 0 else calls // 4
                for operation, threads in itertools.product(OPERATIONS, threads_measured):
                    for name, is_raw in round_order(contenders, number):
                        rate = targets[name].rate(pool, is_raw, operation, threads, size)
                        if number >= 0:
                            by_server = results[RAW if is_raw else BOTO3][operation][str(threads)]
                            by_server.setdefault(name, []).append(rate)
                stage.advance()
    finally:
        for target in targets.values():
            target.ddb.delete_table(TableName=target.table)
    return results


def aws_dynamodb(quick: bool = False) -> dict:
    """`make bench BACKEND=aws`: the same DynamoDB rounds on a real on-demand table (created
    here, deleted after), from this machine: the anchor for the emulators' numbers."""
    sizes = QUICK if quick else FULL
    return {"sizes": sizes, BOTO3: dynamodb_rounds({"AWS": None}, sizes["rounds"], sizes["calls"])[BOTO3]}


def aws_table(results: dict) -> str:
    sizes, rows = results["sizes"], []
    for operation, by_threads in results[BOTO3].items():
        for threads, by_server in by_threads.items():
            rates = by_server["AWS"]
            spread = f"{statistics.fmean(rates):.0f} ({min(rates):.0f}-{max(rates):.0f})"
            rows.append([f"{operation}, {threads} thread(s)", spread])
    title = (
        f"DynamoDB round trips per second on AWS, from this machine (mean of {sizes['rounds']} rounds of "
        f"{sizes['calls']} calls; network latency included)\n\n"
    )
    return title + markdown("operation, client threads|AWS calls/s (min-max over rounds)", "|---|---:|", rows)


def _invoker(url: str, archive: bytes):
    """A new function running HANDLER_SOURCE on the server at ``url``, and a call that invokes it."""
    functions, name = _client("lambda", url), f"bench-{uuid.uuid4().hex[:6]}"
    role = _client("iam", url).create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = {"ZipFile": archive}
    functions.create_function(FunctionName=name, Runtime="python3.12", Role=role, Handler="app.handler", Code=code)
    # A new function is Pending until Lambda has prepared it (LocalStack too: an Invoke then is
    # refused with ResourceConflictException); Active is when it may be invoked.
    functions.get_waiter("function_active_v2").wait(FunctionName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    return lambda: functions.invoke(FunctionName=name, Payload=b'{"order": 1}')["Payload"].read()


def _seconds(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def lambda_rounds(urls: dict[str, str], rounds: int, invocations: int) -> dict:
    """Warm invoke seconds for each server and the in-process call, cold starts apart, in
    `rounds` interleaved rounds: each round calls each contender `invocations // rounds`
    times in a row, in an order that rotates round by round. One call each, alternating,
    put the servers' after-work on each other's clocks: a LocalStack invoke (90 ms) leaves
    its processes busy after it answers, and the embedded p50 read 2.9 ms that way against
    1.1 ms measured alone. In runs, only a run's first call follows another contender."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as files:
        files.writestr("app.py", HANDLER_SOURCE)
    calls = {name: _invoker(url, archive.getvalue()) for name, url in urls.items()}
    cold = {name: _seconds(call) for name, call in calls.items()}  # a new environment each
    for call in list(calls.values()) * 5:  # warm: the code path and the connection, untimed
        call()
    handler: dict = {}
    exec(HANDLER_SOURCE, handler)  # the same handler, defined in this process: the floor
    calls[DIRECT] = lambda: handler["handler"]({"order": 1}, None)
    in_a_row = max(1, invocations // rounds)
    samples: dict = {name: [] for name in calls}
    with progress.Stage(f"bench: Lambda invoke rounds on {', '.join(calls)}", rounds, "rounds") as stage:
        for number in range(rounds):
            for name in round_order(list(calls), number):
                samples[name].append([_seconds(calls[name]) for _ in range(in_a_row)])
            stage.advance()
    return {"cold_start_s": cold, "warm_s": samples}


def run(sizes: dict = DEFAULT, fast_path_off: bool = False, localstack: str | None = None) -> dict:
    """Plain moto, the embedded backend (fast path on; off too with ``fast_path_off``), the
    boto3 ceiling and, given its URL, LocalStack, all in the same interleaved rounds."""
    started = time.monotonic()
    with contextlib.ExitStack() as servers:
        urls = {PLAIN: servers.enter_context(child_server(PLAIN_MOTO_CODE))}
        if fast_path_off:
            urls[SLOW] = servers.enter_context(EmbeddedBackend(environment={FAST_PATH_VARIABLE: "0"})).url
        urls[FAST] = servers.enter_context(EmbeddedBackend(environment={FAST_PATH_VARIABLE: "1"})).url
        if localstack:
            urls[LOCALSTACK] = localstack
        embedded = [name for name in (SLOW, FAST) if name in urls]
        # LocalStack is seen through boto3 only: the raw view reads answers by Content-Length.
        seconds = {"servers started": time.monotonic() - started}
        dynamodb = dynamodb_rounds(
            urls | {CEILING: servers.enter_context(child_server(CANNED_CODE))},
            sizes["rounds"],
            sizes["calls"],
            raw=(PLAIN, *embedded),
            threads_measured=sizes.get("threads", THREADS),
        )
        seconds["DynamoDB rounds"] = time.monotonic() - started - sum(seconds.values())
        others = service_rounds(urls, sizes["rounds"], max(sizes["calls"] // 4, 8))
        seconds["SQS and Step Functions rounds"] = time.monotonic() - started - sum(seconds.values())
        invoked = {name: urls[name] for name in (*embedded, LOCALSTACK) if name in urls}
        lam = lambda_rounds(invoked, sizes["rounds"], sizes["invocations"])
        seconds["Lambda rounds"] = time.monotonic() - started - sum(seconds.values())
    return {
        "sizes": sizes,
        **dynamodb,
        "other_calls_per_s": others,
        "lambda": lam,
        "seconds": {phase: round(value, 1) for phase, value in seconds.items()},
    }


# Ratio columns, each shown when both of its servers were measured anywhere in the table.
RATIOS = (
    (FAST, PLAIN, "fast / plain moto"),
    (FAST, SLOW, "fast / fast path off"),
    (FAST, LOCALSTACK, "fast / LocalStack"),
    (CEILING, PLAIN, "ceiling / plain moto"),
)


def _dynamodb_table(rates: dict) -> str:
    """A row per operation and thread count: each server's mean rate, and each ratio with its
    interval; a server missing from a row (plain moto has no StartSyncExecution) is '-'."""
    measured = {name for by_threads in rates.values() for rows in by_threads.values() for name in rows}
    servers = [name for name in (PLAIN, SLOW, FAST, LOCALSTACK, CEILING) if name in measured]
    ratios = [(value, reference, title) for value, reference, title in RATIOS if {value, reference} <= measured]
    header = "|".join(["operation, client threads", *servers, *(title for _, _, title in ratios)])
    align = "|---|" + "---:|" * len(servers) + "---|" * len(ratios)
    columns = [*servers, *((value, reference) for value, reference, _ in ratios)]
    rows = [(f"{op}, {t} thread(s)", r) for op, by_threads in rates.items() for t, r in by_threads.items()]
    return markdown(header, align, [[label] + [_cell(by_server, c) for c in columns] for label, by_server in rows])


def _cell(rows: dict, column: str | tuple[str, str]) -> str:
    """A server's mean rate, or for (server, reference) their ratio with its interval."""
    if isinstance(column, str):
        return f"{statistics.fmean(rows[column]):.0f}" if column in rows else "-"
    value, reference = column
    if value not in rows or reference not in rows:
        return "-"
    return ratio_text(ratio_interval(per_round(rows[value]), per_round(rows[reference]), statistics.fmean))


def table(results: dict) -> str:
    sizes, warm, cold = results["sizes"], results["lambda"]["warm_s"], results["lambda"]["cold_start_s"]
    lines = [
        f"DynamoDB round trips per second through boto3, what a learner's code sees (mean of {sizes['rounds']} "
        f"interleaved rounds of {sizes['calls']} calls per server)\n",
        _dynamodb_table(results[BOTO3]),
    ]
    if results.get(RAW):
        lines += [
            "\nDynamoDB requests per second each server serves, sent as raw HTTP (the same requests signed by boto3 "
            "beforehand; the client costs ~20 us a request), in the same rounds\n",
            _dynamodb_table(results[RAW]),
        ]
    if results.get("other_calls_per_s"):
        lines += [
            f"\nOther services' round trips per second through boto3, one client thread, in the same kind of "
            f"interleaved rounds ({sizes['rounds']})\n",
            _dynamodb_table(results["other_calls_per_s"]),
        ]
    ms = {name: [[s * 1000 for s in samples] for samples in by_round] for name, by_round in warm.items()}
    rows = []
    for name, by_round in warm.items():
        p = percentiles([s for samples in by_round for s in samples])
        rows.append([name, f"{p['p50']:.3f}", f"{p['p99']:.3f}", f"{cold[name] * 1000:.0f}" if name in cold else "-"])
    notes = [
        "- warm invoke p50, fast path on minus the in-process call: "
        + difference_text(difference_interval(ms[FAST], ms[DIRECT]))
    ]
    if SLOW in ms:
        notes += [
            "- warm invoke p50, fast path off minus the in-process call: "
            + difference_text(difference_interval(ms[SLOW], ms[DIRECT])),
            f"- warm invoke p50, fast path on / off: {ratio_text(ratio_interval(ms[FAST], ms[SLOW]))}",
        ]
    if LOCALSTACK in ms:
        notes += [
            f"- warm invoke p50, LocalStack / fast path on: {ratio_text(ratio_interval(ms[LOCALSTACK], ms[FAST]))}"
        ]
    if results.get("seconds"):
        notes.append(
            "- time taken: " + ", ".join(f"{phase} {value:.0f} s" for phase, value in results["seconds"].items())
        )
    return "\n".join(
        [
            *lines,
            f"\nLambda warm invoke ({len(warm[FAST])} interleaved rounds of {len(warm[FAST][0])} calls in a row per "
            "contender; plain moto runs no handler without Docker)\n",
            markdown("|p50 ms|p99 ms|cold start ms", "|---|---:|---:|---:|", rows) + "\n",
            *notes,
        ]
    )
