"""The pytest plugin (registered under the `pytest11` entry point as `idemlab`).

Fixtures:
- `idemlab_backend` (session): the embedded backend on a free loopback port. It needs
  no Docker, no network beyond loopback and no AWS credentials.
- `idemlab` (per test): a `Lab` on that backend. While the test runs, boto3 in the test
  process points at the backend (AWS_ENDPOINT_URL, dummy credentials, a region); the
  variables are restored when the test ends, and tables it made are deleted. Setting
  them per test keeps the plugin out of tests that do not ask for it (a suite with a
  backend fixture of its own keeps talking to that one).

Disable with `pytest -p no:idemlab`.
"""

from __future__ import annotations

import pytest

_START_SECONDS = pytest.StashKey[float]()


@pytest.fixture(scope="session")
def idemlab_backend(pytestconfig):
    """The embedded backend, started once per session on a free loopback port."""
    from idemlab.testing.lab import Backend

    backend = Backend().start()
    pytestconfig.stash[_START_SECONDS] = backend.start_seconds
    try:
        yield backend
    finally:
        backend.stop()


@pytest.fixture
def idemlab(idemlab_backend):
    """A Lab for this test: boto3 points at the backend while it runs; its tables go after."""
    from idemlab.testing.lab import LOCAL_VARIABLES, Lab, aws_environment

    # boto3 (and the AWS CLI) in the test process point at the backend.
    with aws_environment({"AWS_ENDPOINT_URL": idemlab_backend.url, **LOCAL_VARIABLES}):
        lab = Lab(idemlab_backend)
        try:
            yield lab
        finally:
            lab.close()


def pytest_terminal_summary(terminalreporter, config):
    if _START_SECONDS in config.stash:
        terminalreporter.write_line(f"idemlab: the embedded backend started in {config.stash[_START_SECONDS]:.2f} s")
