"""Fixtures shared by every test: a real embedded backend on loopback, and the stack.

`backend` starts the embedded server in its own process on a free port, once per
test session, and points every boto3 client (and the harness) at it.
`stack` applies the Terraform root to that backend once and returns the `lab` map; the
apply starts in the background as soon as the backend is up (BackgroundDeploy).
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

from idemlab import clients, settings
from idemlab.embedded.server import EmbeddedBackend
from support.scheduling import DURATIONS_FILE, SEED_FILE, measured, record, scheduling_order, scope_key, scope_of
from support.suite_timeouts import suite_functions, suite_queues

# Long files that use no `lab` stack: each worker starts with one of these while its
# stack deploys in the background (`early_stack`), so the deploy's minute of waiting on
# Terraform's polls (two rounds of SQS queues at 25 s each) overlaps with tests. Each is a
# path under tests/, as scope_key writes it; checked at collection, and
# tests/harness/test_layout.py checks that each names a file.
WITHOUT_STACK = (
    "terraform/test_lifecycle.py",
    "plugin/test_example.py",
    "terraform/test_static.py",
    "embedded/test_dynamodb.py",
    "plugin/test_deliver.py",
    "embedded/test_limits.py",
    "embedded/test_event_source.py",
)


# The LocalStack stage (`make test-localstack`, BACKEND=localstack): the session's backend is
# the LocalStack `make up` started on LAB_PORT, not an embedded server of its own, and
# tests/localstack/ is collected. The embedded suite never collects that folder.
LOCALSTACK_STAGE = os.environ.get("BACKEND", "").strip().lower() == "localstack"
if not LOCALSTACK_STAGE:
    collect_ignore = ["localstack"]

# The timeout of a function a test makes with `make_function` unless it asks for another.
FUNCTION_TIMEOUT_SECONDS = 30
_WANTS_STACK = pytest.StashKey[bool]()
_DEPLOY = pytest.StashKey["BackgroundDeploy"]()


# Folders whose every test holds on any backend: the LocalStack stage selects `any_backend`.
ANY_BACKEND_FOLDERS = ("conformance", "localstack")


def pytest_collection_modifyitems(config, items):
    tests = config.rootpath / "tests"
    for item in items:
        if any(item.path.is_relative_to(tests / folder) for folder in ANY_BACKEND_FOLDERS):
            item.add_marker(pytest.mark.any_backend)
    stacked = [
        item.nodeid
        for item in items
        if scope_key(scope_of(item.nodeid)) in WITHOUT_STACK and "stack" in item.fixturenames
    ]
    if stacked:
        raise pytest.UsageError(f"WITHOUT_STACK lists files whose tests use the stack: {stacked}")
    config.stash[_WANTS_STACK] = any("stack" in item.fixturenames for item in items)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    # Every worker reads the same file (only the controller writes it, at the end), so all
    # collect the same order, as xdist requires.
    seconds = measured(config.rootpath / DURATIONS_FILE) or measured(config.rootpath / SEED_FILE)
    order = scheduling_order([item.nodeid for item in items], workers, seconds, WITHOUT_STACK)
    position = {nodeid: n for n, nodeid in enumerate(order)}
    items.sort(key=lambda item: position[item.nodeid])


# Seconds per scope key measured in this run (support/scheduling.py says what it is for).
_durations_of_this_run: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Sum each scope's setup, call and teardown time, as reports arrive (on the xdist
    controller, from every worker)."""
    key = scope_key(scope_of(report.nodeid))
    _durations_of_this_run[key] = _durations_of_this_run.get(key, 0.0) + report.duration


def pytest_sessionfinish(session):
    """The controller (or a run without xdist) keeps what this run measured for the next."""
    if hasattr(session.config, "workerinput") or not _durations_of_this_run:
        return
    record(session.config.rootpath / DURATIONS_FILE, _durations_of_this_run)


def pytest_xdist_make_scheduler(config, log):
    """`make test` spreads the suite over worker processes (pytest-xdist), each with its
    own embedded backend and stack. A test file goes to one worker whole, so its module
    fixtures (a race's rounds, say) run once; each test of SPLIT_BY_TEST goes on its own.
    Scopes are handed out in collection order (scheduling_order, applied by every worker
    alike), not re-sorted by xdist's --loadscope-reorder, which puts the files with the
    most tests first whatever they cost. (xdist's own --dist loadgroup did not group here,
    with pytest 9.2.0 and xdist 3.8.0, not even explicit marks.)"""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class FilesAndSplitTests(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return FilesAndSplitTests(config, log)


class RunningLocalStack:
    """The LocalStack stage's backend: the one `make up BACKEND=localstack` started on LAB_PORT.
    The stage stops it (`make down`), not the session."""

    def __init__(self):
        from idemlab.backends import localstack_common

        self.port = settings.port()
        self.url = f"http://127.0.0.1:{self.port}"
        assert localstack_common.health(self.url), (
            f"no LocalStack answers on {self.url}: run `make up BACKEND=localstack`"
        )

    def stop(self) -> None:
        pass


class BackgroundDeploy:
    """`idemlab.stack.deploy()` in a child process of its own, started as soon as the
    backend is up: the tests that need no stack run meanwhile. The child gets a copy of
    this moment's environment, so what a test sets later (monkeypatch) never reaches it."""

    # On one LocalStack the stage's workers deploy one at a time. Two applies at once there
    # failed once: LocalStack answered the second stack's AddPermission for its sweeper with
    # "statement id already exists" (409) for five minutes, until Terraform gave up; on its
    # own a stack has never met it. The other worker runs its stack-free tests meanwhile.
    SCRIPT = textwrap.dedent(
        """
        import fcntl, json, os, sys
        from idemlab import settings, stack
        settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
        with open(settings.STATE_DIR / f"suite-deploy-{settings.port()}.lock", "w") as lock:
            if os.environ["BACKEND"] == "localstack":
                fcntl.flock(lock, fcntl.LOCK_EX)
            lab = stack.deploy()
        sys.stdout.write(json.dumps(lab))
        """
    )

    def __init__(self):
        import subprocess
        import sys

        self.process = subprocess.Popen(
            [sys.executable, "-c", self.SCRIPT],
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: Terraform stops with it
        )
        self.output: tuple[str, str] | None = None
        self.lab: dict | None = None

    def wait(self) -> None:
        """Until the deploy's process has ended, however long that takes (Terraform ends it:
        it gives up on a resource by its own timeouts); its output is kept for ``result``."""
        if self.output is None:
            self.output = self.process.communicate()

    def result(self) -> dict:
        from idemlab import stack as lab_stack

        if self.lab is None:
            self.wait()
            out, err = self.output
            if self.process.returncode != 0:
                raise lab_stack.StackError(
                    f"the background deploy failed (exit {self.process.returncode}):\n{err[-4000:]}"
                )
            print(err.strip())  # "deployed <name> in <seconds> s"
            self.lab = json.loads(out)
        return self.lab

    def stop(self) -> None:
        """End a deploy nobody waited for (this worker got no stack test)."""
        import signal

        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        self.wait()


_BACKEND = pytest.StashKey["RunningLocalStack | EmbeddedBackend | Exception"]()


def start_session_backend(config) -> None:
    """Start the session's backend, once (and with it the stack's background deploy, in a
    session with stack tests). A failure to start is kept: `session_backend` raises it."""
    if _BACKEND not in config.stash:
        try:
            config.stash[_BACKEND] = start_backend(config)
        except Exception as exc:
            config.stash[_BACKEND] = exc


def session_backend(config):
    """The session's backend, started on first use; its failure to start, raised again to
    every test that asks."""
    start_session_backend(config)
    found = config.stash[_BACKEND]
    if isinstance(found, Exception):
        raise found
    return found


def start_backend(config):
    os.environ.update(
        {
            "BACKEND": "localstack" if LOCALSTACK_STAGE else "embedded",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            # Every stack a test deploys (idemlab.stack runs Terraform in this environment).
            "TF_VAR_functions": json.dumps(suite_functions()),
            "TF_VAR_queues": json.dumps(suite_queues()),
        }
    )
    if LOCALSTACK_STAGE:
        server = RunningLocalStack()
        # The stage's workers share one LocalStack: each deploys and uses a stack of its own,
        # under a participant prefix, as a workshop's participants share one account.
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        if worker:
            os.environ["PARTICIPANT"] = f"{settings.DEFAULT_PARTICIPANT}-{worker}"
    else:
        # Each environment's init deadline is the runtime's own (lambda_runtime.INIT_TIMEOUT_SECONDS).
        server = EmbeddedBackend().start()
    os.environ["AWS_ENDPOINT_URL"] = server.url
    os.environ["LAB_PORT"] = str(server.port)
    if config.stash.get(_WANTS_STACK, False):
        config.stash[_DEPLOY] = BackgroundDeploy()
    return server


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item):
    """Before a test's time starts (pytest-timeout counts setup too), a session with stack
    tests has its backend up, and a test that uses the stack has it deployed: the deploy is
    waited for until its process ends, not for as long as one test may take. On the
    LocalStack stage a worker's deploy may first wait for the other worker's (one CI run:
    the first stack test of the second worker spent its 300 s in setup, and every stack test
    of that worker failed with it)."""
    if item.config.stash.get(_WANTS_STACK, False):
        start_session_backend(item.config)  # a failure is the `backend` fixture's to report
        deploy = item.config.stash.get(_DEPLOY, None)
        if deploy is not None and "stack" in item.fixturenames:
            deploy.wait()
    yield


@pytest.fixture(scope="session")
def backend(pytestconfig):
    server = session_backend(pytestconfig)
    yield server.url
    deploy = pytestconfig.stash.get(_DEPLOY, None)
    if deploy is not None and deploy.lab is None:
        from idemlab import stack as lab_stack

        deploy.stop()
        lab_stack.forget()
    server.stop()


@pytest.fixture(scope="session", autouse=True)
def early_stack(request):
    """In a session with stack tests, every test has the backend (it started before the
    first test, `pytest_runtest_protocol`), so the session's end stops it."""
    if request.config.stash.get(_WANTS_STACK, False):
        request.getfixturevalue("backend")


@pytest.fixture(scope="session")
def stack(backend, pytestconfig):
    from idemlab import stack as lab_stack

    deploy = pytestconfig.stash.get(_DEPLOY, None) or BackgroundDeploy()
    yield deploy.result()
    # The backend dies with the session; its Terraform state and outputs would only
    # describe a port that no longer answers.
    lab_stack.forget()


@pytest.fixture(scope="session")
def lambda_role(backend) -> str:
    """An IAM role for functions created directly by tests (moto checks it exists)."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    role = clients.client("iam").create_role(
        RoleName=f"test-{uuid.uuid4().hex[:8]}", AssumeRolePolicyDocument=json.dumps(trust)
    )
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

    def ran_with(self, event_id: str, timeout: float = 120) -> bool:
        """Whether an invocation with this id has run, waiting up to `timeout` seconds (it
        ends as soon as it has: the room is for an asynchronous path and a cold start on a
        loaded runner)."""
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
    """Create a Lambda function from handler source; returns its name.

    The function's clock starts when its request reaches a ready worker, so a handler that
    makes a boto3 client and a call does that inside its timeout: on a loaded 2-core runner
    that alone has taken more than 3 s. The default leaves room (under the SDK's 60 s read
    timeout, past which a synchronous Invoke would be sent again); a handler that returns
    is never held by it, and a test that needs a timeout to fire passes its own."""

    def create(source: str, timeout: int = FUNCTION_TIMEOUT_SECONDS, environment: dict | None = None, **extra) -> str:
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
