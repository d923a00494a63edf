"""Execution environments under bursts: idle ones are capped (per function and overall,
the least recently used stopped first), and cold starts that come all at once take turns
instead of starving each other past the init timeout.

These tests start their own backend: at most 3 idle environments per function and 5 in
all, and an init timeout of 8 s (each environment's own, counted from its start).
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from idemlab.embedded.server import EmbeddedBackend, health
from tests.conftest import zip_source

# The init timeout against HEAVY_INIT's 2 s of CPU: twenty such inits at once on 2 cores need
# about 20 s each, past it, as before inits took turns; two at a time take a few seconds each,
# well inside it even on a runner loaded five times over.
PER_FUNCTION, OVERALL, INIT_TIMEOUT = 3, 5, 20

# Each invocation counts itself in, then waits (polling, with its own deadline) until
# `expected` invocations are in: that many run at once, so that many environments exist.
GATHERING = """
import os, time, boto3
dynamodb = boto3.client("dynamodb")
def handler(event, context):
    key = {"pk": {"S": event["round"]}}
    dynamodb.update_item(TableName=os.environ["TABLE"], Key=key, UpdateExpression="ADD arrived :one", ExpressionAttributeValues={":one": {"N": "1"}})
    while int(dynamodb.get_item(TableName=os.environ["TABLE"], Key=key)["Item"]["arrived"]["N"]) < event["expected"]:
        if context.get_remaining_time_in_millis() < 1000:
            raise TimeoutError("the others never arrived")
        time.sleep(0.05)
    return os.getpid()
"""

# A module whose import costs one second of CPU, as a heavy dependency tree would.
HEAVY_INIT = """
import os, time
started = time.process_time()
while time.process_time() - started < 2.0:
    pass
def handler(event, context):
    return os.getpid()
"""


@pytest.fixture(scope="module")
def server():
    overrides = {
        "IDEMLAB_LAMBDA_MAX_IDLE_PER_FUNCTION": str(PER_FUNCTION),
        "IDEMLAB_LAMBDA_MAX_IDLE": str(OVERALL),
        "IDEMLAB_LAMBDA_INIT_TIMEOUT": str(INIT_TIMEOUT),
    }
    with EmbeddedBackend(environment=overrides) as backend:
        yield backend


@pytest.fixture(scope="module")
def aws(server):
    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
    config = Config(retries={"total_max_attempts": 1}, max_pool_connections=30, read_timeout=180)
    lam, dynamodb, iam = (
        session.client(s, endpoint_url=server.url, config=config) for s in ("lambda", "dynamodb", "iam")
    )
    table = f"rounds-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    role = iam.create_role(RoleName=f"r-{uuid.uuid4().hex[:8]}", AssumeRolePolicyDocument=json.dumps(trust))["Role"][
        "Arn"
    ]

    def function(source: str) -> str:
        name = f"fn-{uuid.uuid4().hex[:10]}"
        lam.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role,
            Handler="app.handler",
            Timeout=120,
            Code={"ZipFile": zip_source(source)},
            Environment={"Variables": {"TABLE": table}},
        )
        return name

    return lam, function


def burst(lam, name: str, events: list[dict]) -> list[dict]:
    with ThreadPoolExecutor(max_workers=len(events)) as pool:
        answers = list(
            pool.map(lambda event: lam.invoke(FunctionName=name, Payload=json.dumps(event).encode()), events)
        )
    return [
        {"error": answer.get("FunctionError"), "payload": json.loads(answer["Payload"].read())} for answer in answers
    ]


def worker_processes(server: EmbeddedBackend) -> set[int]:
    """The server's child processes that are Lambda workers, read from /proc."""
    children = set()
    for task in Path(f"/proc/{server.process.pid}/task").iterdir():
        try:
            children.update(int(pid) for pid in (task / "children").read_text().split())
        except FileNotFoundError:  # a request thread that ended meanwhile
            continue
    workers = set()
    for pid in children:
        try:
            if b"lambda_worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                workers.add(pid)
        except FileNotFoundError:  # ended meanwhile
            continue
    return workers


@pytest.mark.timeout(300)
def test_a_burst_leaves_at_most_the_caps_of_idle_environments(server, aws):
    lam, function = aws
    seen = set()
    for n, size in enumerate((8, 8)):
        name, round_ = function(GATHERING), f"burst-{uuid.uuid4().hex[:8]}"
        answers = burst(lam, name, [{"round": round_, "expected": size}] * size)
        assert [a["error"] for a in answers] == [None] * size, answers
        pids = {a["payload"] for a in answers}
        assert len(pids) == size, "each invocation of the burst had an environment of its own"
        seen |= pids
        live = set(health(server.url)["lambda_environments"])
        assert live == worker_processes(server)
        assert len(live & pids) <= PER_FUNCTION
        assert len(live) <= min(OVERALL, PER_FUNCTION * (n + 1))
    assert len(seen) == 16


@pytest.mark.timeout(300)
def test_twenty_cold_starts_at_once_all_succeed(server, aws):
    lam, function = aws
    name = function(HEAVY_INIT)
    answers = burst(lam, name, [{}] * 20)
    assert [a["error"] for a in answers] == [None] * 20, [a["payload"] for a in answers if a["error"]]
