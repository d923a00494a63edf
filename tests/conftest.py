"""Fixtures shared by every test: a real embedded backend on loopback, and the stack.

`backend` starts the embedded server in its own process on a free port, once per
test session, and points every boto3 client (and the harness) at it.
`stack` applies the Terraform root to that backend once and returns the `lab` map.
"""

from __future__ import annotations

import io
import json
import os
import textwrap
import time
import uuid
import zipfile

import pytest

from idemlab import clients
from idemlab.embedded.server import EmbeddedBackend
from suite_timeouts import suite_functions


# The files that take longest (make test's --durations), started first so that no worker
# begins one of them when the others are nearly done. The rest keep their usual order.
LONGEST_FIRST = (
    "test_deletion_stack.py",
    "test_notebooks.py",
    "test_terraform_lifecycle.py",
    "test_bench_notebook_backend.py",
    "test_bench_strategy_counts.py",
    "test_queue_lesson.py",
    "test_embedded_dynamodb.py",
    "test_plugin_example.py",
    "test_embedded_limits.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file keeps its order


def pytest_xdist_make_scheduler(config, log):
    """`make test` spreads the suite over worker processes (pytest-xdist), each with its
    own embedded backend and stack. A test file goes to one worker whole, so its module
    fixtures (a race's rounds, say) run once; each notebook goes on its own, since they
    are the longest tests and share nothing but the stack. (xdist's own --dist loadgroup
    did not group here, with pytest 9.2.0 and xdist 3.8.0, not even explicit marks.)"""
    from xdist.scheduler import LoadScopeScheduling

    class FilesAndNotebooks(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path.endswith("test_notebooks.py") else path

    return FilesAndNotebooks(config, log)


@pytest.fixture(scope="session")
def backend():
    os.environ.update(
        {
            "BACKEND": "embedded",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            # Every stack a test deploys (idemlab.stack runs Terraform in this environment).
            "TF_VAR_functions": json.dumps(suite_functions()),
        }
    )
    server = EmbeddedBackend().start()
    os.environ["AWS_ENDPOINT_URL"] = server.url
    os.environ["LAB_PORT"] = str(server.port)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def stack(backend):
    from idemlab import stack as lab_stack

    yield lab_stack.deploy()
    # The backend dies with the session; its Terraform state and outputs would only
    # describe a port that no longer answers.
    lab_stack.forget()


@pytest.fixture(scope="session")
def lambda_role(backend) -> str:
    """An IAM role for functions created directly by tests (moto checks it exists)."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    role = clients.client("iam").create_role(RoleName=f"test-{uuid.uuid4().hex[:8]}", AssumeRolePolicyDocument=json.dumps(trust))
    return role["Role"]["Arn"]


@pytest.fixture
def table(backend) -> str:
    """A fresh pay-per-request table keyed by a string `pk`."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    clients.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


class RecordingFunction:
    """A Lambda function that stores each event's `id` in a table: proof it ran."""

    HANDLER = """
    import os, boto3
    def handler(event, context):
        boto3.client("dynamodb").put_item(TableName=os.environ["TABLE"], Item={"pk": {"S": event["id"]}})
    """

    def __init__(self, make_function, table: str):
        self.table = table
        name = make_function(self.HANDLER, environment={"TABLE": table})
        self.arn = clients.client("lambda").get_function(FunctionName=name)["Configuration"]["FunctionArn"]

    def ran_with(self, event_id: str, timeout: float = 20) -> bool:
        """Whether an invocation with this id has run, waiting up to `timeout` seconds."""
        dynamodb = clients.client("dynamodb")
        deadline = time.monotonic() + timeout
        while "Item" not in dynamodb.get_item(TableName=self.table, Key={"pk": {"S": event_id}}):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True


@pytest.fixture
def recording_function(make_function, table) -> RecordingFunction:
    return RecordingFunction(make_function, table)


def zip_source(source: str, module: str = "app") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{module}.py", textwrap.dedent(source))
    return buffer.getvalue()


@pytest.fixture
def make_function(lambda_role):
    """Create a Lambda function from handler source; returns its name."""

    def create(source: str, timeout: int = 3, environment: dict | None = None, **extra) -> str:
        name = f"fn-{uuid.uuid4().hex[:10]}"
        clients.client("lambda").create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=lambda_role,
            Handler="app.handler",
            Code={"ZipFile": zip_source(source)},
            Timeout=timeout,
            Environment={"Variables": environment or {}},
            **extra,
        )
        return name

    return create
