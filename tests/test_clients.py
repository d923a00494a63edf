"""The harness's boto3 clients send each call where the backend expects it.

Checked offline: a ``before-send`` hook records the URL botocore resolved and answers
the call itself, so nothing leaves the machine.
"""

from __future__ import annotations

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
    try:
        sfn.start_sync_execution(stateMachineArn=MACHINE, input="{}")
    except Exception:  # the empty answer does not parse; the URL is what is checked
        pass
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


# Lesson code that must take one path on every backend, and the branches on the backend
# it may keep (each listed, with its reason, in docs/DESIGN.md): none today.
ONE_PATH = ("idemlab/lessons", "idemlab/exercises", "idemlab/bench", "notebooks")
ALLOWED_BRANCHES: set[str] = set()


def test_lesson_code_does_not_branch_on_the_backend():
    from idemlab import settings

    found = set()
    for folder in ONE_PATH:
        for path in sorted((settings.ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".ipynb") and "backend()" in path.read_text():
                found.add(str(path.relative_to(settings.ROOT)))
    assert found <= ALLOWED_BRANCHES, f"branches on settings.backend() in lesson code: {sorted(found - ALLOWED_BRANCHES)}"
