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

import os

import pytest

# Variables that would send boto3 elsewhere than AWS_ENDPOINT_URL, or to a real account.
_CLEARED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")


@pytest.fixture(scope="session")
def idemlab_backend():
    """The embedded backend, started once per session on a free loopback port."""
    from idemlab.testing.lab import Backend

    backend = Backend().start()
    try:
        yield backend
    finally:
        backend.stop()


@pytest.fixture
def idemlab(idemlab_backend, monkeypatch):
    """A Lab for this test: boto3 points at the backend while it runs; its tables go after."""
    from idemlab.testing.lab import Lab

    for name in list(os.environ):
        if name in _CLEARED or name.startswith("AWS_ENDPOINT_URL_"):  # per-service endpoints win over AWS_ENDPOINT_URL
            monkeypatch.delenv(name)
    for name, value in idemlab_backend.environment().items():
        monkeypatch.setenv(name, value)
    lab = Lab(idemlab_backend)
    try:
        yield lab
    finally:
        lab.close()
