"""Limits of the embedded Lambda: concurrency (throttled, never run), idle workers
reaped on a timer, and async events too old to run.

These tests start their own backend with small limits: 2 invocations in flight per
account, idle workers reaped after 1 s, and 25 s between an async event's attempts.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from botocore.config import Config

from idemlab.embedded.server import EmbeddedBackend
from support.health import answer as health_answer
from tests.conftest import zip_source

LIMIT = 2
RETRY_DELAY = 25  # seconds; the first retry at 25 s, the second would be 50 s after that

# Records each run (its event's id) in a table, then sleeps, then fails if asked to.
HANDLER = """
import os, time, boto3
def handler(event, context):
    boto3.client("dynamodb").put_item(TableName=os.environ["TABLE"], Item={"pk": {"S": event["id"] + "#" + context.aws_request_id}})
    time.sleep(event.get("sleep", 0))
    if event.get("fail"):
        raise RuntimeError("downstream unavailable")
    return {"pid": os.getpid()}
"""


@pytest.fixture(scope="module")
def limited():
    overrides = {
        "LAMBDA_LIMITS_CONCURRENT_EXECUTIONS": str(LIMIT),
        "IDEMLAB_LAMBDA_IDLE_SECONDS": "1",
        "LAMBDA_RETRY_BASE_DELAY": str(RETRY_DELAY),
    }
    saved = {name: os.environ.get(name) for name in overrides}
    os.environ.update(overrides)
    try:
        server = EmbeddedBackend().start()
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)
    yield server
    server.stop()


class Lab:
    """Clients of the limited backend, without retries: a 429 must reach the test."""

    def __init__(self, url: str):
        session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
        config = Config(retries={"total_max_attempts": 1}, max_pool_connections=20, read_timeout=120)
        self.url = url
        self.lam, self.dynamodb, self.sqs, self.iam = (
            session.client(s, endpoint_url=url, config=config) for s in ("lambda", "dynamodb", "sqs", "iam")
        )
        self.table = f"runs-{uuid.uuid4().hex[:8]}"
        self.dynamodb.create_table(
            TableName=self.table,
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
        self.role = self.iam.create_role(
            RoleName=f"r-{uuid.uuid4().hex[:8]}", AssumeRolePolicyDocument=json.dumps(trust)
        )["Role"]["Arn"]

    def function(self, timeout: int = 10) -> str:
        name = f"fn-{uuid.uuid4().hex[:10]}"
        self.lam.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=self.role,
            Handler="app.handler",
            Timeout=timeout,
            Code={"ZipFile": zip_source(HANDLER)},
            Environment={"Variables": {"TABLE": self.table}},
        )
        return name

    def invoke(self, name: str, event: dict) -> tuple[str, dict]:
        """("ok", payload) or ("throttled", the error's Reason)."""
        try:
            response = self.lam.invoke(FunctionName=name, Payload=json.dumps(event).encode())
        except self.lam.exceptions.TooManyRequestsException as throttled:
            error = throttled.response
            assert error["ResponseMetadata"]["HTTPStatusCode"] == 429
            assert (error["Error"]["Message"], error["Type"]) == ("Rate Exceeded.", "User")
            return "throttled", error["Reason"]
        return "ok", json.loads(response["Payload"].read())

    def runs(self, event_id: str) -> int:
        items = self.dynamodb.scan(TableName=self.table)["Items"]
        return sum(1 for item in items if item["pk"]["S"].startswith(event_id + "#"))

    def failure_queue(self) -> tuple[str, str]:
        url = self.sqs.create_queue(QueueName=f"onfail-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        return url, self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def one_message(self, queue_url: str, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            messages = self.sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get("Messages", [])
            if messages:
                return json.loads(messages[0]["Body"])
        return None


@pytest.fixture(scope="module")
def lab(limited) -> Lab:
    return Lab(limited.url)


def together(lab: Lab, name: str, events: list[dict]) -> list[tuple[str, object]]:
    with ThreadPoolExecutor(max_workers=len(events)) as pool:
        return list(pool.map(lambda event: lab.invoke(name, event), events))


ROUNDS = 4


@pytest.mark.race
@pytest.mark.timeout(120)
def test_invocations_past_the_account_limit_are_throttled_and_never_run(lab):
    name = lab.function()
    for round_ in range(ROUNDS):
        event_id = f"account-{round_}"
        outcomes = together(lab, name, [{"id": event_id, "sleep": 2}] * (LIMIT + 2))
        assert sorted(kind for kind, _ in outcomes) == ["ok"] * LIMIT + ["throttled"] * 2, outcomes
        assert {reason for kind, reason in outcomes if kind == "throttled"} == {"ConcurrentInvocationLimitExceeded"}
        assert lab.runs(event_id) == LIMIT, "a throttled invocation must not run"


@pytest.mark.race
@pytest.mark.timeout(120)
def test_reserved_concurrency_caps_one_function(lab):
    name = lab.function()
    lab.lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=1)
    for round_ in range(ROUNDS):
        event_id = f"reserved-{round_}"
        outcomes = together(lab, name, [{"id": event_id, "sleep": 2}] * 3)
        assert sorted(kind for kind, _ in outcomes) == ["ok", "throttled", "throttled"], outcomes
        assert {reason for kind, reason in outcomes if kind == "throttled"} == {
            "ReservedFunctionConcurrentInvocationLimitExceeded"
        }
        assert lab.runs(event_id) == 1
    lab.lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=0)
    assert lab.invoke(name, {"id": "stopped"}) == ("throttled", "ReservedFunctionConcurrentInvocationLimitExceeded")
    assert lab.runs("stopped") == 0


@pytest.mark.timeout(120)
def test_idle_workers_are_reaped_on_a_timer_without_another_invoke(lab):
    kind, payload = lab.invoke(lab.function(), {"id": "reap"})
    assert kind == "ok"
    # Idle for 1 s, reaped by a timer a quarter of that: the wait ends when it is gone.
    deadline = time.monotonic() + 60
    while (live := health_answer(lab.url)["lambda_environments"]) and payload["pid"] in live:
        assert time.monotonic() < deadline, f"idle worker {payload['pid']} still live after 60 s: {live}"
        time.sleep(0.2)


@pytest.mark.timeout(240)
def test_async_events_too_old_to_run_go_to_the_on_failure_destination_unrun(lab):
    # A: fails, is retried after 25 s, fails again; a second retry would come at about
    #    75 s, past the 60 s maximum age, so Lambda gives up at once (lookahead).
    # B: waits throttled behind an invocation that holds the function's only unit of
    #    concurrency for 65 s; at 60 s it is too old, and is discarded without running.
    retried_queue, retried_arn = lab.failure_queue()
    retried = lab.function()
    lab.lam.put_function_event_invoke_config(
        FunctionName=retried,
        MaximumRetryAttempts=2,
        MaximumEventAgeInSeconds=60,
        DestinationConfig={"OnFailure": {"Destination": retried_arn}},
    )
    waiting_queue, waiting_arn = lab.failure_queue()
    blocked = lab.function(timeout=75)
    lab.lam.put_function_concurrency(FunctionName=blocked, ReservedConcurrentExecutions=1)
    lab.lam.put_function_event_invoke_config(
        FunctionName=blocked,
        MaximumRetryAttempts=2,
        MaximumEventAgeInSeconds=60,
        DestinationConfig={"OnFailure": {"Destination": waiting_arn}},
    )
    holder = threading.Thread(target=lab.invoke, args=(blocked, {"id": "holder", "sleep": 65}))
    holder.start()
    # B is sent only once the holder runs (holds the one unit): a cold start's length decides nothing.
    deadline = time.monotonic() + 60
    while lab.runs("holder") == 0:
        assert time.monotonic() < deadline, "the holder did not start running within 60 s"
        time.sleep(0.1)

    lab.lam.invoke(FunctionName=retried, InvocationType="Event", Payload=json.dumps({"id": "A", "fail": True}).encode())
    lab.lam.invoke(FunctionName=blocked, InvocationType="Event", Payload=json.dumps({"id": "B"}).encode())

    record_a = lab.one_message(retried_queue, timeout=100)
    assert record_a is not None
    assert record_a["requestContext"]["condition"] == "EventAgeExceeded"
    assert record_a["requestContext"]["approximateInvokeCount"] == 2
    assert record_a["responsePayload"]["errorMessage"] == "downstream unavailable"
    assert lab.runs("A") == 2

    record_b = lab.one_message(waiting_queue, timeout=60)
    holder.join()
    assert record_b is not None
    assert record_b["requestContext"]["condition"] == "EventAgeExceeded"
    assert record_b["requestContext"]["approximateInvokeCount"] == 0
    assert record_b["requestPayload"] == {"id": "B"} and "responsePayload" not in record_b
    assert lab.runs("B") == 0, "an event past its maximum age must not run"


def test_account_settings_report_the_limit_that_is_enforced(lab):
    def reserved_total() -> int:
        names = [fn["FunctionName"] for fn in lab.lam.list_functions()["Functions"]]
        return sum(
            lab.lam.get_function_concurrency(FunctionName=n).get("ReservedConcurrentExecutions") or 0 for n in names
        )

    name = lab.function()
    before = lab.lam.get_account_settings()["AccountLimit"]
    assert before["ConcurrentExecutions"] == LIMIT
    assert before["UnreservedConcurrentExecutions"] == max(0, LIMIT - reserved_total())
    lab.lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=1)
    after = lab.lam.get_account_settings()["AccountLimit"]
    assert after["UnreservedConcurrentExecutions"] == max(0, LIMIT - reserved_total())
