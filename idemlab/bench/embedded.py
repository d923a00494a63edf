"""The embedded backend against plain moto, and with its fast path off and on, in one run.

- DynamoDB: PutItem, GetItem and conditional PutItem round trips per second, from 1 and
  from 8 client threads, on three servers started side by side: plain moto (moto's own
  ThreadedMotoServer), the embedded backend with its fast path off (IDEMLAB_FAST_PATH=0:
  the request path before the fast path) and with it on. Every server is warmed first
  (tables created, clients connected, a round untimed); then each round gives every
  server the same batch, in an order that rotates from round to round.
- Lambda: the warm Invoke round trip (HTTP, worker process, JSON both ways) with the fast
  path off and on, next to calling the same handler in this process; rounds interleaved
  the same way. Cold starts (the first invoke of a new function) are reported apart.
  Plain moto cannot run a handler without Docker, so it has no Lambda row.

Two views of the same DynamoDB servers, both printed, interleaved in the same rounds:

- boto3: what a learner's code experiences. boto3 spends about half a millisecond of CPU
  of its own on every call (building, signing, sending and parsing it), so this view
  has a ceiling: the same calls against a server that answers every request with a
  canned reply at once ("boto3 alone") are as fast as any server could make them. The
  table prints that ceiling's ratio to plain moto too: no server can show more.
- raw HTTP: what each server can serve. The same requests, built and signed by boto3
  before the clock starts, are sent as bytes over a socket (keep-alive where the server
  keeps the connection, a new connection per request where it closes it, as plain moto
  does) and each answer is read to its end: the client costs ~20 us a request, so the
  server is what is timed. A speed-up claimed for a server is read here; the boto3 view
  says how much of it a learner's boto3 code can feel, and its ceiling column why not more.

Every ratio comes with its 95 % bootstrap interval over the rounds (intervals.py).
"""

from __future__ import annotations

import importlib.util
import io
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
from botocore.config import Config

from idemlab.bench import intervals
from idemlab.embedded.fast_path import FAST_PATH_VARIABLE
from idemlab.embedded.server import EmbeddedBackend, free_port, port_in_use

HANDLER_SOURCE = "def handler(event, context):\n    return {'echo': event}\n"
THREADS = (1, 8)
OPERATIONS = ("PutItem", "GetItem", "conditional PutItem")
PLAIN, SLOW, FAST = "plain moto", "embedded, fast path off", "embedded, fast path on"
CEILING = "boto3 alone (canned answer)"
# Full run: rounds of calls per server; quick: enough rounds for an interval, fewer calls.
FULL = {"rounds": 20, "calls": 160, "invocations": 200}
QUICK = {"rounds": 8, "calls": 48, "invocations": 40}


def _client(service: str, url: str | None):
    """A client of one server; url None: AWS, with the caller's own credentials and Region."""
    config = Config(max_pool_connections=16, retries={"max_attempts": 1})
    if url is None:
        return boto3.client(service, config=config)
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=config,
    )


class PlainMoto:
    """moto's ThreadedMotoServer, unmodified, in a child process (its own interpreter, as
    the embedded backend has)."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None

    NAME = "ThreadedMotoServer"

    def code(self) -> str:
        return (
            "import sys, threading\n"
            "from moto.server import ThreadedMotoServer\n"
            f"ThreadedMotoServer(ip_address='127.0.0.1', port={self.port}).start()\n"
            "threading.Event().wait()\n"
        )

    def __enter__(self):
        self.process = subprocess.Popen([sys.executable, "-c", self.code()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not port_in_use(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.NAME} did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait()


CANNED_TABLE = b'{"Table": {"TableStatus": "ACTIVE"}}'


def serve_canned(port: int) -> None:
    """Answer every DynamoDB request at once with a canned reply (DescribeTable: an
    ACTIVE table; anything else: an empty document), keeping connections alive: the
    server that costs a boto3 client nothing, for the ceiling column."""
    import threading

    def connection(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length, body = 0, b"{}"
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"x-amz-target" and value.strip().endswith(b".DescribeTable"):
                        body = CANNED_TABLE
                while len(buffer) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                buffer = buffer[length:]
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
                    b"x-amzn-RequestId: canned\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
                )

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=connection, args=(conn,), daemon=True).start()


class CannedServer(PlainMoto):
    """serve_canned in a child process."""

    NAME = "the canned server"

    def code(self) -> str:
        return f"from idemlab.bench.embedded import serve_canned; serve_canned({self.port})"


class RawConnection:
    """Sends a request's bytes and reads its answer to the end: HTTP/1.1 keep-alive while
    the server keeps the connection, a new one after it answers `Connection: close`."""

    def __init__(self, url: str):
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        self.address = (host, int(port))
        self.sock: socket.socket | None = None
        self.buffer = b""

    def send(self, request: bytes) -> int:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=30)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.buffer = b""
        try:
            self.sock.sendall(request)
            while b"\r\n\r\n" not in self.buffer:
                self.buffer += self._receive()
        except ConnectionError:
            if self.buffer:
                raise
            # closed between requests without saying so: unanswered, so sent again
            self.close()
            return self.send(request)
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length, close = 0, False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection":
                close = value.strip().lower() == b"close"
        while len(rest) < length:
            rest += self._receive()
        self.buffer = rest[length:]
        if close:
            self.close()
        return int(head.split(b" ", 2)[1])

    def _receive(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection mid-answer")
        return data

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _recording_client(url: str):
    """A boto3 client whose requests are recorded, as the bytes it would send, and
    answered with an empty document without being sent."""
    from botocore.awsrequest import AWSResponse

    client = _client("dynamodb", url)
    recorded: list[bytes] = []
    host = url.split("//", 1)[1]

    class Empty:
        def stream(self, **_):
            yield b"{}"

    def record(request, **_):
        body = request.body if isinstance(request.body, bytes) else (request.body or "").encode()
        headers = "".join(f"{name}: {value.decode() if isinstance(value, bytes) else value}\r\n" for name, value in request.headers.items() if name.lower() not in ("host", "content-length"))
        recorded.append(f"POST / HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        return AWSResponse(request.url, 200, {}, Empty())

    client.meta.events.register("before-send.dynamodb", record)
    return client, recorded


class DynamoTarget:
    """One server's table and one warm client per thread."""

    def __init__(self, url: str | None, threads: int):
        self.table = f"idemlab-bench-{uuid.uuid4().hex[:6]}"
        self.ddb = ddb = _client("dynamodb", url)
        ddb.create_table(
            TableName=self.table,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        ddb.get_waiter("table_exists").wait(TableName=self.table, WaiterConfig={"Delay": 2, "MaxAttempts": 60})
        self.clients = [_client("dynamodb", url) for _ in range(max(THREADS))]
        self.counter = 0

    def call(self, client, operation: str, thread: int, i: int) -> None:
        key = {"pk": {"S": f"{thread}-{i % 20}"}}
        if operation == "GetItem":
            client.get_item(TableName=self.table, Key=key)
        elif operation == "PutItem":
            client.put_item(TableName=self.table, Item={**key, "v": {"N": str(i)}})
        else:  # the lessons' write: refused when a newer version is stored (a refusal is an answer too)
            self.counter += 1
            try:
                client.put_item(
                    TableName=self.table,
                    Item={**key, "v": {"N": str(self.counter)}},
                    ConditionExpression="attribute_not_exists(v) OR v < :v",
                    ExpressionAttributeValues={":v": {"N": str(self.counter)}},
                )
            except client.exceptions.ConditionalCheckFailedException:
                pass

    def calls_per_second(self, pool: ThreadPoolExecutor, operation: str, threads: int, calls: int) -> float:
        per_thread = max(1, calls // threads)

        def work(n: int) -> None:
            client = self.clients[n]
            for i in range(per_thread):
                self.call(client, operation, n, i)

        started = time.perf_counter()
        list(pool.map(work, range(threads)))
        return per_thread * threads / (time.perf_counter() - started)

    def raw_calls_per_second(self, pool: ThreadPoolExecutor, url: str, operation: str, threads: int, calls: int) -> float:
        """The same calls as calls_per_second, built and signed by boto3 first, then sent
        as raw HTTP from `threads` threads; every answer must be 200 or a refused condition."""
        per_thread = max(1, calls // threads)
        recorder, recorded = _recording_client(url)
        batches = []
        for n in range(threads):
            del recorded[:]
            for i in range(per_thread):
                self.call(recorder, operation, n, i)
            batches.append(list(recorded))
        connections = [RawConnection(url) for _ in range(threads)]

        def work(n: int) -> list[int]:
            return [connections[n].send(request) for request in batches[n]]

        try:
            started = time.perf_counter()
            statuses = [status for answers in pool.map(work, range(threads)) for status in answers]
            elapsed = time.perf_counter() - started
        finally:
            for connection in connections:
                connection.close()
        unexpected = {status for status in statuses if status != 200 and not (status == 400 and operation == "conditional PutItem")}
        if unexpected:
            raise RuntimeError(f"{operation} answered {sorted(unexpected)} on {url}")
        return len(statuses) / elapsed


def dynamodb_rounds(urls: dict[str, str], rounds: int, calls: int, raw_urls: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """({operation: {threads: {server: [calls/s per round]}}} through boto3, the same for
    raw HTTP to the servers named in raw_urls), servers and both views interleaved round by round."""
    targets = {name: DynamoTarget(url, max(THREADS)) for name, url in urls.items()}
    contenders = [(name, "boto3") for name in urls] + [(name, "raw") for name in raw_urls]
    results: dict = {view: {op: {t: {name: [] for name, v in contenders if v == view} for t in THREADS} for op in OPERATIONS} for view in ("boto3", "raw")}

    def measure(pool, name: str, view: str, operation: str, threads: int, count: int) -> float:
        if view == "raw":
            return targets[name].raw_calls_per_second(pool, urls[name], operation, threads, count)
        return targets[name].calls_per_second(pool, operation, threads, count)

    with ThreadPoolExecutor(max_workers=max(THREADS)) as pool:
        for operation in OPERATIONS:  # warm-up: connections, code paths, items; not timed
            for threads in THREADS:
                for name, view in contenders:
                    measure(pool, name, view, operation, threads, max(threads, calls // 4))
        for number in range(rounds):
            for operation in OPERATIONS:
                for threads in THREADS:
                    for name, view in intervals.round_order(contenders, number):
                        results[view][operation][threads][name].append(measure(pool, name, view, operation, threads, calls))
    return results["boto3"], results["raw"]


def aws_dynamodb(quick: bool = False) -> dict:
    """`make bench BACKEND=aws`: the same DynamoDB rounds on a real on-demand table (created
    here, deleted after), from this machine: the anchor for the emulators' numbers."""
    sizes = QUICK if quick else FULL
    target = DynamoTarget(None, max(THREADS))
    try:
        results: dict = {op: {t: {"AWS": []} for t in THREADS} for op in OPERATIONS}
        with ThreadPoolExecutor(max_workers=max(THREADS)) as pool:
            for operation in OPERATIONS:
                for threads in THREADS:
                    target.calls_per_second(pool, operation, threads, max(threads, sizes["calls"] // 4))
            for _ in range(sizes["rounds"]):
                for operation in OPERATIONS:
                    for threads in THREADS:
                        results[operation][threads]["AWS"].append(target.calls_per_second(pool, operation, threads, sizes["calls"]))
    finally:
        target.ddb.delete_table(TableName=target.table)
    return {"sizes": sizes, "dynamodb_calls_per_s": _keyed(results)}


def aws_table(results: dict) -> str:
    lines = [
        f"DynamoDB round trips per second on AWS, from this machine (mean of {results['sizes']['rounds']} rounds of "
        f"{results['sizes']['calls']} calls; network latency included)",
        "",
        "| operation, client threads | AWS calls/s (min-max over rounds) |",
        "|---|---:|",
    ]
    for operation, by_threads in results["dynamodb_calls_per_s"].items():
        for threads, rows in by_threads.items():
            rates = rows["AWS"]
            lines.append(f"| {operation}, {threads} thread(s) | {_mean(rates):.0f} ({min(rates):.0f}-{max(rates):.0f}) |")
    return "\n".join(lines)


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", HANDLER_SOURCE)
    return buffer.getvalue()


class LambdaTarget:
    def __init__(self, url: str):
        iam, self.client = _client("iam", url), _client("lambda", url)
        role = iam.create_role(RoleName=f"bench-{uuid.uuid4().hex[:6]}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        self.name = f"bench-{uuid.uuid4().hex[:6]}"
        self.client.create_function(FunctionName=self.name, Runtime="python3.12", Role=role, Handler="app.handler", Code={"ZipFile": _zip()})

    def invoke(self) -> float:
        started = time.perf_counter()
        self.client.invoke(FunctionName=self.name, Payload=b'{"order": 1}')["Payload"].read()
        return time.perf_counter() - started


def _direct_handler():
    """The same handler, imported into this process: the floor."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "app.py"
        path.write_text(HANDLER_SOURCE)
        spec = importlib.util.spec_from_file_location("bench_app", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module.handler


def lambda_rounds(urls: dict[str, str], invocations: int) -> dict:
    """Warm invoke seconds per round for each server and the direct call; cold starts apart."""
    targets = {name: LambdaTarget(url) for name, url in urls.items()}
    cold = {name: target.invoke() for name, target in targets.items()}  # a new environment each
    for target in targets.values():  # warm: the code path and the connection, untimed
        for _ in range(5):
            target.invoke()
    handler = _direct_handler()

    def direct() -> float:
        started = time.perf_counter()
        handler({"order": 1}, None)
        return time.perf_counter() - started

    calls = {**{name: target.invoke for name, target in targets.items()}, "in-process call": direct}
    samples: dict = {name: [] for name in calls}
    for number in range(invocations):
        for name in intervals.round_order(list(calls), number):
            samples[name].append(calls[name]())
    return {"cold_start_s": cold, "warm_s": samples}


def run(quick: bool = False) -> dict:
    sizes = QUICK if quick else FULL
    with PlainMoto() as plain, CannedServer() as canned, EmbeddedBackend(environment={FAST_PATH_VARIABLE: "0"}) as slow, EmbeddedBackend(
        environment={FAST_PATH_VARIABLE: "1"}
    ) as fast:
        urls = {PLAIN: plain.url, SLOW: slow.url, FAST: fast.url, CEILING: canned.url}
        dynamodb, raw = dynamodb_rounds(urls, sizes["rounds"], sizes["calls"], raw_urls=(PLAIN, SLOW, FAST))
        lam = lambda_rounds({SLOW: slow.url, FAST: fast.url}, sizes["invocations"])
    return {"sizes": sizes, "dynamodb_calls_per_s": _keyed(dynamodb), "dynamodb_raw_calls_per_s": _keyed(raw), "lambda": lam}


def _keyed(dynamodb: dict) -> dict:
    """JSON keys are strings: threads as '1', '8'."""
    return {op: {str(t): by_server for t, by_server in rows.items()} for op, rows in dynamodb.items()}


def _rate_ratio(rows: dict, value: str, reference: str) -> dict | None:
    return intervals.ratio_interval([[x] for x in rows[value]], [[x] for x in rows[reference]], intervals.mean)


def comparisons(results: dict) -> dict:
    """Every ratio the tables print, with its interval."""
    out: dict = {"dynamodb": {}, "dynamodb_raw": {}, "lambda": {}}
    for key, view in (("dynamodb_calls_per_s", "dynamodb"), ("dynamodb_raw_calls_per_s", "dynamodb_raw")):
        for operation, by_threads in results.get(key, {}).items():
            for threads, rows in by_threads.items():
                out[view][f"{operation}, {threads} thread(s)"] = {
                    "fast_vs_plain": _rate_ratio(rows, FAST, PLAIN),
                    "fast_vs_slow": _rate_ratio(rows, FAST, SLOW),
                    "slow_vs_plain": _rate_ratio(rows, SLOW, PLAIN),
                    "ceiling_vs_plain": _rate_ratio(rows, CEILING, PLAIN) if CEILING in rows else None,
                }
    warm = results["lambda"]["warm_s"]
    ms = {name: [[s * 1000] for s in samples] for name, samples in warm.items()}
    out["lambda"] = {
        "fast_vs_slow_p50": intervals.ratio_interval(ms[FAST], ms[SLOW]),
        "fast_minus_direct_p50_ms": intervals.difference_interval(ms[FAST], ms["in-process call"]),
        "slow_minus_direct_p50_ms": intervals.difference_interval(ms[SLOW], ms["in-process call"]),
    }
    return out


def _dynamodb_rows(rates: dict, ratios_by_label: dict) -> list[str]:
    """One table: a row per operation and thread count; with the ceiling's column when measured."""
    ceiling = any(CEILING in rows for by_threads in rates.values() for rows in by_threads.values())
    extra_head, extra_rule = (f" {CEILING} | ceiling / plain moto |", "---:|---|") if ceiling else ("", "")
    lines = [
        f"| operation, client threads | {PLAIN} | {SLOW} | {FAST} | fast / plain moto | fast / fast path off |{extra_head}",
        f"|---|---:|---:|---:|---|---|{extra_rule}",
    ]
    for operation, by_threads in rates.items():
        for threads, rows in by_threads.items():
            label = f"{operation}, {threads} thread(s)"
            ratios = ratios_by_label[label]
            extra = f" {_mean(rows[CEILING]):.0f} | {intervals.ratio_text(ratios['ceiling_vs_plain'])} |" if ceiling else ""
            lines.append(
                f"| {label} | {_mean(rows[PLAIN]):.0f} | {_mean(rows[SLOW]):.0f} | {_mean(rows[FAST]):.0f} "
                f"| {intervals.ratio_text(ratios['fast_vs_plain'])} | {intervals.ratio_text(ratios['fast_vs_slow'])} |{extra}"
            )
    return lines


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def _difference_text(interval: dict | None) -> str:
    if not interval:
        return "-"
    return f"{interval['difference']:+.2f} ms (95 % CI {interval['low']:+.2f} to {interval['high']:+.2f})"


def table(results: dict) -> str:
    compared = comparisons(results)
    sizes = results["sizes"]
    lines = [
        f"DynamoDB round trips per second through boto3, what a learner's code sees (mean of {sizes['rounds']} "
        f"interleaved rounds of {sizes['calls']} calls per server)",
        "",
    ]
    lines += _dynamodb_rows(results["dynamodb_calls_per_s"], compared["dynamodb"])
    if results.get("dynamodb_raw_calls_per_s"):
        lines += [
            "",
            "DynamoDB requests per second each server serves, sent as raw HTTP (the same requests signed by "
            "boto3 beforehand; the client costs ~20 us a request), in the same rounds",
            "",
        ]
        lines += _dynamodb_rows(results["dynamodb_raw_calls_per_s"], compared["dynamodb_raw"])
    warm, cold = results["lambda"]["warm_s"], results["lambda"]["cold_start_s"]
    lam = compared["lambda"]
    lines += [
        "",
        f"Lambda warm invoke ({len(warm[FAST])} interleaved rounds; plain moto runs no handler without Docker)",
        "",
        "| | p50 ms | p99 ms | cold start ms |",
        "|---|---:|---:|---:|",
    ]
    for name, samples in warm.items():
        ordered = sorted(samples)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        cold_text = f"{cold[name] * 1000:.0f}" if name in cold else "-"
        lines.append(f"| {name} | {statistics.median(samples) * 1000:.3f} | {p99 * 1000:.3f} | {cold_text} |")
    lines += [
        "",
        f"- warm invoke p50, fast path on minus the in-process call: {_difference_text(lam['fast_minus_direct_p50_ms'])}",
        f"- warm invoke p50, fast path off minus the in-process call: {_difference_text(lam['slow_minus_direct_p50_ms'])}",
        f"- warm invoke p50, fast path on / off: {intervals.ratio_text(lam['fast_vs_slow_p50'])}",
    ]
    return "\n".join(lines)
