"""The backend conformance suite: what the lessons rely on, checked on the selected backend.

Each test pins one AWS behaviour and cites the AWS page that documents it, then runs it
against ``BACKEND`` (embedded, the default; localstack; aws). On embedded the suite uses
the session's embedded server (``backend`` in tests/conftest.py). On LocalStack and AWS it
uses the selected endpoint or the credential chain. Either way it creates every resource it
needs under one unique prefix and deletes them all at the end: it does not depend on the
Terraform stack.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from idemlab import clients, settings

# Read once, at collection: fixtures of other test files may rewrite the environment later.
SELECTED_BACKEND = os.environ.get("BACKEND", "").strip().lower() or "embedded"
if SELECTED_BACKEND not in settings.BACKENDS:
    raise pytest.UsageError(f"BACKEND={SELECTED_BACKEND!r} is not one of {', '.join(settings.BACKENDS)}")

FUNCTION_DIR = Path(__file__).parent / "function"
RUNTIME = "python3.12"
# IAM is eventually consistent on AWS: a new role can take seconds before Lambda or Step
# Functions may assume it, and both refuse until then. The emulators never refuse this way.
ROLE_PROPAGATION_SECONDS = 90
# Step Functions' trust, Lambda's and Scheduler's, in one role the suite creates.
TRUSTED_SERVICES = ["lambda.amazonaws.com", "states.amazonaws.com", "scheduler.amazonaws.com"]


class Sandbox:
    """Everything the suite creates on the backend: unique names, removed at the end."""

    def __init__(self, backend: str):
        self.backend = backend
        self.prefix = f"idemlab-conf-{uuid.uuid4().hex[:8]}"
        self._teardown: list[tuple[Callable, dict]] = []

    def name(self, kind: str) -> str:
        return f"{self.prefix}-{kind}-{uuid.uuid4().hex[:6]}"

    def tags(self) -> dict[str, str]:
        """On what the fixtures create: a run that never reached its teardown leaves resources
        a tag search finds (idemlab.workshop's listing finds them by name as well)."""
        return {"idemlab:participant": settings.participant(), "idemlab:conformance": self.prefix}

    def tag_list(self, key: str = "Key", value: str = "Value") -> list[dict[str, str]]:
        return [{key: name, value: text} for name, text in self.tags().items()]

    def client(self, service: str):
        return clients.client(service)

    def on_teardown(self, call: Callable, **kwargs) -> None:
        self._teardown.append((call, kwargs))

    def retry_while_role_propagates(self, call: Callable, codes: tuple[str, ...]):
        """Call until the backend stops refusing a fresh IAM role (only AWS ever does)."""
        deadline = time.monotonic() + ROLE_PROPAGATION_SECONDS
        while True:
            try:
                return call()
            except ClientError as exc:
                if exc.response["Error"]["Code"] not in codes or time.monotonic() > deadline:
                    raise
                time.sleep(3)

    def teardown(self) -> list[str]:
        """Undo everything, newest first; returns what could not be deleted."""
        leftovers = []
        for call, kwargs in reversed(self._teardown):
            try:
                call(**kwargs)
            except ClientError as exc:
                code = exc.response["Error"]["Code"]
                if "NotFound" not in code and "DoesNotExist" not in code:
                    leftovers.append(f"{getattr(call, '__name__', call)}({kwargs}): {code}")
        self._teardown.clear()
        return leftovers


@pytest.fixture(scope="session")
def sandbox(request) -> Sandbox:
    if SELECTED_BACKEND == "embedded":
        request.getfixturevalue("backend")  # the session's embedded server, on a free port
    else:
        os.environ["BACKEND"] = SELECTED_BACKEND
    box = Sandbox(SELECTED_BACKEND)
    yield box
    leftovers = box.teardown()
    assert not leftovers, f"the suite could not delete: {leftovers}"


@pytest.fixture(scope="session")
def role_arn(sandbox: Sandbox) -> str:
    """One execution role for the suite's functions, state machines and schedules."""
    iam = sandbox.client("iam")
    name = sandbox.name("role")
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": TRUSTED_SERVICES}, "Action": "sts:AssumeRole"}],
    }
    # Only what the suite's own resources need: logs, its table, its queues, its durable function.
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": "*",
            },
            {
                "Effect": "Allow",
                "Action": ["dynamodb:PutItem", "dynamodb:UpdateItem"],
                "Resource": f"arn:aws:dynamodb:*:*:table/{sandbox.prefix}-*",
            },
            # A durable function's checkpoints and state reads, on its executions (every version's):
            # the Lambda developer guide's durable-security page.
            {
                "Effect": "Allow",
                "Action": ["lambda:CheckpointDurableExecution", "lambda:GetDurableExecutionState"],
                "Resource": f"arn:aws:lambda:*:*:function:{sandbox.prefix}-*:*",
            },
            {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": f"arn:aws:sqs:*:*:{sandbox.prefix}-*"},
        ],
    }
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust), Tags=sandbox.tag_list())["Role"][
        "Arn"
    ]
    sandbox.on_teardown(iam.delete_role, RoleName=name)
    iam.put_role_policy(RoleName=name, PolicyName="conformance", PolicyDocument=json.dumps(policy))
    sandbox.on_teardown(iam.delete_role_policy, RoleName=name, PolicyName="conformance")
    return arn


@pytest.fixture(scope="session")
def table(sandbox: Sandbox) -> str:
    """A pay-per-request table keyed by a string ``pk``."""
    dynamodb = sandbox.client("dynamodb")
    name = sandbox.name("table")
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        Tags=sandbox.tag_list(),
    )
    sandbox.on_teardown(dynamodb.delete_table, TableName=name)
    dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    return name


@pytest.fixture(scope="session")
def queue(sandbox: Sandbox) -> dict:
    """A standard SQS queue: ``{"url": ..., "arn": ...}``."""
    sqs = sandbox.client("sqs")
    url = sqs.create_queue(QueueName=sandbox.name("queue"), tags=sandbox.tags())["QueueUrl"]
    sandbox.on_teardown(sqs.delete_queue, QueueUrl=url)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return {"url": url, "arn": arn}


@pytest.fixture(scope="session")
def function_zip() -> bytes:
    """Every module under tests/conformance/function/, zipped at the archive's root."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(FUNCTION_DIR.glob("*.py")):
            archive.write(path, path.name)
    return buffer.getvalue()


@pytest.fixture(scope="session")
def make_function(sandbox: Sandbox, role_arn: str, function_zip: bytes, table: str):
    """Create a function from the suite's zip with the given handler; returns its ARN."""
    lambda_ = sandbox.client("lambda")
    logs = sandbox.client("logs")

    def create(handler: str, timeout: int = 3) -> str:
        name = sandbox.name("fn")
        created = sandbox.retry_while_role_propagates(
            lambda: lambda_.create_function(
                FunctionName=name,
                Runtime=RUNTIME,
                Role=role_arn,
                Handler=handler,
                Code={"ZipFile": function_zip},
                Timeout=timeout,
                Environment={"Variables": {"TABLE": table}},
                Tags=sandbox.tags(),
            ),
            codes=("InvalidParameterValueException",),
        )
        sandbox.on_teardown(logs.delete_log_group, logGroupName=f"/aws/lambda/{name}")
        sandbox.on_teardown(lambda_.delete_function, FunctionName=name)
        # A new function is Pending on AWS until Lambda has prepared it.
        lambda_.get_waiter("function_active_v2").wait(FunctionName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        return created["FunctionArn"]

    return create


@pytest.fixture(scope="session")
def make_state_machine(sandbox: Sandbox, role_arn: str):
    """Create a state machine of the given type from an ASL dict; returns its ARN."""
    sfn = sandbox.client("stepfunctions")

    def create(definition: dict, machine_type: str = "STANDARD") -> str:
        arn = sandbox.retry_while_role_propagates(
            lambda: sfn.create_state_machine(
                name=sandbox.name(machine_type.lower()),
                definition=json.dumps(definition),
                roleArn=role_arn,
                type=machine_type,
                tags=sandbox.tag_list("key", "value"),
            ),
            codes=("AccessDeniedException",),
        )["stateMachineArn"]
        sandbox.on_teardown(sfn.delete_state_machine, stateMachineArn=arn)
        return arn

    return create
