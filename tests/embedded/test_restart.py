"""The embedded backend keeps everything in memory: a stop says what it discards, and a
notebook that connects to a restarted backend is told to deploy again, not handed a raw error."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from idemlab import lab, stack
from idemlab.embedded.server import EmbeddedBackend, free_port
from support.cli import lab_cli
from tests.conftest import zip_source

TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


def aws(url: str, service: str):
    return boto3.client(
        service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    )


def make_function(url: str) -> str:
    role = aws(url, "iam").create_role(
        RoleName=f"r-{uuid.uuid4().hex[:8]}", AssumeRolePolicyDocument=json.dumps(TRUST)
    )["Role"]["Arn"]
    name = f"fn-{uuid.uuid4().hex[:8]}"
    aws(url, "lambda").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="app.handler",
        Code={"ZipFile": zip_source("def handler(event, context):\n    return 1\n")},
    )
    return name


@pytest.mark.timeout(120)
def test_make_down_says_how_much_accepted_work_the_stop_discards():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        started = lab_cli("up", port=port)
        assert started.returncode == 0, started.stderr
        # 30 Event invokes accepted (202) and held back: reserved concurrency 0 throttles each
        # attempt, and a throttled event waits to be tried again, for up to 6 hours.
        name = make_function(url)
        lam = aws(url, "lambda")
        lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=0)
        for n in range(30):
            assert (
                lam.invoke(FunctionName=name, InvocationType="Event", Payload=json.dumps({"n": n}).encode())[
                    "StatusCode"
                ]
                == 202
            )
        sqs = aws(url, "sqs")
        queue = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        for n in range(5):
            sqs.send_message(QueueUrl=queue, MessageBody=str(n))
    finally:
        stopped = lab_cli("down", port=port)
    assert stopped.returncode == 0, stopped.stderr
    assert (
        "stopping discards 30 accepted async invocation(s) not yet finished and 5 SQS message(s), "
        "with 1 function(s), 1 queue(s) and 0 table(s)"
    ) in stopped.stdout, stopped.stdout
    assert "embedded backend stopped" in stopped.stdout


@pytest.mark.timeout(120)
def test_connect_to_a_restarted_backend_says_to_deploy_again(monkeypatch):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    for name, value in {
        "BACKEND": "embedded",
        "LAB_PORT": str(port),
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    prefix = f"restart{uuid.uuid4().hex[:6]}"
    outputs_file = stack.OUTPUTS_DIR / f"{stack.stack_name(prefix)}.json"
    try:
        with EmbeddedBackend(port) as backend:
            table = f"t-{uuid.uuid4().hex[:8]}"
            aws(backend.url, "dynamodb").create_table(
                TableName=table,
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            outputs = {"tables": {"records": table}, "functions": {"worker": make_function(backend.url)}}
            outputs_file.parent.mkdir(parents=True, exist_ok=True)
            outputs_file.write_text(json.dumps(outputs))  # what a deploy leaves behind
            assert lab.connect(prefix) == outputs
        with EmbeddedBackend(port):  # the same port, a new process: nothing of the old one
            with pytest.raises(stack.StackError) as refused:
                lab.connect(prefix)
        assert str(refused.value).startswith("the backend restarted: run `make deploy`")
        assert table in str(refused.value)
    finally:
        outputs_file.unlink(missing_ok=True)
