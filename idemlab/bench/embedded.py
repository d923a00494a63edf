"""What the embedded backend's extensions cost, against the parts they extend.

- DynamoDB: calls per second on the embedded backend (every request serialised) next
  to moto's plain server, from 1 and from 8 client threads.
- Lambda: the round trip of a warm Invoke (HTTP, worker process, JSON both ways) next
  to calling the same handler in-process, and one cold start.
"""

from __future__ import annotations

import importlib.util
import io
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

from idemlab.embedded.server import EmbeddedBackend, free_port, port_in_use

HANDLER_SOURCE = "def handler(event, context):\n    return {'echo': event}\n"


def _client(service: str, url: str):
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(max_pool_connections=16, retries={"max_attempts": 1}),
    )


class PlainMoto:
    """moto's own server, unmodified, in a child process."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None

    def __enter__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-p", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 20
        while not port_in_use(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError("moto_server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait()


def dynamodb_calls_per_second(url: str, calls: int, threads: int) -> float:
    table = f"bench-{uuid.uuid4().hex[:6]}"
    ddb = _client("dynamodb", url)
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    per_thread = calls // threads

    def work(n: int) -> None:
        client = _client("dynamodb", url)
        for i in range(per_thread):
            key = {"pk": {"S": f"{n}-{i % 20}"}}
            # Half conditional writes, half reads: what the lessons' handlers do.
            if i % 2:
                client.get_item(TableName=table, Key=key)
            else:
                client.put_item(TableName=table, Item={**key, "v": {"N": str(i)}}, ConditionExpression="attribute_not_exists(v) OR v < :i", ExpressionAttributeValues={":i": {"N": str(i)}})

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(work, range(threads)))
    return per_thread * threads / (time.perf_counter() - started)


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", HANDLER_SOURCE)
    return buffer.getvalue()


def lambda_round_trips(url: str, invocations: int) -> dict:
    iam, lam = _client("iam", url), _client("lambda", url)
    role = iam.create_role(RoleName=f"bench-{uuid.uuid4().hex[:6]}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    name = f"bench-{uuid.uuid4().hex[:6]}"
    lam.create_function(FunctionName=name, Runtime="python3.12", Role=role, Handler="app.handler", Code={"ZipFile": _zip()})
    payload = b'{"order": 1}'
    started = time.perf_counter()
    lam.invoke(FunctionName=name, Payload=payload)["Payload"].read()
    cold = time.perf_counter() - started
    samples = []
    for _ in range(invocations):
        started = time.perf_counter()
        lam.invoke(FunctionName=name, Payload=payload)["Payload"].read()
        samples.append(time.perf_counter() - started)
    return {"cold_start_ms": cold * 1000, **_percentiles(samples)}


def direct_calls(invocations: int) -> dict:
    """The same handler, imported and called in this process: the floor."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "app.py"
        path.write_text(HANDLER_SOURCE)
        spec = importlib.util.spec_from_file_location("bench_app", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    samples = []
    for _ in range(invocations):
        started = time.perf_counter()
        module.handler({"order": 1}, None)
        samples.append(time.perf_counter() - started)
    return _percentiles(samples)


def _percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


def run(quick: bool = False) -> dict:
    calls = 400 if quick else 2000
    invocations = 50 if quick else 300
    results: dict = {"dynamodb": {}, "lambda": {}}
    with PlainMoto() as plain, EmbeddedBackend() as embedded:
        for threads in (1, 8):
            results["dynamodb"][f"{threads}_threads"] = {
                "plain_moto_calls_per_s": dynamodb_calls_per_second(plain.url, calls, threads),
                "embedded_calls_per_s": dynamodb_calls_per_second(embedded.url, calls, threads),
            }
        results["lambda"]["embedded_invoke"] = lambda_round_trips(embedded.url, invocations)
    results["lambda"]["direct_call"] = direct_calls(invocations)
    return results


def table(results: dict) -> str:
    lines = ["| measurement | embedded | reference | ratio |", "|---|---:|---:|---:|"]
    for threads, row in results["dynamodb"].items():
        embedded, plain = row["embedded_calls_per_s"], row["plain_moto_calls_per_s"]
        label = threads.replace("_threads", " thread" if threads.startswith("1_") else " threads")
        lines.append(f"| DynamoDB calls/s, {label} (vs plain moto) | {embedded:.0f} | {plain:.0f} | {embedded / plain:.2f} |")
    invoke, direct = results["lambda"]["embedded_invoke"], results["lambda"]["direct_call"]
    for stat in ("p50_ms", "p99_ms"):
        lines.append(
            f"| Lambda warm invoke {stat[:3]} ms (vs in-process call) | {invoke[stat]:.2f} | {direct[stat]:.4f} | {invoke[stat] / max(direct[stat], 1e-6):.0f} |"
        )
    lines.append(f"| Lambda cold start ms | {invoke['cold_start_ms']:.0f} | | |")
    return "\n".join(lines)
