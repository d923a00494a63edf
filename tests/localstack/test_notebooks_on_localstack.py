"""Every notebook, headless, against the stack deployed on LocalStack, in a learner's
environment (tests/lessons/test_notebooks.py runs the same notebooks on the embedded backend)."""

from __future__ import annotations

import pytest

from idemlab import settings
from lessons.test_notebooks import NOTEBOOKS, execute, learner_environment


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_on_localstack(deployed, path, record_property):
    environment = learner_environment() | {"BACKEND": "localstack", "LAB_PORT": str(settings.port())}
    execute(path, environment, record_property)
