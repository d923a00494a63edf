"""The lab end to end on a running LocalStack (``make test-localstack``; in Docker or native):
the stack deployed through tflocal, its second plan, and every notebook headless.

Collected only with ``BACKEND=localstack`` (tests/conftest.py leaves this folder out
otherwise): these tests talk to the LocalStack that ``make up`` started, never to a backend
of their own.
"""

from __future__ import annotations

import pytest

from idemlab import backend, settings, stack


@pytest.fixture(scope="session")
def deployed() -> dict:
    """The learners' stack, deployed on the LocalStack that answers on LAB_PORT."""
    url = settings.endpoint_url()
    found = backend._localstack_health(url)
    assert found, f"no LocalStack answers on {url}: run `make up BACKEND=localstack` first"
    return stack.deploy()
