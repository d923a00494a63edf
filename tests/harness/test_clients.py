"""The harness's boto3 clients send each call where the backend expects it.

Checked offline: a ``before-send`` hook records the URL botocore resolved and answers
the call itself, so nothing leaves the machine.
"""

from __future__ import annotations

import ast
import contextlib
import os

import pytest
from botocore.awsrequest import AWSResponse

from idemlab import clients

MACHINE = "arn:aws:states:eu-west-1:123456789012:stateMachine:m"


class _Headers(dict):
    def get_all(self, name, default=None):  # what botocore's response parser may ask for
        return [self[name]] if name in self else (default or [])


def sent_url(sfn) -> str:
    """The URL of a StartSyncExecution call, captured before it is sent."""
    seen: list[str] = []

    def capture(request, **_):
        seen.append(request.url)
        return AWSResponse(request.url, 200, _Headers({"Content-Type": "application/x-amz-json-1.0"}), None)

    sfn.meta.events.register("before-send.states.StartSyncExecution", capture)
    with contextlib.suppress(Exception):  # the empty answer does not parse; the URL is what is checked
        sfn.start_sync_execution(stateMachineArn=MACHINE, input="{}")
    assert len(seen) == 1
    return seen[0]


@pytest.fixture
def aws(monkeypatch):
    """The learner chose AWS: no endpoint override, a region and (fake) keys."""
    monkeypatch.setenv("BACKEND", "aws")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


def test_start_sync_execution_on_aws_goes_to_the_sync_states_host(aws):
    # AWS serves StartSyncExecution only at sync-states.<region> (botocore's host prefix).
    assert sent_url(clients.client("stepfunctions")).startswith("https://sync-states.eu-west-1.amazonaws.com")


def test_start_sync_execution_with_an_endpoint_goes_to_that_endpoint(aws):
    endpoint = "http://127.0.0.1:4566"
    assert sent_url(clients.client("stepfunctions", endpoint_url=endpoint)).startswith(endpoint + "/")


def test_start_sync_execution_on_an_emulator_goes_to_its_endpoint(monkeypatch):
    monkeypatch.setenv("BACKEND", "localstack")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("LAB_PORT", "4599")
    assert sent_url(clients.client("stepfunctions")).startswith("http://127.0.0.1:4599/")


KEYS_AND_REGION = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION")


@pytest.fixture
def learner_shell(monkeypatch):
    """A learner's shell on an emulator: no AWS variables at all."""
    monkeypatch.setenv("BACKEND", "localstack")
    monkeypatch.setenv("LAB_PORT", "4599")
    for name in (*KEYS_AND_REGION, "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def test_an_emulator_client_has_dummy_keys_and_writes_nothing_into_the_environment(learner_shell):
    dynamodb = clients.client("dynamodb")
    assert dynamodb._request_signer._credentials.access_key == "test"
    assert [name for name in KEYS_AND_REGION if name in os.environ] == []
    assert clients.endpoint() == "http://127.0.0.1:4599"
    assert [name for name in KEYS_AND_REGION if name in os.environ] == []


def test_the_notebooks_first_cell_gives_code_in_process_the_dummy_keys_and_region(learner_shell):
    assert clients.use_emulator_environment() == "http://127.0.0.1:4599"
    assert {name: os.environ[name] for name in KEYS_AND_REGION} == {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def test_keys_the_environment_names_win_over_the_dummy_ones(learner_shell, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "mine")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "my-secret")
    clients.use_emulator_environment()
    assert os.environ["AWS_ACCESS_KEY_ID"] == "mine"
    assert clients.client("dynamodb")._request_signer._credentials.access_key == "mine"


def test_on_aws_the_first_cell_changes_no_environment(aws):
    before = dict(os.environ)
    assert clients.use_emulator_environment() is None
    assert dict(os.environ) == before


# Lesson code that must take one path on every backend, and the branches on the backend
# it may keep, each with its reason (also in docs/DESIGN.md).
ONE_PATH = ("idemlab/lessons", "idemlab/exercises", "idemlab/bench", "notebooks")
ALLOWED_BRANCHES = {
    # `make bench BACKEND=aws` measures the same strategies on AWS, where no request counter
    # exists: comparing backends is what the bench is for. It is not lesson code.
    "idemlab/bench/__main__.py": "the bench's --backend option (default: the BACKEND variable)",
}


def branches_on_backend(source: str) -> list[str]:
    """Where Python source asks which backend it runs on: a call of ``settings.backend()``
    (or of ``backend`` imported from ``idemlab.settings``, under any name), or a read of
    the ``BACKEND`` environment variable. Read from the syntax tree, so no spelling hides it."""
    tree = ast.parse(source)
    backend_names: set[str] = set()  # what `backend` of idemlab.settings is called here
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "idemlab.settings":
            backend_names |= {alias.asname or alias.name for alias in node.names if alias.name == "backend"}
    found = []
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call):
            function = node.func
            calls_settings_backend = (
                isinstance(function, ast.Attribute)
                and function.attr == "backend"
                and isinstance(function.value, ast.Name)
                and function.value.id == "settings"
            )
            if calls_settings_backend:
                found.append(f"{where}: settings.backend()")
            if isinstance(function, ast.Name) and function.id in backend_names:
                found.append(f"{where}: {function.id}() from idemlab.settings")
            # os.environ.get("BACKEND"), os.getenv("BACKEND")
            named = [arg.value for arg in node.args[:1] if isinstance(arg, ast.Constant)]
            if named == ["BACKEND"] and isinstance(function, ast.Attribute) and function.attr in ("get", "getenv"):
                found.append(f"{where}: reads the BACKEND variable")
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "BACKEND":
            found.append(f"{where}: reads the BACKEND variable")
    return found


def python_sources(path) -> list[str]:
    """The Python of a module, or of a notebook's code cells (IPython's ! and % lines left out)."""
    import json

    if path.suffix == ".py":
        return [path.read_text()]
    cells = [cell for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]
    sources = []
    for cell in cells:
        lines = "".join(cell["source"]).splitlines()
        sources.append("\n".join(line for line in lines if not line.lstrip().startswith(("!", "%"))))
    return sources


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from idemlab import settings\nif settings.backend() == 'aws':\n    pass\n", ["line 2: settings.backend()"]),
        ("from idemlab.settings import backend as which\nwhich()\n", ["line 2: which() from idemlab.settings"]),
        ("import os\nos.environ.get('BACKEND')\n", ["line 2: reads the BACKEND variable"]),
        ("import os\nos.environ['BACKEND']\n", ["line 2: reads the BACKEND variable"]),
        ("# settings.backend() in a comment is no branch\nx = 'backend()'\n", []),
    ],
    ids=["settings.backend()", "imported under another name", "environ.get", "environ[]", "comment and string"],
)
def test_the_backend_branch_guard_reads_the_code_not_its_text(source, expected):
    assert branches_on_backend(source) == expected


def test_lesson_code_does_not_branch_on_the_backend():
    from idemlab import settings

    found = {}
    for folder in ONE_PATH:
        for path in sorted((settings.ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".ipynb") or ".ipynb_checkpoints" in path.parts:
                continue
            branches = [branch for source in python_sources(path) for branch in branches_on_backend(source)]
            if branches:
                found[str(path.relative_to(settings.ROOT))] = branches
    unexplained = {path: branches for path, branches in found.items() if path not in ALLOWED_BRANCHES}
    assert not unexplained, f"lesson code branches on the backend: {unexplained}"
    stale = set(ALLOWED_BRANCHES) - set(found)
    assert not stale, f"ALLOWED_BRANCHES lists files that no longer branch: {sorted(stale)}"
