"""The pytest plugin, registered under the `pytest11` entry point as `idemlab` (disable with
`pytest -p no:idemlab`). `idemlab_backend` (session): the embedded backend on a free loopback
port, needing no Docker, no network beyond loopback and no AWS credentials. `idemlab` (per
test): a `Lab` on it. boto3 in the test process points at the backend only while a test that
asks for `idemlab` runs, so a suite with a backend fixture of its own keeps talking to that one.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from idemlab.testing.lab import LOCAL_VARIABLES, Backend, Lab, aws_environment

_START_SECONDS = pytest.StashKey[float]()


@pytest.fixture(scope="session")
def idemlab_backend(pytestconfig):
    """The embedded backend, started once per session on a free loopback port."""
    started = time.perf_counter()
    with Backend() as backend:
        pytestconfig.stash[_START_SECONDS] = time.perf_counter() - started
        yield backend


@pytest.fixture
def idemlab(idemlab_backend):
    """A Lab for this test: boto3 points at the backend while it runs; its tables go after."""
    with aws_environment({"AWS_ENDPOINT_URL": idemlab_backend.url, **LOCAL_VARIABLES}):
        with contextlib.closing(Lab(idemlab_backend)) as lab:
            yield lab


def pytest_terminal_summary(terminalreporter, config):
    if _START_SECONDS in config.stash:
        terminalreporter.write_line(f"idemlab: the embedded backend started in {config.stash[_START_SECONDS]:.2f} s")
