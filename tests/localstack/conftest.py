"""The lab end to end on a running LocalStack (``make test-localstack``; in Docker or native):
the stack deployed through tflocal, its second plan, and every notebook headless.

Collected only with ``BACKEND=localstack`` (tests/conftest.py leaves this folder out
otherwise): the session's backend is then the LocalStack that ``make up`` started, and the
stack is the suite's (tests/conftest.py, ``stack``), as on the embedded backend.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def deployed(stack) -> dict:
    """The stack, deployed on the LocalStack that answers on LAB_PORT."""
    return stack
