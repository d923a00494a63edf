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

from idemlab.embedded import lambda_runtime
from idemlab.embedded.server import EmbeddedBackend
from support.health import answer as health_answer
from tests.conftest import zip_source

# A generous init deadline: the test counts how many inits overlapped, which a loaded runner
# does not change, and needs every cold start to finish, however slowly.
PER_FUNCTION, OVERALL, INIT_TIMEOUT = 3, 5, 90

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
# An init that takes CPU and records when it ran (in the module's table): how many inits
# overlapped is then read from what happened, not from how fast this machine is.
HEAVY_INIT = """
import os, time, boto3
began = time.time()
started = time.process_time()
while time.process_time() - started < 0.5:
    pass
boto3.client("dynamodb").put_item(
    TableName=os.environ["TABLE"],
    Item={"pk": {"S": f"init#{os.getpid()}"}, "began": {"N": repr(began)}, "ended": {"N": repr(time.time())}},
)
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

    function.table = table  # where the functions record what they did
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
        live = set(health_answer(server.url)["lambda_environments"])
        assert live == worker_processes(server)
        assert len(live & pids) <= PER_FUNCTION
        assert len(live) <= min(OVERALL, PER_FUNCTION * (n + 1))
    assert len(seen) == 16


@pytest.mark.timeout(300)
def test_twenty_cold_starts_at_once_take_turns_and_all_succeed(server, aws):
    """Twenty cold starts at once: at most CONCURRENT_INITS initialise at a time (all twenty
    did, and timed out together on a loaded 2-core machine, before inits took turns)."""
    lam, function = aws
    name = function(HEAVY_INIT)
    answers = burst(lam, name, [{}] * 20)
    assert [a["error"] for a in answers] == [None] * 20, [a["payload"] for a in answers if a["error"]]
    dynamodb = boto3.client(
        "dynamodb", endpoint_url=server.url, region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    items = dynamodb.scan(TableName=function.table, ConsistentRead=True)["Items"]
    inits = [(float(i["began"]["N"]), float(i["ended"]["N"])) for i in items if i["pk"]["S"].startswith("init#")]
    assert inits, "no init recorded itself"
    # The most inits running at one moment: count at each init's start those not yet ended.
    overlapping = max(sum(1 for began, ended in inits if began <= moment < ended) for moment, _ in inits)
    assert overlapping <= lambda_runtime.CONCURRENT_INITS, (overlapping, len(inits))
